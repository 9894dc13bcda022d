package btree

import (
	"fmt"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// Put sets key to val: a batch of one key (one small kernel launch on the
// tree's machine, then the commit). The Put is durable when it returns nil;
// after an error it may still roll forward at the next Open or Recover
// (see Tree, Durability).
func (t *Tree) Put(key, val uint64) error {
	_, err := t.InsertBatch([]uint64{key}, []uint64{val}, BatchOptions{BlockThreads: 1})
	return err
}

// Delete removes key and reports whether the tree held it. It is a host
// operation, copy-on-write like a batch: the leaf and its ancestors are
// copied, an underfull node takes entries from, or merges with, a sibling
// (so every node stays at least half full), a root left with one child is
// dropped. The one write to a committed node, the next pointer of the leaf
// before the replaced ones, is covered by a durable record of the delete
// written first: recovery redoes an interrupted delete with the same
// nodes. The commit point is the commit word: the delete is durable when
// Delete returns true and nil, and after an error it may still roll forward
// at the next Open or Recover (see Tree, Durability). A key that is not
// there writes nothing.
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
	ids, err := t.freeIDs(uint64(2*t.cur.height + 2))
	if err != nil {
		return false, err
	}
	rec := record{seq: t.cur.seq + 1, n: 1, lanes: 1, oldRoot: t.cur.root, oldHeight: t.cur.height,
		free: uint64(len(ids)), topStart: uint64(len(ids)), topEnd: uint64(len(ids)), del: 1, block: 1}
	if _, err := t.stage(rec, []laneInfo{{0, 1, 0, uint64(len(ids))}}, []uint64{key}, []uint64{0}); err != nil {
		return false, err
	}
	return true, t.deleteKey(key, ids)
}

// redoDelete finishes a delete a crash interrupted.
func (t *Tree) redoDelete(rec record) error {
	b := make([]byte, 8)
	if err := t.read(t.r.Base.Add(t.g.keysOff()), b); err != nil {
		return err
	}
	fb := make([]byte, 4*rec.free)
	if err := t.read(t.r.Base.Add(t.g.freeOff()), fb); err != nil {
		return err
	}
	ids := make([]uint32, rec.free)
	for i := range ids {
		ids[i] = uint32(pm.GetLE(fb[4*i : 4*i+4]))
		if ids[i] == 0 || uint64(ids[i]) >= t.g.capacity {
			return fmt.Errorf("%w: delete record names node %d", ErrCorrupt, ids[i])
		}
	}
	return t.deleteKey(pm.GetLE(b), ids)
}

