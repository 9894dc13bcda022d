//go:build unix

package native

import (
	"cmp"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// Dax mode keeps the epoch machinery of the package doc's "Dax mode":
// persists are logged in memory with an epoch number, and at a flush the
// mapping receives them one epoch at a time, each written back with CLWB
// (or CLFLUSHOPT) and an SFENCE before the next epoch's first byte.

// entry is one persist logged in dax mode: part of one aligned 8-byte word.
type entry struct {
	epoch uint64
	addr  pm.Addr
	size  uint8
	b     [8]byte
}

type agentState struct {
	ep, lp uint64 // epoch of the next persist (lower bound); highest epoch persisted
}

func (b *Backend) state(a *pm.Agent) *agentState {
	s, i := &b.gpu, a.ID
	if a.Kind == pm.CPUTask {
		// The coroutine tasks of a core share its fences: an SFence (or
		// CFence) orders every earlier persist of the core.
		s, i = &b.cpu2, a.Unit
	}
	if i >= len(*s) {
		*s = append(*s, make([]agentState, i+1-len(*s))...)
	}
	return &(*s)[i]
}

// cur is the lowest epoch s's next persist may take.
func (b *Backend) cur(s *agentState) uint64 { return max(s.ep, b.flushed+1) }

// record logs the persists of op by s at epoch e or later (later for a
// word with a pending persist at a later epoch, so that persists of one
// word stay in program order) and returns the highest epoch used.
func (b *Backend) record(s *agentState, e uint64, op *pm.Op) uint64 {
	if op.Data == nil {
		// A naturally aligned value of at most 8 bytes: one word.
		var v [8]byte
		pm.PutLE(v[:op.Size], op.Value)
		return b.recordWord(s, e, op.Addr, v[:op.Size])
	}
	hi := e
	data, a := op.Data, op.Addr
	for len(data) > 0 {
		n := min(pm.WordSize-int(a%pm.WordSize), len(data))
		hi = max(hi, b.recordWord(s, e, a, data[:n]))
		data, a = data[n:], a+pm.Addr(n)
	}
	return hi
}

func (b *Backend) recordWord(s *agentState, e uint64, a pm.Addr, data []byte) uint64 {
	if r := b.regionAt(a); r != nil {
		// Coherence: not before a pending persist of the same word.
		if r.epochs == nil {
			r.epochs = make([]uint32, (r.size+pm.WordSize-1)/pm.WordSize)
		}
		w := &r.epochs[uint64(a-r.base)/pm.WordSize]
		if le := uint64(*w); le > b.flushed-b.epochBase && le+b.epochBase > e {
			e = le + b.epochBase
		}
		*w = uint32(e - b.epochBase)
	}
	en := entry{epoch: e, addr: a, size: uint8(len(data))}
	copy(en.b[:], data)
	b.log = append(b.log, en)
	s.lp = max(s.lp, e)
	b.gmax = max(b.gmax, e)
	b.stats.Persists++
	return e
}

// daxOp logs persists and applies the epoch rules of dax mode.
func (b *Backend) daxOp(a *pm.Agent, op *pm.Op) {
	switch op.Kind {
	case pm.OpStore, pm.OpAtomic:
		if op.Persists() {
			s := b.state(a)
			b.record(s, b.cur(s), op)
		}
	case pm.OpPRel:
		s := b.state(a)
		e := max(b.cur(s), s.lp+1)
		s.ep = e
		if op.Persists() {
			e = b.record(s, e, op)
			s.ep = e
		}
		b.rel[op.Addr] = e
	case pm.OpPAcq:
		if r, ok := b.rel[op.Addr]; ok {
			s := b.state(a)
			s.ep = max(b.cur(s), r+1)
		}
	case pm.OpOFence, pm.OpPBarrier, pm.OpDFence, pm.OpEpochBarrier, pm.OpSFence, pm.OpCFence, pm.OpMemBar, pm.OpPersistBarrier, pm.OpJoinStrand:
		b.order(b.state(a))
	case pm.OpL2WB, pm.OpPCommit:
		// The re-study's write-back of the whole L2 (and drain of every
		// write-pending queue) covers every thread's persists so far.
		s := b.state(a)
		s.ep = max(b.cur(s), b.gmax+1)
	}
	if len(b.log) >= b.opts.MaxPending {
		b.flush()
	}
}

// order puts s's later persists after its earlier ones.
func (b *Backend) order(s *agentState) { s.ep = max(b.cur(s), s.lp+1) }

// daxSync gives every member of a barrier the highest epoch among them: what
// any member ordered before the barrier is ordered before every member's
// persists after it.
func (b *Backend) daxSync(group []*pm.Agent) {
	var e uint64
	for _, a := range group {
		e = max(e, b.cur(b.state(a)))
	}
	for _, a := range group {
		b.state(a).ep = e
	}
}

// flush applies the log to the mapping epoch by epoch, syncing each.
func (b *Backend) flush() {
	if len(b.log) == 0 {
		return
	}
	b.stats.Flushes++
	b.sortLog()
	for i := 0; i < len(b.log); {
		j := i
		for ; j < len(b.log) && b.log[j].epoch == b.log[i].epoch; j++ {
			en := &b.log[j]
			r := b.regionAt(en.addr)
			if r == nil {
				continue // the region was removed
			}
			off := uint64(en.addr - r.base)
			copy(r.data[off:off+uint64(en.size)], en.b[:en.size])
			b.daxDirty(r, off, off+uint64(en.size))
		}
		b.stats.Epochs++
		b.syncGroup()
		i = j
	}
	b.flushed = max(b.flushed, b.gmax)
	b.log = b.log[:0]
	if b.gmax-b.epochBase > 1<<31 {
		// Keep region.epochs in 32 bits: forget every (now durable) epoch.
		for _, r := range b.regs {
			clear(r.epochs)
		}
		b.epochBase = b.gmax
	}
	clear(b.rel)
}

// sortLog orders the log by epoch, keeping the logged order within an
// epoch: a counting sort over the pending epochs flushed+1..gmax.
func (b *Backend) sortLog() {
	lo := b.flushed + 1
	n := b.gmax - lo + 1
	if n > uint64(len(b.log)) {
		slices.SortStableFunc(b.log, func(x, y entry) int { return cmp.Compare(x.epoch, y.epoch) })
		return
	}
	if cap(b.counts) < int(n)+1 {
		b.counts = make([]int, n+1)
	}
	counts := b.counts[:n+1]
	clear(counts)
	for i := range b.log {
		counts[b.log[i].epoch-lo+1]++
	}
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	if cap(b.sorted) < len(b.log) {
		b.sorted = make([]entry, len(b.log))
	}
	out := b.sorted[:len(b.log)]
	for i := range b.log {
		k := b.log[i].epoch - lo
		out[counts[k]] = b.log[i]
		counts[k]++
	}
	b.log, b.sorted = out, b.log
}

func (b *Backend) daxDirty(r *region, lo, hi uint64) {
	if !r.inDirty {
		r.inDirty, r.lo, r.hi = true, lo, hi
		b.touched = append(b.touched, r)
		return
	}
	r.lo, r.hi = min(r.lo, lo), max(r.hi, hi)
}

// syncGroup makes the dirty ranges of the touched regions durable.
func (b *Backend) syncGroup() {
	for _, r := range b.touched {
		r.inDirty = false
		switch b.mode {
		case ModeDAX:
			flushLines(b.cpu, r.data[r.lo:r.hi])
			b.stats.SyncBytes += r.hi - r.lo
		}
	}
	if len(b.touched) > 0 {
		if b.mode == ModeDAX {
			fence()
		}
		b.stats.Syncs++
	}
	b.touched = b.touched[:0]
}
