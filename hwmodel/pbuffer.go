package hwmodel

import (
	"container/heap"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// SBRP's persist buffers, drained in time order across the SMs.
//
// Each SM's persist buffer is a FIFO of persists and ordering points (SBRP
// §6; the artifact's persist_buffer, simulator/src/gpgpu-sim/persist.cc).
// An entry leaves it when its flush starts (a persist) or when it reaches
// the head (an ordering point, which makes its warps' later persists wait
// for their earlier ones to be durable):
//
//   - from the head, while fewer than persist.window flushes of the SM are
//     outstanding (-pm_outstanding_flushes);
//   - when the buffer is full: every entry at the head that its order
//     allows flushes at once, whatever the window (beginFlush with
//     ignoreLimit);
//   - when the L1 evicts its line: at once, whatever the window, unless an
//     ordering point of its warps is still in the buffer before it, in which
//     case the eviction waits for its turn (checkEvict, evict).
//
// The engine runs warps a few instructions out of time order, so flushes
// from the head are not booked on the memory system when their stores are
// timed: the buffers are drained together, always flushing the head whose
// start comes first, up to the cycle the model needs (a store's cycle, an
// eviction, a full buffer), and a warp's DFence or epoch barrier blocks the
// warp (pm.Waker) until the drain, which the executor advances with its
// own clock, has passed it. Writes from every SM so reach the shared links
// and memory queues in the order of their start cycles, as the hardware's
// arbiters serve them, instead of in the order the engine ran the warps
// (which let the SMs it ran first take the memory's future bandwidth and
// starve the others' windows).

// pbItem is one persist-buffer entry of an SM: a persist (e >= 0) or an
// ordering point (e < 0) of warp w.
type pbItem struct {
	e     int32
	w     int32
	ready uint64  // the earliest cycle it may leave: when it was put in, and its warp's front then
	more  []int32 // other warps whose stores merged into the persist
	// after is the latest ordering point of its warps put in before it: an
	// eviction flushes it ahead of its turn only once that has left.
	after int64
	early bool // an eviction flushed it ahead of its turn
}

// pbState is one SM's persist buffer. Item indices are absolute within a
// launch: item i is at items[i-base] while kept.
type pbState struct {
	items     []pbItem
	base      int64    // index of items[0]
	next      int      // first item (relative) that has not reached the head and left
	live      int      // entries in the buffer: put in, not yet left
	outs      []uint64 // acks of the SM's flushes that may be outstanding, ascending
	lastStart uint64   // the last flush from the head: the head flushes in order
	key       uint64   // the start of the head's flush, while queued in pbQueue
	queued    bool
	waiters   []int32 // warps blocked until the drain passes their wait's item, in item order
}

func (p *pbState) reset() {
	p.items = p.items[:0]
	p.base, p.next, p.live = 0, 0, 0
	p.outs = p.outs[:0]
	p.lastStart, p.queued = 0, false
	p.waiters = p.waiters[:0]
}

// pbHeap orders the SMs whose persist buffer holds a persist to flush by
// the start of that flush, and SMs whose flushes start together round
// robin: at cycle c, from SM c mod n on. The memory queues take writes
// that arrive together in the order they are booked, and the hardware's
// arbiters rotate their priority, so no SM may win every tie (with equal
// round trips, SMs in lockstep tie at every flush).
type pbHeap struct {
	keys []pbKey
	n    int // SMs
}

type pbKey struct {
	at uint64
	sm int
}

func (h *pbHeap) Len() int { return len(h.keys) }
func (h *pbHeap) Less(i, j int) bool {
	a, b := h.keys[i], h.keys[j]
	if a.at != b.at {
		return a.at < b.at
	}
	r := int(a.at % uint64(h.n))
	return (a.sm-r+h.n)%h.n < (b.sm-r+h.n)%h.n
}
func (h *pbHeap) Swap(i, j int) { h.keys[i], h.keys[j] = h.keys[j], h.keys[i] }
func (h *pbHeap) Push(x any)    { h.keys = append(h.keys, x.(pbKey)) }
func (h *pbHeap) Pop() any {
	x := h.keys[len(h.keys)-1]
	h.keys = h.keys[:len(h.keys)-1]
	return x
}

// pbPut appends an item of warp ws to its SM's persist buffer and returns
// its index.
func (b *Backend) pbPut(ws *warpState, e int32, ready uint64) int64 {
	p := &b.sms[ws.sm].pb
	if p.next > 4096 && p.next*2 > len(p.items) {
		n := p.next
		p.items = append(p.items[:0], p.items[n:]...)
		p.base += int64(n)
		p.next -= n
	}
	p.items = append(p.items, pbItem{e: e, w: ws.id, ready: ready, after: ws.orderItem})
	p.live++
	i := p.base + int64(len(p.items)-1)
	if p.next == len(p.items)-1 {
		b.pbSettle(ws.sm) // it is the head
	}
	return i
}

// pbSettle lets the entries at the head of SM sm's buffer that leave
// without a flush go (ordering points; persists an eviction flushed),
// wakes the warps waiting on them, and queues the SM by its head
// persist's start.
func (b *Backend) pbSettle(sm int) {
	p := &b.sms[sm].pb
	for p.next < len(p.items) && (p.items[p.next].e < 0 || p.items[p.next].early) {
		if it := &p.items[p.next]; !it.early {
			ws := &b.warps[it.w]
			ws.drainFront = max(ws.drainFront, ws.lastAck)
			p.live--
		}
		p.next++
	}
	if len(p.waiters) > 0 {
		b.pbWake(sm)
	}
	if p.next == len(p.items) {
		p.queued = false
		return
	}
	at := max(b.pbReady(&p.items[p.next]), p.lastStart, b.pbSlot(p))
	p.key, p.queued = at, true
	heap.Push(&b.pbQueue, pbKey{at, sm})
}

// pbReady returns the earliest start item it's order allows: when it was
// put in, and its warps' ordering points that have left.
func (b *Backend) pbReady(it *pbItem) uint64 {
	at := max(it.ready, b.warps[it.w].drainFront)
	for _, w := range it.more {
		at = max(at, b.warps[w].drainFront)
	}
	return at
}

// pbSlot returns when fewer than persist.window of SM p's flushes are
// outstanding.
func (b *Backend) pbSlot(p *pbState) uint64 {
	if w := b.cfg.Persist.Window; len(p.outs) >= w {
		return p.outs[len(p.outs)-w]
	}
	return 0
}

// pbSend flushes persist it of SM sm from cycle start and returns its ack.
func (b *Backend) pbSend(sm int, it *pbItem, start uint64) uint64 {
	p := &b.sms[sm].pb
	done, _ := slices.BinarySearch(p.outs, start+1)
	p.outs = p.outs[:copy(p.outs, p.outs[done:])] // acked by start
	ack := b.flush(it.e, start, sm)
	k, _ := slices.BinarySearch(p.outs, ack)
	p.outs = slices.Insert(p.outs, k, ack)
	ws := &b.warps[it.w]
	ws.lastAck = max(ws.lastAck, ack)
	for _, w := range it.more {
		o := &b.warps[w]
		o.lastAck = max(o.lastAck, ack)
	}
	p.live--
	return ack
}

// pbFlushHead flushes SM sm's head persist from cycle start.
func (b *Backend) pbFlushHead(sm int, start uint64) {
	p := &b.sms[sm].pb
	b.pbSend(sm, &p.items[p.next], start)
	p.lastStart = max(p.lastStart, start)
	p.next++
	b.pbSettle(sm)
}

// pbFlushOne flushes the head persist of the SM whose head starts first,
// and returns false when no buffer holds a persist. Stale queue keys (an
// SM requeued since) are skipped.
func (b *Backend) pbFlushOne() bool {
	for b.pbQueue.Len() > 0 {
		k := heap.Pop(&b.pbQueue).(pbKey)
		p := &b.sms[k.sm].pb
		if !p.queued || p.key != k.at {
			continue
		}
		b.pbFlushHead(k.sm, k.at)
		return true
	}
	return false
}

// pbAdvance flushes, in order of their starts, every persist at a buffer's
// head that starts by cycle t.
func (b *Backend) pbAdvance(t uint64) {
	for b.pbQueue.Len() > 0 && b.pbQueue.keys[0].at <= t {
		b.pbFlushOne()
	}
}

// pbCatchUp drains the flushes that start before the cycle the engine
// resumed the stepping warp at: every warp behind it has been stepped, so
// nothing not yet in a buffer can start earlier. (Draining to the store's
// own cycle would let the warp stepped first at a cycle flush ahead of the
// others at that cycle, every time.)
func (b *Backend) pbCatchUp() {
	if b.popTime > 0 {
		b.pbAdvance(b.popTime - 1)
	}
}

// pbResolve drains the buffers, in order of the flushes' starts, until
// item i of SM sm has reached its buffer's head and left.
func (b *Backend) pbResolve(sm int, i int64) {
	p := &b.sms[sm].pb
	for i >= p.base+int64(p.next) {
		if !b.pbFlushOne() {
			panic("hwmodel: persist buffer item waits with nothing to flush")
		}
	}
}

// pbDrainAll flushes every buffered persist (the kernel's end).
func (b *Backend) pbDrainAll() {
	for b.pbFlushOne() {
	}
}

// warpAcks returns the latest ack of warp ws's persists so far, draining
// its SM's buffer up to its latest entry first.
func (b *Backend) warpAcks(ws *warpState) uint64 {
	if ws.lastItem >= 0 {
		b.pbResolve(ws.sm, ws.lastItem)
	}
	return ws.lastAck
}

// pbReserve waits, from cycle t, for room in SM sm's persist buffer and
// returns when there is. A full buffer flushes every entry at its head
// that its order lets go by t, whatever the window; if its head must still
// wait for its order, so does the store.
func (b *Backend) pbReserve(sm int, t uint64) uint64 {
	b.pbCatchUp()
	p := &b.sms[sm].pb
	if p.live < b.cfg.Persist.BufferEntries {
		return t
	}
	for p.next < len(p.items) {
		it := &p.items[p.next]
		r := b.pbReady(it)
		if r > t {
			break
		}
		b.pbFlushHead(sm, t)
	}
	if p.live >= b.cfg.Persist.BufferEntries {
		start := b.pbStart(sm, p.items[p.next].e)
		b.last.Stalls.BufferFull += start - t
		t = start
	}
	return t
}

// pbStart returns when buffered persist e of SM sm starts its flush,
// draining the buffers up to it if it has not yet.
func (b *Backend) pbStart(sm int, e int32) uint64 {
	if b.entries.at(e).start == noAck {
		b.pbResolve(sm, b.entries.at(e).pbi)
	}
	return b.entries.at(e).start
}

// pbEvict flushes buffered persist e of SM sm, whose line an L1 fill at
// cycle t evicts, and returns when its flush starts: at once where its
// order allows, whatever the window; where an ordering point of its warps
// is still in the buffer before it, at its turn.
func (b *Backend) pbEvict(sm int, e int32, t uint64) uint64 {
	if start := b.entries.at(e).start; start != noAck {
		return start // its flush is booked already
	}
	p := &b.sms[sm].pb
	it := &p.items[b.entries.at(e).pbi-p.base]
	if it.after >= p.base+int64(p.next) {
		return b.pbStart(sm, e)
	}
	start := max(t, b.pbReady(it))
	b.pbSend(sm, it, start)
	it.early = true
	b.pbSettle(sm) // it took a window slot (or was the head): requeue the head
	return start
}

// pbWait is a warp's DFence or epoch barrier that waits for the persist
// buffer's drain: it issued at from, and ends extra cycles after the
// warp's persists before item are durable. With fence set it is instead a
// fence issued at from that waits for every SM's writes issued by then
// (Backend.fenceAll, of round trip rt and system scope if sys), or, with
// reads, a load issued at from whose far reads are timed once every warp
// has run past it (Backend.deferRead).
type pbWait struct {
	item   int64
	from   uint64
	extra  uint64
	fence  bool
	rt     uint64
	sys    bool
	reads  []farRead // a load's far reads, not yet timed
	gather bool      // the load is a gathered one (its data is waited for later)
	ev     Event     // its trace event, when traced
	traced bool      // ev is to be traced when it ends
	seqs   []int32   // its verbs' indices, when verb times are kept
}

// BeginWaking implements pm.Waker: under SBRP a DFence or epoch barrier
// ends its lane's step, and its warp blocks until the persist buffers'
// drain, which Wake times in time order, has passed it. With
// gpu.fence_waits_all every verb that can wait for every SM's writes
// (fenceAll) ends its lane's step, and its warp blocks until the other
// warps have run past it; so does a load of PM whose far reads wait
// behind the writes posted before them (farReadsWait).
func (b *Backend) BeginWaking() []pm.OpKind {
	if !b.running {
		return nil
	}
	b.blockOK = true
	kinds := b.pol.stepEnders(b.cfg.GPU.FenceWaitsAll)
	if b.farReadsWait() {
		kinds = append(slices.Clip(kinds), pm.OpLoad) // a load of PM ends its step
	}
	for _, k := range kinds {
		b.endsStep |= 1 << uint(k)
	}
	return kinds
}

// Wake implements pm.Waker: it drains the persist buffers up to cycle at
// (all of them for pm.Blocked), ends the fence waits issued by at (every
// one for pm.Blocked), and returns the warps whose waits ended.
func (b *Backend) Wake(at uint64) []pm.WarpReady {
	b.pol.advance(at)
	// A fence waiting for every SM's writes ends once no other warp can
	// issue before it: every write issued by its cycle is booked.
	kept := b.fenceWait[:0]
	for _, w := range b.fenceWait {
		ws := &b.warps[w]
		if at != pm.Blocked && ws.wait.from > at {
			kept = append(kept, w)
			continue
		}
		b.endWait(ws)
		b.woken = append(b.woken, pm.WarpReady{Warp: int(w), At: ws.clock})
	}
	b.fenceWait = kept
	// Drains during steps (a store's, a full buffer's) wake warps too.
	b.wokenOut = append(b.wokenOut[:0], b.woken...)
	b.woken = b.woken[:0]
	return b.wokenOut
}

// waking reports whether the executor handles pm.Blocked this launch: it
// asked which verbs end a step (BeginWaking), and some do.
func (b *Backend) waking() bool { return b.endsStep != 0 }

// deferWait makes warp ws, at a DFence or epoch barrier issued at t, wait
// for its persists (pbWait) and reports whether it will: only when the
// executor can block the warp; otherwise the caller waits at once.
func (b *Backend) deferWait(ws *warpState, t, extra uint64) bool {
	if !b.waking() {
		return false
	}
	ws.wait = &pbWait{item: ws.lastItem, from: t, extra: extra}
	return true
}

// pbBlock ends warp ws's wait now if its buffer has drained past it and
// returns true; otherwise it queues the warp on its SM's buffer (Wake
// returns it once the drain passes) and returns false.
func (b *Backend) pbBlock(ws *warpState) bool {
	p := &b.sms[ws.sm].pb
	if ws.wait.item < p.base+int64(p.next) {
		b.endWait(ws)
		return true
	}
	p.waiters = append(p.waiters, ws.id)
	return false
}

// endWait ends warp ws's wait: its persists up to the wait's item are
// flushed (drained first if they are not), and the warp goes on once they
// are durable.
func (b *Backend) endWait(ws *warpState) {
	wt := ws.wait
	ws.wait = nil
	switch {
	case wt.reads != nil:
		b.timeDeferred(ws, wt)
	case wt.fence:
		ws.clock = max(ws.clock, b.fenceAllNow(wt.from, wt.rt, wt.sys))
	default:
		b.pbResolve(ws.sm, wt.item)
		done := waitAcks(wt.from, ws.lastAck, &b.last.Stalls.DFence) + wt.extra
		ws.clock = max(ws.clock, done)
	}
	for _, q := range wt.seqs {
		b.verbDone[q] = ws.clock
	}
	if wt.traced {
		wt.ev.Done = ws.clock
		b.trace(wt.ev)
	}
}

// pbWake wakes the warps waiting on SM sm's buffer whose items have left.
func (b *Backend) pbWake(sm int) {
	p := &b.sms[sm].pb
	for len(p.waiters) > 0 {
		ws := &b.warps[p.waiters[0]]
		if ws.wait != nil && ws.wait.item >= p.base+int64(p.next) {
			return
		}
		p.waiters = p.waiters[1:]
		if ws.wait == nil {
			continue
		}
		b.endWait(ws)
		b.woken = append(b.woken, pm.WarpReady{Warp: int(ws.id), At: ws.clock})
	}
}
