package btree

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// setCrashBeforeCommit makes t's deletes return err just before their
// commit (nil: commit).
func (t *Tree) setCrashBeforeCommit(err error) { t.knobs.crashBeforeCommit = err }

// walk marks the nodes reachable from root and counts the keys: the full
// walk every commit did before the bitmap and count were kept
// incrementally, kept here as the reference they are checked against.
func (t *Tree) walk(root, height uint32) ([]uint64, uint64, error) {
	want := make([]uint64, len(t.bm[0]))
	var count uint64
	level := []uint32{root}
	for depth := uint32(0); depth < height; depth++ {
		var next []uint32
		for _, id := range level {
			if id == 0 || uint64(id) >= t.g.capacity || want[id/64]&(1<<(id%64)) != 0 {
				return nil, 0, fmt.Errorf("%w: node %d bad or reached twice", ErrCorrupt, id)
			}
			want[id/64] |= 1 << (id % 64)
			nd, err := t.readNode(id)
			if err != nil {
				return nil, 0, err
			}
			if nd.leaf != (depth == height-1) {
				return nil, 0, fmt.Errorf("%w: node %d at depth %d of %d is leaf=%v", ErrCorrupt, id, depth, height, nd.leaf)
			}
			if nd.leaf {
				count += uint64(len(nd.vals))
				continue
			}
			for _, c := range nd.vals {
				next = append(next, uint32(c))
			}
		}
		level = next
	}
	return want, count, nil
}

// verifyDerived checks the state a commit keeps incrementally against a
// full walk of the committed tree and the PM bytes: the committed bitmap
// and the key count equal the walk's, both volatile bitmaps equal their PM
// copies, the words outside t.diff are equal in both, nodes is the
// committed bitmap's population, no node below hint is free, and the
// scratch bitmap of changes is clear.
func (t *Tree) verifyDerived() error {
	want, count, err := t.walk(t.cur.root, t.cur.height)
	if err != nil {
		return err
	}
	c := t.cur.seq & 1
	if count != t.cur.count {
		return fmt.Errorf("%w: count %d, a walk finds %d", ErrCorrupt, t.cur.count, count)
	}
	inDiff := map[int]bool{}
	for _, w := range t.diff {
		inDiff[w] = true
	}
	nodes := 0
	for w := range want {
		if t.bm[c][w] != want[w] {
			return fmt.Errorf("%w: bitmap word %d is %#x, a walk gives %#x", ErrCorrupt, w, t.bm[c][w], want[w])
		}
		if !inDiff[w] && t.bm[0][w] != t.bm[1][w] {
			return fmt.Errorf("%w: bitmap word %d differs between parities (%#x, %#x) but is not listed", ErrCorrupt, w, t.bm[0][w], t.bm[1][w])
		}
		nodes += bits.OnesCount64(want[w])
	}
	if nodes != t.nodes {
		return fmt.Errorf("%w: %d nodes counted, the bitmap has %d", ErrCorrupt, t.nodes, nodes)
	}
	for id := uint64(1); id < t.hint && id < t.g.capacity; id++ {
		if want[id/64]&(1<<(id%64)) == 0 {
			return fmt.Errorf("%w: node %d is free, below the hint %d", ErrCorrupt, id, t.hint)
		}
	}
	for w, v := range t.reach {
		if v != 0 {
			return fmt.Errorf("%w: scratch word %d is %#x between commits", ErrCorrupt, w, v)
		}
	}
	for p := range 2 {
		b := make([]byte, t.g.bitmapBytes())
		if err := t.read(t.r.Base.Add(t.g.bitmapOff(p)), b); err != nil {
			return err
		}
		for w := range t.bm[p] {
			if got := binary.LittleEndian.Uint64(b[8*w:]); got != t.bm[p][w] {
				return fmt.Errorf("%w: bitmap %d word %d is %#x in PM, %#x in memory", ErrCorrupt, p, w, got, t.bm[p][w])
			}
		}
	}
	return nil
}