// deleteKey removes key from the committed tree into the nodes ids and
// commits.
func (t *Tree) deleteKey(key uint64, ids []uint32) error {
	h := int(t.cur.height)
	order, minFill := t.g.order, t.g.order/2
	nodes := make([]*node, h)
	nids := make([]uint32, h)
	idx := make([]int, h) // child index taken at each internal depth
	id := t.cur.root
	for d := range h {
		n, err := t.readNode(id)
		if err != nil {
			return err
		}
		if n.leaf != (d == h-1) {
			return fmt.Errorf("%w: node %d at depth %d of %d is leaf=%v", ErrCorrupt, id, d, h, n.leaf)
		}
		nodes[d], nids[d] = n, id
		if d < h-1 {
			idx[d] = route(n, key)
			id = uint32(n.vals[idx[d]])
		}
	}
	var freed, made []uint32
	alloc := func() (uint32, error) {
		if len(made) >= len(ids) {
			return 0, fmt.Errorf("%w: delete needs more than %d nodes", ErrFull, len(ids))
		}
		made = append(made, ids[len(made)])
		return made[len(made)-1], nil
	}
	write := func(n *node) (uint32, error) {
		nid, err := alloc()
		if err != nil {
			return 0, err
		}
		return nid, t.write(t.g.nodeAddr(t.r.Base, nid), encodeNode(n, order, nid))
	}
	// Leaf level.
	leaf := nodes[h-1]
	pos, ok := slices.BinarySearch(leaf.keys, key)
	if !ok {
		return fmt.Errorf("%w: key %d vanished", ErrCorrupt, key)
	}
	es := make([]entry, 0, len(leaf.keys))
	for i := range leaf.keys {
		if i != pos {
			es = append(es, entry{leaf.keys[i], leaf.vals[i]})
		}
	}
	freed = append(freed, nids[h-1])
	mt := meta{seq: t.cur.seq + 1, height: t.cur.height, count: t.cur.count - 1}
	if h == 1 {
		nid, err := write(leafOf(es, 0))
		if err != nil {
			return err
		}
		mt.root = nid
		return t.finishDelete(mt, freed, made)
	}
	// The replacement of children lo..hi-1 of the parent by pieces.
	var pieces []entry
	var lo, hi int
	parent, a := nodes[h-2], idx[h-2]
	var firstLeaf uint32
	if len(es) >= minFill {
		nid, err := write(leafOf(es, leaf.next))
		if err != nil {
			return err
		}
		pieces, lo, hi, firstLeaf = []entry{{0, uint64(nid)}}, a, a+1, nid
	} else {
		s := a + 1
		if s >= len(parent.vals) {
			s = a - 1
		}
		sib, err := t.readNode(uint32(parent.vals[s]))
		if err != nil {
			return err
		}
		freed = append(freed, uint32(parent.vals[s]))
		other := make([]entry, len(sib.keys))
		for i := range sib.keys {
			other[i] = entry{sib.keys[i], sib.vals[i]}
		}
		left, right, rightNext := es, other, sib.next
		lo = a
		if s < a {
			left, right, rightNext, lo = other, es, leaf.next, s
		}
		all := append(append([]entry(nil), left...), right...)
		parts := evenSplit(all, order)
		pids := make([]uint32, len(parts))
		for q := range pids {
			if pids[q], err = alloc(); err != nil {
				return err
			}
		}
		for q, part := range parts {
			next := rightNext
			if q+1 < len(parts) {
				next = pids[q+1]
			}
			if err := t.write(t.g.nodeAddr(t.r.Base, pids[q]), encodeNode(leafOf(part, next), order, pids[q])); err != nil {
				return err
			}
			pieces = append(pieces, entry{part[0].key, uint64(pids[q])})
		}
		hi, firstLeaf = lo+2, pids[0]
	}
	// The leaf before the replaced ones points at the first new leaf.
	pred, err := t.predLeaf(nodes, idx, lo)
	if err != nil {
		return err
	}
	// Internal levels, from the leaves' parents up.
	for d := h - 2; d >= 0; d-- {
		p := nodes[d]
		freed = append(freed, nids[d])
		var m []entry
		for c := 0; c < len(p.vals); c++ {
			sep := uint64(0)
			if c > 0 {
				sep = p.keys[c-1]
			}
			if c == lo {
				for q, pc := range pieces {
					if q == 0 {
						pc.key = sep
					}
					m = append(m, pc)
				}
				c = hi - 1
				continue
			}
			m = append(m, entry{sep, p.vals[c]})
		}
		if d == 0 {
			if len(m) == 1 {
				mt.root, mt.height = uint32(m[0].val), t.cur.height-1
			} else if mt.root, err = write(innerOf(m)); err != nil {
				return err
			}
			break
		}
		g, gi := nodes[d-1], idx[d-1]
		if len(m) >= minFill {
			nid, err := write(innerOf(m))
			if err != nil {
				return err
			}
			pieces, lo, hi = []entry{{0, uint64(nid)}}, gi, gi+1
			continue
		}
		s := gi + 1
		if s >= len(g.vals) {
			s = gi - 1
		}
		sib, err := t.readNode(uint32(g.vals[s]))
		if err != nil {
			return err
		}
		if sib.leaf {
			return fmt.Errorf("%w: leaf %d among internal nodes", ErrCorrupt, g.vals[s])
		}
		freed = append(freed, uint32(g.vals[s]))
		other := make([]entry, len(sib.vals))
		for i := range sib.vals {
			other[i].val = sib.vals[i]
			if i > 0 {
				other[i].key = sib.keys[i-1]
			}
		}
		left, right, l := m, other, gi
		if s < gi {
			left, right, l = other, m, s
		}
		all := append([]entry(nil), left...)
		for i, e := range right {
			if i == 0 {
				e.key = g.keys[l] // the separator between the two in g
			}
			all = append(all, e)
		}
		pieces = pieces[:0]
		for _, part := range evenSplit(all, order) {
			nid, err := write(innerOf(part))
			if err != nil {
				return err
			}
			pieces = append(pieces, entry{part[0].key, uint64(nid)})
		}
		lo, hi = l, l+2
	}
	if pred != 0 {
		b := make([]byte, 8)
		pm.PutLE(b, nextWord(pred, firstLeaf)) // one aligned word: pointer and check together
		if err := t.write(t.g.nodeAddr(t.r.Base, pred).Add(8), b); err != nil {
			return err
		}
	}
	return t.finishDelete(mt, freed, made)
}

// predLeaf returns the leaf before child lo of the leaves' parent on the
// path (0 if it is the first leaf).
func (t *Tree) predLeaf(nodes []*node, idx []int, lo int) (uint32, error) {
	h := len(nodes)
	if lo > 0 {
		return uint32(nodes[h-2].vals[lo-1]), nil
	}
	for d := h - 3; d >= 0; d-- {
		if idx[d] == 0 {
			continue
		}
		id := uint32(nodes[d].vals[idx[d]-1])
		for range h - 2 - d {
			n, err := t.readNode(id)
			if err != nil {
				return 0, err
			}
			if n.leaf {
				return 0, fmt.Errorf("%w: leaf above the leaf level", ErrCorrupt)
			}
			id = uint32(n.vals[len(n.vals)-1])
		}
		return id, nil
	}
	return 0, nil
}

func (t *Tree) finishDelete(mt meta, freed, made []uint32) error {
	if t.knobs.crashBeforeCommit != nil {
		return t.knobs.crashBeforeCommit
	}
	return t.publish(mt, made, freed)
}

func leafOf(es []entry, next uint32) *node {
	n := &node{leaf: true, next: next, keys: make([]uint64, len(es)), vals: make([]uint64, len(es))}
	for i, e := range es {
		n.keys[i], n.vals[i] = e.key, e.val
	}
	return n
}

func innerOf(es []entry) *node {
	n := &node{vals: make([]uint64, len(es))}
	for i, e := range es {
		n.vals[i] = e.val
		if i > 0 {
			n.keys = append(n.keys, e.key)
		}
	}
	return n
}

// evenSplit splits es into ceil(len/order) parts of near-equal size.
func evenSplit(es []entry, order int) [][]entry {
	p := max(1, (len(es)+order-1)/order)
	out := make([][]entry, 0, p)
	at := 0
	for q := range p {
		sz := len(es)/p + btoi(q < len(es)%p)
		out = append(out, es[at:at+sz])
		at += sz
	}
	return out
}
