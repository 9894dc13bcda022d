package btree

import (
	"fmt"
	"slices"
)

// Put sets key to val: a batch of one key (one small kernel launch on the
// tree's machine, then the commit).
func (t *Tree) Put(key, val uint64) error {
	_, err := t.InsertBatch([]uint64{key}, []uint64{val}, BatchOptions{BlockThreads: 1})
	return err
}

// Delete removes key and reports whether the tree held it.
//
// Deletion is not batched and not yet incremental: the tree is rewritten
// into fresh nodes (copy-on-write of everything, committed with one store
// of the commit word), which keeps every node at least half full and the
// leaf chain exact but costs time proportional to the tree. An incremental
// delete that borrows from and merges with siblings is future work.
func (t *Tree) Delete(key uint64) (bool, error) {
	if _, ok, err := t.pending(); err != nil || ok {
		if err != nil {
			return false, err
		}
		return false, ErrRecovery
	}
	_, found, err := t.Get(key)
	if err != nil || !found {
		return false, err
	}
	var ks, vs []uint64
	if err := t.scan(0, ^uint64(0), func(k, v uint64) bool {
		if k != key {
			ks, vs = append(ks, k), append(vs, v)
		}
		return true
	}); err != nil {
		return false, err
	}
	return true, t.rebuild(ks, vs)
}

// rebuild writes sorted, distinct entries as a new tree in free nodes and
// commits it.
func (t *Tree) rebuild(ks, vs []uint64) error {
	order := t.g.order
	type piece struct {
		first uint64
		n     *node
	}
	var level []piece
	if len(ks) == 0 {
		level = []piece{{0, &node{leaf: true}}}
	}
	split := func(total int) []int {
		p := max(1, (total+order-1)/order)
		sizes := make([]int, p)
		for q := range sizes {
			sizes[q] = total/p + btoi(q < total%p)
		}
		return sizes
	}
	if len(ks) > 0 {
		at := 0
		for _, sz := range split(len(ks)) {
			level = append(level, piece{ks[at], &node{leaf: true, keys: slices.Clone(ks[at : at+sz]), vals: slices.Clone(vs[at : at+sz])}})
			at += sz
		}
	}
	levels := [][]piece{level}
	for len(level) > 1 {
		var up []piece
		at := 0
		for _, sz := range split(len(level)) {
			n := &node{}
			for e, p := range level[at : at+sz] {
				if e > 0 {
					n.keys = append(n.keys, p.first)
				}
				n.vals = append(n.vals, 0) // child ids are set below
			}
			up = append(up, piece{level[at].first, n})
			at += sz
		}
		level = up
		levels = append(levels, level)
	}
	total := 0
	for _, l := range levels {
		total += len(l)
	}
	ids, err := t.freeIDs(uint64(total))
	if err != nil {
		return err
	}
	want := make([]uint64, len(t.bm[0]))
	next := 0
	idOf := make([][]uint32, len(levels))
	for d, l := range levels {
		idOf[d] = make([]uint32, len(l))
		for i := range l {
			idOf[d][i] = ids[next]
			want[ids[next]/64] |= 1 << (ids[next] % 64)
			next++
		}
	}
	for d, l := range levels {
		child := 0
		for i, p := range l {
			if d == 0 && i+1 < len(l) {
				p.n.next = idOf[0][i+1]
			}
			if d > 0 {
				for c := range p.n.vals {
					p.n.vals[c] = uint64(idOf[d-1][child])
					child++
				}
			}
			if err := t.write(t.g.nodeAddr(t.r.Base, idOf[d][i]), encodeNode(p.n, order)); err != nil {
				return err
			}
		}
	}
	root := idOf[len(levels)-1][0]
	mt := meta{seq: t.cur.seq + 1, root: root, height: uint32(len(levels)), count: uint64(len(ks))}
	if err := t.publish(mt, want); err != nil {
		return fmt.Errorf("btree: commit: %w", err)
	}
	return nil
}
