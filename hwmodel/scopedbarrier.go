package hwmodel

import (
	"math/bits"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// scopedBarrierPolicy is the scoped persist barrier paper's hardware (its
// §3 and §6, Table 2): the L1 is write-combining and the L2 write-back, so
// a PM store leaves its line dirty in the L1; an NVW-FIFO beside each cache
// tracks the PM lines that cache holds dirty, one entry per line
// (persist.nvw_fifo_l1 per L1, persist.nvw_fifo_l2 in the L2).
//
//   - A store into a line the L1 FIFO already tracks joins its entry. A
//     store into another line takes a new entry; when the FIFO is full,
//     its head leaves first: the line is written from the L1 to the L2
//     (the SM's port, the L2's latency and bank port) and its entry joins
//     the L2 FIFO (or the entry the L2 FIFO already has for the line).
//     The store waits until the head has left.
//   - When the L2 FIFO is full, its head leaves: the line is written back
//     to NVM from its L2 bank, and the entry is free once the memory's PM
//     queue has taken the write. A line is durable at the write's ack.
//   - An L1 that evicts a tracked line writes it to the L2 as its head
//     would leave.
//   - A persist barrier (and every other verb that orders or makes
//     durable: OFence, DFence, PRel, the epoch barrier) appends a p_flush
//     marker to the L1 FIFOs its scope covers: the SM's for thread, warp
//     and block scope, every SM's for device and system scope. The marker
//     sends every line ahead of it to the L2 FIFO; there it sends every
//     line ahead of it to NVM. The verb returns once the L2 holds the
//     acks of the write-backs in flight when the marker arrived and of
//     those carrying the scope's stores made before it (§6.1's L2
//     controller waits for its write-backs' acks before it answers), and
//     an L2 round trip has passed. Lines first stored after the verb's
//     cycle (by a warp the engine ran ahead) stay behind the marker.
//   - The FIFOs are taken as they stand at a store's cycle: entries first
//     stored later, by a warp the engine ran ahead, neither fill a FIFO
//     nor leave ahead of older ones.
//   - A kernel's end drains every FIFO.
//
// The paper's NVW-FIFO entries are 8 bytes, one physical address each;
// each time a cache block is updated an entry is added. Here a line has at
// most one entry per FIFO: a second entry for a line already queued would
// write nothing when it left.
type scopedBarrierPolicy struct {
	basePolicy
	f *nvwFIFOs
}

// nvwFIFOs are the NVW-FIFOs: one per L1, one in the L2.
type nvwFIFOs struct {
	l1 [][]int32 // per SM: entries in order, head first
	l2 []nvwItem // head first
	// l2At holds, per line with an L2 item, the item's index in l2 plus
	// l2Gone (the items that have left before it).
	l2At   map[uint64]uint64
	l2Gone uint64
	// wb holds the L2's write-backs (pruned once over before the engine's
	// current time).
	wb      []nvwSpan
	pruneAt int
}

// nvwItem is an L2 NVW-FIFO entry: a line and the L1 entries whose
// stores it carries.
type nvwItem struct {
	line    uint64
	enq     uint64 // its first L1 write reached the L2
	dirty   uint64 // the first store into its entries
	sms     uint64 // smBit of the SMs whose entries it carries
	sectors uint64
	ents    []int32
}

// nvwSpan is a write-back of the L2: issued at start, acknowledged at ack,
// carrying stores from cycle dirty on of the SMs sms (smBit).
type nvwSpan struct{ start, ack, dirty, sms uint64 }

// smBit is SM sm's bit in a set of SMs (SMs 64 apart share one: a barrier
// may wait for more than its scope, never less).
func smBit(sm int) uint64 { return 1 << (sm % 64) }

func newNVWFIFOs(sms int) *nvwFIFOs {
	return &nvwFIFOs{l1: make([][]int32, sms), l2At: map[uint64]uint64{}}
}

func (p scopedBarrierPolicy) store(ws *warpState, line, sectors, t uint64) (int32, uint64, bool) {
	s := &p.sms[ws.sm]
	way := s.l1.lookup(line)
	if way >= 0 {
		if e := s.l1.entry[way]; e >= 0 && p.entries.at(e).start == noAck {
			ent := p.entries.at(e)
			ent.dirty, ent.last = min(ent.dirty, t), max(ent.last, t)
			ent.sectors |= sectors
			return e, t + 1, true
		}
	} else {
		// Write-combining: a store allocates its line without reading it.
		var ve int32
		var evicted bool
		way, _, ve, evicted = s.l1.insert(line)
		if evicted && ve >= 0 {
			p.evict(ws.sm, ve, t)
		}
	}
	start := t
	q := &p.f.l1[ws.sm]
	for {
		// The FIFO as it stands at t: entries first stored after t (by a
		// warp the engine ran ahead) are not in it yet.
		i, n := firstBy(*q, t, func(e int32) uint64 { return p.entries.at(e).dirty })
		if n < p.cfg.Persist.NVWFIFOL1 {
			break
		}
		start = max(start, p.l1Leave(ws.sm, (*q)[i], t))
		*q = slices.Delete(*q, i, i+1)
	}
	e := p.newEntry(line)
	p.entries.at(e).dirty, p.entries.at(e).last = start, start
	p.entries.at(e).sectors = sectors
	s.l1.entry[way] = e
	*q = append(*q, e)
	start = p.wcTrackPM(ws.sm, e, start) // the S-FIFO tracks it too (sfifo.go)
	p.last.Stalls.NVWFull += start - t
	return e, start + 1, false
}

// l1Leave writes entry e's line from SM sm's L1 to the L2 from cycle t
// (its FIFO's head leaving, an eviction or a p_flush marker) and returns
// when its L1 FIFO entry is free: its bytes have left the SM, and a full
// L2 FIFO that takes the line late holds it back as long (the
// interconnect between them buffers nothing). An entry that left already
// (evicted) costs nothing.
func (p scopedBarrierPolicy) l1Leave(sm int, e int32, t uint64) uint64 {
	ent := p.entries.at(e)
	if ent.start != noAck {
		return t
	}
	t = max(t, ent.last) // its latest store is in the write
	ent.start = t
	var v victim
	if p.l2.lookup(ent.line) < 0 {
		_, v = p.l2Fill(ent.line, t)
	}
	left, in := p.ms.toL2(sm, ent.line, p.flushBytes(e), t, v)
	return max(left, p.l2Join(sm, e, in)-(in-left))
}

// l2Join puts entry e of SM sm, whose line reached the L2 at cycle in,
// into the L2
// FIFO and returns when the FIFO took it.
func (p scopedBarrierPolicy) l2Join(sm int, e int32, in uint64) uint64 {
	f := p.f
	ent := p.entries.at(e)
	if at, ok := f.l2At[ent.line]; ok {
		it := &f.l2[at-f.l2Gone]
		it.ents = append(it.ents, e)
		it.sectors |= ent.sectors
		it.dirty = min(it.dirty, ent.dirty)
		it.sms |= smBit(sm)
		return in
	}
	for {
		i, n := firstBy(f.l2, in, func(it nvwItem) uint64 { return it.enq })
		if n < p.cfg.Persist.NVWFIFOL2 {
			break
		}
		in = max(in, p.l2Leave(i, in))
	}
	f.l2At[ent.line] = f.l2Gone + uint64(len(f.l2))
	f.l2 = append(f.l2, nvwItem{line: ent.line, enq: in, dirty: ent.dirty, sms: smBit(sm), sectors: ent.sectors, ents: []int32{e}})
	return in
}

// firstBy returns the index of the first of q present at cycle t (at(x) <=
// t) and how many are present then.
func firstBy[T any](q []T, t uint64, at func(T) uint64) (first, n int) {
	first = -1
	for i, x := range q {
		if at(x) <= t {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return first, n
}

// l2Leave writes item i of the L2 FIFO (its head, but for items a warp the
// engine ran ahead put before it) back to NVM from cycle t and returns
// when the memory's PM queue took it (the entry is free then).
func (p scopedBarrierPolicy) l2Leave(i int, t uint64) uint64 {
	f := p.f
	it := f.l2[i]
	delete(f.l2At, it.line)
	if i == 0 {
		f.l2 = f.l2[1:]
		f.l2Gone++
	} else {
		f.l2 = slices.Delete(f.l2, i, i+1)
		for _, later := range f.l2[i:] {
			f.l2At[later.line]--
		}
	}
	n := p.lineBytes
	if it.sectors != 0 {
		n = uint64(bits.OnesCount64(it.sectors)) << p.secShift
	}
	start := max(t, it.enq)
	w := p.ms.writeFromL2(it.line, n, start, &p.last)
	for _, e := range it.ents {
		p.entries.at(e).ack = w.ack
	}
	p.last.Flushes++
	p.globalAck = max(p.globalAck, w.ack)
	f.wb = append(f.wb, nvwSpan{start: start, ack: w.ack, dirty: it.dirty, sms: it.sms})
	if len(f.wb) > f.pruneAt {
		safe := p.safeTime()
		f.wb = slices.DeleteFunc(f.wb, func(s nvwSpan) bool { return s.ack <= safe })
		f.pruneAt = 2*len(f.wb) + 64
	}
	return w.queued
}

// evict writes a line the L1 of SM sm evicts at t (a cache eviction, or
// its S-FIFO's head leaving) to the L2 if it is still dirty there, and
// returns when it has left.
func (p scopedBarrierPolicy) evict(sm int, e int32, t uint64) uint64 { return p.l1Leave(sm, e, t) }

// drain is a p_flush marker appended at cycle t to the L1 FIFOs of the SMs
// sms (nil: every SM): it returns when every line ahead of it is durable,
// every write-back the L2 had in flight by t and every one that carries
// the scope's stores made by t is acknowledged, and the acknowledgement is
// back at the SM (an L2 round trip at least).
// What was stored after t (by a warp the engine ran ahead) is behind the
// marker and stays.
func (p scopedBarrierPolicy) drain(sms []int, t uint64) uint64 {
	f := p.f
	each := func(sm int) {
		q := f.l1[sm]
		kept := q[:0]
		for _, e := range q {
			if p.entries.at(e).dirty > t {
				kept = append(kept, e)
				continue
			}
			p.l1Leave(sm, e, t)
		}
		f.l1[sm] = kept
	}
	if sms == nil {
		for sm := range f.l1 {
			each(sm)
		}
	} else {
		for _, sm := range sms {
			each(sm)
		}
	}
	// The L2 FIFO: every item ahead of the marker leaves.
	kept := f.l2[:0]
	var late []nvwItem
	for len(f.l2) > 0 {
		if f.l2[0].dirty > t {
			late = append(late, f.l2[0])
			f.l2 = f.l2[1:]
			f.l2Gone++
			continue
		}
		p.l2Leave(0, t)
	}
	// The items behind the marker keep their order.
	f.l2 = append(kept, late...)
	f.l2Gone -= uint64(len(late))
	for i, it := range f.l2 {
		f.l2At[it.line] = f.l2Gone + uint64(i)
	}
	// The marker reaches the L2 and its acknowledgement comes back: an L2
	// round trip even with nothing to drain.
	done := t + p.l2Lat
	scope := ^uint64(0)
	if sms != nil {
		scope = 0
		for _, sm := range sms {
			scope |= smBit(sm)
		}
	}
	for _, s := range f.wb {
		// The write-backs in flight when the marker arrives, and those
		// that carry stores of the scope made by t, wherever the engine
		// timed them.
		if s.start <= t || s.dirty <= t && s.sms&scope != 0 {
			done = max(done, s.ack)
		}
	}
	return done
}

func (p scopedBarrierPolicy) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	st := &p.last.Stalls
	switch kind {
	case pm.OpOFence, pm.OpDFence:
		return waitAcks(t, p.drain(p.scopeSMs(ws, pm.Thread), t), &st.DFence)
	case pm.OpEpochBarrier:
		return waitAcks(t, p.drain(nil, t), &st.DFence)
	case pm.OpPBarrier:
		if sc == pm.Thread {
			return waitAcks(t, p.drain(p.scopeSMs(ws, sc), t), &st.PBarrier)
		}
		return t + 1 // the drain is timed when the scope has arrived (barrier)
	case pm.OpPRel:
		d := waitAcks(t, p.drain(p.scopeSMs(ws, sc), t), &st.Release)
		return max(d, p.persistOps(ws, d, kind, sc, group))
	case pm.OpPAcq:
		return p.acquire(ws, t, sc, group)
	}
	return t + 1
}

// scopeSMs returns the SMs whose L1 FIFOs a marker of scope sc from warp
// ws goes to (nil: every SM).
func (p scopedBarrierPolicy) scopeSMs(ws *warpState, sc pm.Scope) []int {
	if sc >= pm.Device {
		return nil
	}
	return []int{ws.sm}
}

// barrier is the conservative scoped barrier (§6.1): once the scope has
// arrived, a marker drains the FIFOs covering it and the scope waits for
// the acks.
func (p scopedBarrierPolicy) barrier(group []*pm.Agent, kind pm.OpKind, sc pm.Scope, at uint64) uint64 {
	if kind != pm.OpPBarrier {
		return 0
	}
	if sc >= pm.Device {
		return p.drain(nil, at)
	}
	var sms []int
	for _, a := range group {
		if sm := p.warp(a.Warp).sm; !slices.Contains(sms, sm) {
			sms = append(sms, sm)
		}
	}
	return p.drain(sms, at)
}

// finish drains every FIFO at the kernel's end, cycle t.
func (p scopedBarrierPolicy) finish(t uint64) {
	f := p.f
	for sm, q := range f.l1 {
		for _, e := range q {
			p.l1Leave(sm, e, t)
		}
		f.l1[sm] = q[:0]
	}
	for len(f.l2) > 0 {
		p.l2Leave(0, t)
	}
	f.l2, f.l2Gone, f.wb = f.l2[:0], 0, f.wb[:0]
	clear(f.l2At)
}
