package btree

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// Range is an inclusive key range for ScanBatch.
type Range struct{ Lo, Hi uint64 }

// KV is a key and its value.
type KV struct{ Key, Val uint64 }

// lookupBlock is the block size of the lookup kernels.
const lookupBlock = 64

// GetBatch looks the keys up with one kernel launch, one thread per key,
// and returns each key's value and whether the tree holds it, as of the
// last committed batch (durable); it writes only device memory. A node
// that does not decode or fails its checksum gives an error wrapping
// ErrCorrupt that names it.
func (t *Tree) GetBatch(keys []uint64, opts ...scope.Option) (vals []uint64, found []bool, err error) {
	if len(keys) == 0 {
		return nil, nil, nil
	}
	if err := t.readable(); err != nil {
		return nil, nil, err
	}
	n := len(keys)
	in, out, err := t.lookupMem(keys, uint64(16*n))
	if err != nil {
		return nil, nil, err
	}
	defer t.freeAll(in, out)
	root, height := t.cur.root, int(t.cur.height)
	k := (&kern{g: t.g, base: t.r.Base, order: t.g.order, mem: t.m.Memory()}).areas()
	_, err = scope.Launch(t.m, scope.Grid{Blocks: (n + lookupBlock - 1) / lookupBlock, Threads: lookupBlock}, func(th *scope.Thread) {
		i := th.ID()
		if i >= n {
			return
		}
		key := th.Load64(in.Add(8 * uint64(i)))
		leaf, cnt := k.descend(th, root, height, key)
		if cnt < 0 {
			return
		}
		lo, hi := 0, cnt
		for lo < hi {
			mid := (lo + hi) / 2
			if th.Load64(k.keyAt(leaf, mid)) < key {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo < cnt && th.Load64(k.keyAt(leaf, lo)) == key {
			th.Store64(out.Add(16*uint64(i)), th.Load64(k.valAt(leaf, lo)))
			th.Store64(out.Add(16*uint64(i)+8), 1)
		}
	}, append([]scope.Option{scope.WithName("btree-get")}, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("btree: get kernel: %w", err)
	}
	if k.bad != nil {
		return nil, nil, fmt.Errorf("btree: get kernel: %w", k.bad)
	}
	b := make([]byte, 16*n)
	if err := t.read(out, b); err != nil {
		return nil, nil, err
	}
	vals, found = make([]uint64, n), make([]bool, n)
	for i := range n {
		vals[i] = pm.GetLE(b[16*i : 16*i+8])
		found[i] = pm.GetLE(b[16*i+8:16*i+16]) == 1
	}
	return vals, found, nil
}

// ScanBatch runs the range queries with one kernel launch, one thread per
// query: each finds the leaf of its low key and follows the leaf chain,
// returning at most limit entries in key order, as of the last committed
// batch (durable); it writes only device memory. A node that does not
// decode or fails its checksum gives an error wrapping ErrCorrupt that
// names it.
func (t *Tree) ScanBatch(ranges []Range, limit int, opts ...scope.Option) ([][]KV, error) {
	if len(ranges) == 0 {
		return nil, nil
	}
	if limit < 1 || limit > 1<<20 {
		return nil, fmt.Errorf("%w: scan limit %d", ErrBadArg, limit)
	}
	if err := t.readable(); err != nil {
		return nil, err
	}
	n := len(ranges)
	q := make([]uint64, 0, 2*n)
	for _, r := range ranges {
		q = append(q, r.Lo, r.Hi)
	}
	slot := uint64(8 + 16*limit)
	in, out, err := t.lookupMem(q, uint64(n)*slot)
	if err != nil {
		return nil, err
	}
	defer t.freeAll(in, out)
	root, height := t.cur.root, int(t.cur.height)
	k := (&kern{g: t.g, base: t.r.Base, order: t.g.order, mem: t.m.Memory()}).areas()
	maxSteps := t.g.capacity
	_, err = scope.Launch(t.m, scope.Grid{Blocks: (n + lookupBlock - 1) / lookupBlock, Threads: lookupBlock}, func(th *scope.Thread) {
		i := th.ID()
		if i >= n {
			return
		}
		lo, hi := th.Load64(in.Add(16*uint64(i))), th.Load64(in.Add(16*uint64(i)+8))
		if lo > hi {
			return
		}
		leaf, cnt := k.descend(th, root, height, lo)
		base := out.Add(uint64(i) * slot)
		got, done := 0, false
		for steps := uint64(0); cnt >= 0 && !done && got < limit && steps < maxSteps; steps++ {
			for e := 0; e < cnt && got < limit; e++ {
				key := th.Load64(k.keyAt(leaf, e))
				if key < lo {
					continue
				}
				if key > hi {
					done = true
					break
				}
				th.Store64(base.Add(8+16*uint64(got)), key)
				th.Store64(base.Add(16+16*uint64(got)), th.Load64(k.valAt(leaf, e)))
				got++
			}
			next, ok := k.nextOf(leaf, th.Load64(k.node(leaf).Add(8)))
			if !ok || next == 0 {
				break
			}
			leaf, cnt = next, k.lookupHeader(th, next, true)
		}
		th.Store64(base, uint64(got))
	}, append([]scope.Option{scope.WithName("btree-scan")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("btree: scan kernel: %w", err)
	}
	if k.bad != nil {
		return nil, fmt.Errorf("btree: scan kernel: %w", k.bad)
	}
	b := make([]byte, uint64(n)*slot)
	if err := t.read(out, b); err != nil {
		return nil, err
	}
	res := make([][]KV, n)
	for i := range n {
		s := b[uint64(i)*slot:]
		c := min(int(pm.GetLE(s[:8])), limit)
		for e := range c {
			res[i] = append(res[i], KV{pm.GetLE(s[8+16*e : 16+16*e]), pm.GetLE(s[16+16*e : 24+16*e])})
		}
	}
	return res, nil
}

// descend walks from root to the leaf of key and returns the leaf and its
// entry count (-1 if a node did not decode: the query stops, and the
// launch's caller returns the error kern.verify recorded, which names the
// node).
func (k *kern) descend(t *scope.Thread, root uint32, height int, key uint64) (uint32, int) {
	id := root
	for range height - 1 {
		cnt := k.lookupHeader(t, id, false)
		if cnt < 0 {
			return 0, -1
		}
		id = k.child(t, id, cnt, key)
	}
	return id, k.lookupHeader(t, id, true)
}

// lookupHeader loads node id's header word and checks it and the node's
// checksum (verify, untimed); -1 on failure, with the error recorded.
func (k *kern) lookupHeader(t *scope.Thread, id uint32, leaf bool) int {
	if id == 0 || uint64(id) >= k.g.capacity {
		k.corrupt(fmt.Errorf("%w: node id %d of %d", ErrCorrupt, id, k.g.capacity))
		return -1
	}
	return k.verify(id, t.Load64(k.node(id)), leaf)
}

// readable refuses lookups on a tree with an unfinished batch.
func (t *Tree) readable() error {
	if _, ok, err := t.pending(); err != nil || ok {
		if err != nil {
			return err
		}
		return ErrRecovery
	}
	return nil
}

// lookupMem uploads words to device memory and allocates out bytes there.
func (t *Tree) lookupMem(words []uint64, out uint64) (pm.Addr, pm.Addr, error) {
	in, err := t.m.Alloc(pm.DeviceMem, uint64(8*len(words)))
	if err != nil {
		return 0, 0, err
	}
	b := make([]byte, 8*len(words))
	for i, w := range words {
		pm.PutLE(b[8*i:8*i+8], w)
	}
	if err := t.m.CopyIn(in, b); err != nil {
		_ = t.m.Free(in)
		return 0, 0, err
	}
	o, err := t.m.Alloc(pm.DeviceMem, out)
	if err != nil {
		_ = t.m.Free(in)
		return 0, 0, err
	}
	return in, o, nil
}

func (t *Tree) freeAll(as ...pm.Addr) {
	for _, a := range as {
		_ = t.m.Free(a)
	}
}
