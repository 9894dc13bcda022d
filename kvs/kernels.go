package kvs

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

type opKind uint8

const (
	opSet opKind = iota
	opDelete
)

func (o opKind) String() string {
	if o == opDelete {
		return "delete"
	}
	return "set"
}

// Request statuses the kernels write to device memory (0: none).
const (
	stInserted uint32 = iota + 1
	stUpdated
	stDeleted
	stMissing
	stFull
	stFound
	stFailed
)

// kernelErr keeps the first error a kernel's threads report. The engine
// runs one simulated thread at a time, so no lock is needed.
type kernelErr struct{ err error }

func (k *kernelErr) set(err error) {
	if k.err == nil && err != nil {
		k.err = fmt.Errorf("%w: %w", ErrKernel, err)
	}
}

// deferredOrder is the Exec a batch thread logs through: it keeps the log
// insert's first ordering point (the entry's stripes before the slot's
// tail) and drops the ones after it, because the kernel orders the logged
// entry before its in-place update with its own OFence, at its own call
// site: the fence SBRP's Figure 4 puts between logging and the update, and
// the one the seeded-bug store leaves out.
type deferredOrder struct {
	txn.Exec
	n int
}

func (d *deferredOrder) Order() {
	d.n++
	if d.n == 1 {
		d.Exec.Order()
	}
}

// flagKernel persists the transaction flag and waits for it.
func (s *Store) flagKernel(seq uint64, active bool) scope.Kernel {
	flag := s.flagAddr()
	w := flagWord(seq, active)
	return func(t *scope.Thread) {
		t.Store64(flag, w)
		t.DFence()
	}
}

// find looks for key in its two buckets.
func (s *Store) find(t *scope.Thread, key uint32, b1, b2 uint64) (uint64, int, bool) {
	var sigs [4 * Ways]byte
	for _, b := range [2]uint64{b1, b2} {
		t.LoadBytes(s.bucketAddr(b).Add(sigOff), sigs[:])
		for w := range Ways {
			if uint32(pm.GetLE(sigs[4*w:4*w+4])) == key {
				return b, w, true
			}
		}
	}
	return 0, 0, false
}

// claim takes a free way for a new key in the less occupied of its two
// buckets, with a compare-and-swap on that bucket's volatile occupancy
// mask; it fails when both are full.
func (s *Store) claim(t *scope.Thread, b1, b2 uint64) (uint64, int, bool) {
	for {
		m1, m2 := t.Load32(s.masks.Add(4*b1)), t.Load32(s.masks.Add(4*b2))
		b, m := b1, m1
		if occupancy(m2) < occupancy(m1) {
			b, m = b2, m2
		}
		if occupancy(m) == Ways {
			return 0, 0, false
		}
		w := 0
		for m&(1<<w) != 0 {
			w++
		}
		if t.AtomicCAS32(s.masks.Add(4*b), m, m|1<<w, pm.Device) == m {
			return b, w, true
		}
	}
}

// release frees way w of bucket b in the occupancy mask.
func (s *Store) release(t *scope.Thread, b uint64, w int) {
	a := s.masks.Add(4 * b)
	for {
		m := t.Load32(a)
		if t.AtomicCAS32(a, m, m&^(1<<w), pm.Device) == m {
			return
		}
	}
}

// batchKernel is the SET or DELETE kernel: thread i serves request i.
func (s *Store) batchKernel(op opKind, n int, kerr *kernelErr) scope.Kernel {
	nb := s.h.buckets
	return func(t *scope.Thread) {
		i := t.ID()
		if i >= n {
			return
		}
		req := s.reqs.Add(16 * uint64(i))
		status := s.out.Add(16 * uint64(i))
		key := t.Load32(req)
		b1, b2 := candidates(key, nb)
		b, w, found := s.find(t, key, b1, b2)
		st := stUpdated
		switch {
		case op == opDelete && !found:
			t.Store32(status, stMissing)
			return
		case op == opDelete:
			st = stDeleted
		case !found:
			var ok bool
			if b, w, ok = s.claim(t, b1, b2); !ok {
				t.Store32(status, stFull)
				return
			}
			st = stInserted
		}
		var val uint64
		if op == opSet {
			val = t.Load64(req.Add(8))
		}
		sigA, valA := s.sigAddr(b, w), s.valAddr(b, w)

		// Write-ahead undo logging of the way's old pair.
		x := &deferredOrder{Exec: GPUExec(t)}
		part, err := s.log.Part(x)
		if err == nil {
			err = s.log.Insert(x, part, encodeEntry(uint32(b), w, t.Load32(sigA), t.Load64(valA)))
		}
		if err != nil {
			kerr.set(fmt.Errorf("request %d (key %d): log: %w", i, key, err))
			t.Store32(status, stFailed)
			return
		}
		if !s.skipOFence {
			t.OFence() // the logged pair persists before the update
		}
		if op == opSet {
			t.Store64(valA, val)
			t.Store32(sigA, key)
		} else {
			t.Store32(sigA, 0)
			t.Store64(valA, 0)
		}
		t.DFence() // the update is durable before the batch commits
		if op == opDelete {
			s.release(t, b, w)
		}
		t.Store32(status, st)
	}
}

// getKernel is the GET kernel: thread i looks up request i.
func (s *Store) getKernel(n int) scope.Kernel {
	nb := s.h.buckets
	return func(t *scope.Thread) {
		i := t.ID()
		if i >= n {
			return
		}
		out := s.out.Add(16 * uint64(i))
		key := t.Load32(s.reqs.Add(16 * uint64(i)))
		b1, b2 := candidates(key, nb)
		if b, w, ok := s.find(t, key, b1, b2); ok {
			t.Store64(out.Add(8), t.Load64(s.valAddr(b, w)))
			t.Store32(out, stFound)
		}
	}
}

// truncateKernel discards the entries of the log partitions used reports
// (every partition if used is nil), thread p serving partition p.
func (s *Store) truncateKernel(used func(p int) bool, kerr *kernelErr) scope.Kernel {
	parts := s.log.Parts()
	return func(t *scope.Thread) {
		p := t.ID()
		if p >= parts || used != nil && !used(p) {
			return
		}
		x := txn.GPU(t)
		n, err := s.log.Size(x, p)
		if err == nil && n != 0 {
			err = s.log.Clear(x, p)
		}
		kerr.set(err)
	}
}

// recoverKernel undoes an uncommitted batch: each thread restores the
// entries of one log partition, newest first, waits for the restores, and
// clears the partition (the log is only discarded once the table is
// whole again, so a crash here is recovered by recovering again).
func (s *Store) recoverKernel(restored *uint64, kerr *kernelErr) scope.Kernel {
	parts := s.log.Parts()
	nb := s.h.buckets
	return func(t *scope.Thread) {
		p := t.ID()
		if p >= parts {
			return
		}
		x := txn.GPU(t)
		es, err := s.log.Entries(x, p)
		if err != nil {
			kerr.set(fmt.Errorf("log partition %d: %w", p, err))
			return
		}
		if len(es) == 0 {
			return
		}
		for k := len(es) - 1; k >= 0; k-- {
			b, w, sig, val, err := decodeEntry(es[k], nb)
			if err != nil {
				kerr.set(fmt.Errorf("log partition %d entry %d: %w", p, k, err))
				return
			}
			t.Store32(s.sigAddr(uint64(b), w), sig)
			t.Store64(s.valAddr(uint64(b), w), val)
			*restored++
		}
		t.DFence()
		kerr.set(s.log.Clear(x, p))
	}
}
