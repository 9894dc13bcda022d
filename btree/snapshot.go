package btree

import (
	"fmt"
	"math/bits"
	"slices"
)

// Snapshot reads: a reader reads the committed tree of one batch (a view)
// while later batches are written. Changes are copy-on-write, so a view's
// nodes stay as they are while the tree keeps them out of reuse (keepFreed:
// a node a later batch frees is not handed out again until no view that
// can reach it is read). The one in-place write, the next word of an
// unchanged leaf whose right neighbour a batch replaced, is never read by
// a view: it walks the tree from its root instead of the leaf chain.

// view is the committed tree as of one batch: its root, height and key
// count, and the batch's number.
type view struct {
	seq    uint64
	root   uint32
	height int
	count  uint64
}

// view returns the view of the last committed batch.
func (t *Tree) view() view {
	return view{seq: t.cur.seq, root: t.cur.root, height: int(t.cur.height), count: t.cur.count}
}

// keptIDs are the nodes that batch seq freed, kept out of reuse for the
// views before it.
type keptIDs struct {
	seq uint64
	ids []uint32
}

// keepFreed makes the tree keep the nodes each later batch frees out of
// reuse until releaseKept lets them go, so that views of earlier batches
// can be read during later writes.
func (t *Tree) keepFreed() {
	if t.keep == nil {
		t.keep = make([]uint64, len(t.bm[0]))
	}
}

// markKept keeps the nodes that batch seq frees (publish calls it).
func (t *Tree) markKept(seq uint64, ids []uint32) {
	if t.keep == nil || len(ids) == 0 {
		return
	}
	for _, id := range ids {
		t.keep[id/64] |= 1 << (id % 64)
	}
	t.kept = append(t.kept, keptIDs{seq: seq, ids: slices.Clone(ids)})
}

// releaseKept returns to the free pool the nodes that batches up to
// oldest freed: no view of a batch before oldest is read any more, and a
// view of oldest or later cannot reach them.
func (t *Tree) releaseKept(oldest uint64) {
	n := 0
	for n < len(t.kept) && t.kept[n].seq <= oldest {
		for _, id := range t.kept[n].ids {
			t.keep[id/64] &^= 1 << (id % 64)
			t.hint = min(t.hint, uint64(id))
		}
		n++
	}
	t.kept = slices.Delete(t.kept, 0, n)
}

// keptNodes returns the number of nodes kept out of reuse.
func (t *Tree) keptNodes() int {
	n := 0
	for _, w := range t.keep {
		n += bits.OnesCount64(w)
	}
	return n
}

// readBody reads node id of a view into n: its header, keys and values,
// checked against its checksum, straight from the image, but not its next
// word, which a later batch may rewrite meanwhile (n.next is 0).
func (t *Tree) readBody(id uint32, n *node) error {
	if id == 0 || uint64(id) >= t.g.capacity {
		return fmt.Errorf("%w: node id %d of %d", ErrCorrupt, id, t.g.capacity)
	}
	a := t.node0.Add(uint64(id) * t.g.nodeBytes)
	src, _, err := t.m.Memory().Bytes(a, t.g.nodeBytes, 1)
	if err != nil {
		return fmt.Errorf("btree: read %v: %w", a, err)
	}
	return decodeBodyInto(src, t.g.order, id, n)
}

// readLevel reads node id at depth d of a tree of height h and checks
// that it is a leaf exactly at the last level.
func (t *Tree) readLevel(id uint32, d, h int, n *node) error {
	if err := t.readBody(id, n); err != nil {
		return err
	}
	if n.leaf != (d == h-1) {
		return fmt.Errorf("%w: node %d: leaf is %v at depth %d of %d", ErrCorrupt, id, n.leaf, d, h)
	}
	return nil
}

// getView returns the value of key in view v and whether v holds it.
func (t *Tree) getView(v view, key uint64) (uint64, bool, error) {
	s := getScratch(t.g.nodeBytes)
	defer scratchPool.Put(s)
	n, id := &s.n, v.root
	for d := range v.height {
		if err := t.readLevel(id, d, v.height, n); err != nil {
			return 0, false, err
		}
		if !n.leaf {
			id = uint32(n.vals[route(n, key)])
		}
	}
	if i, ok := slices.BinarySearch(n.keys, key); ok {
		return n.vals[i], true, nil
	}
	return 0, false, nil
}

// scanView calls yield for the keys of view v in [lo, hi] in ascending
// order with their values, until yield returns false. It walks the tree
// from the root with a path of one node per level, never the leaf chain.
func (t *Tree) scanView(v view, lo, hi uint64, yield func(k, val uint64) bool) error {
	if lo > hi || v.height < 1 {
		return nil
	}
	type level struct {
		n node
		i int // the child being visited (internal nodes)
	}
	path := make([]level, v.height)
	// Every level's keys and values in one allocation.
	o := t.g.order
	room := make([]uint64, 2*o*v.height)
	for d := range path {
		path[d].n.keys = room[2*o*d : 2*o*d : 2*o*d+o]
		path[d].n.vals = room[2*o*d+o : 2*o*d+o : 2*o*(d+1)]
	}
	// down reads the subtree of id from depth d to its leaf, taking the
	// child that holds key at each internal level.
	down := func(id uint32, d int, key uint64) error {
		for ; d < v.height; d++ {
			p := &path[d]
			if err := t.readLevel(id, d, v.height, &p.n); err != nil {
				return err
			}
			if !p.n.leaf {
				p.i = route(&p.n, key)
				id = uint32(p.n.vals[p.i])
			}
		}
		return nil
	}
	if err := down(v.root, 0, lo); err != nil {
		return err
	}
	for {
		leaf := &path[v.height-1].n
		for i, k := range leaf.keys {
			if k < lo {
				continue
			}
			if k > hi || !yield(k, leaf.vals[i]) {
				return nil
			}
		}
		// The next leaf: up to the deepest level with a child to the right.
		d := v.height - 2
		for d >= 0 && path[d].i+1 >= len(path[d].n.vals) {
			d--
		}
		if d < 0 {
			return nil
		}
		p := &path[d]
		if p.n.keys[p.i] > hi {
			return nil // the next subtree's keys are at least this separator
		}
		p.i++
		if err := down(uint32(p.n.vals[p.i]), d+1, 0); err != nil {
			return err
		}
	}
}
