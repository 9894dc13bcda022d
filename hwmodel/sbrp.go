package hwmodel

import (
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// sbrpPolicy is SBRP: a per-SM FIFO persist buffer drained from its head
// through a window of outstanding flushes (persist.window, SBRP's own
// limit), all of it when full, and a line at once when the L1 evicts it
// (pbuffer.go); OFence and block-scope PRel/PAcq are buffered ordering
// points, device-scope PRel and DFence block only the issuing warp until
// its persists are durable, device-scope PAcq invalidates the L1.
type sbrpPolicy struct{ basePolicy }

func (p sbrpPolicy) store(ws *warpState, line, sectors, t uint64) (int32, uint64, bool) {
	return p.sbrpStore(ws, &p.sms[ws.sm], line, sectors, t)
}

func (p sbrpPolicy) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	return p.sbrpVerb(ws, t, kind, sc, group)
}

func (sbrpPolicy) ordersEvictions() bool { return true }

// stepEnders: a DFence or epoch barrier blocks its warp until the persist
// buffers' drain, which advance times in time order, has passed it.
func (p sbrpPolicy) stepEnders(fenceAll bool) []pm.OpKind {
	return append([]pm.OpKind{pm.OpDFence, pm.OpEpochBarrier}, p.basePolicy.stepEnders(fenceAll)...)
}

// advance drains the persist buffers up to cycle at (all of them for
// pm.Blocked).
func (p sbrpPolicy) advance(at uint64) {
	if at == pm.Blocked {
		p.pbDrainAll()
	} else {
		p.pbAdvance(at)
	}
}

// sbrpStore puts a PM line into the SM's persist buffer. Its flush
// starts when the buffer drains to it (pbuffer.go).
func (b *Backend) sbrpStore(ws *warpState, s *smState, line, sectors uint64, t uint64) (int32, uint64, bool) {
	b.pbCatchUp()
	if e, ok := s.pbLine[line]; ok {
		ent := b.entries.at(e)
		if ent.start > t && (ent.pbi > ws.orderItem || b.hooks.brokenMerge) {
			// Not flushed yet and no ordering point of this warp since:
			// merge (the warp's DFence now waits for it too).
			b.pbMerge(ws, e, sectors)
			return e, t + 1, true
		}
		if ent.start > t {
			// An ordering point of this warp lies between: wait for the
			// flush to start.
			start := b.pbStart(ws.sm, e)
			b.last.Stalls.Evict += start - t
			t = start
		}
	}
	way := s.l1.lookup(line)
	if way < 0 {
		t = b.l1Fill(ws, line, t)
		way = s.l1.lookup(line)
	}
	t = b.pbReserve(ws.sm, t)
	e := b.newEntry(line)
	b.entries.at(e).sectors = sectors
	i := b.pbPut(ws, e, max(t, ws.front))
	b.entries.at(e).pbi = i
	ws.lastItem = i
	s.pbLine[line] = e
	s.l1.entry[way] = e
	return e, t + 1, false
}

// pbMerge joins a store of warp ws to buffered persist e.
func (b *Backend) pbMerge(ws *warpState, e int32, sectors uint64) {
	ent := b.entries.at(e)
	if ent.ack != noAck {
		// Flushing from a later cycle: the extra sectors go in its burst.
		ws.lastAck = max(ws.lastAck, ent.ack)
		if add := sectors &^ ent.sectors; add != 0 && ent.sectors != 0 {
			b.moreSectors(e, add, ws.sm)
		}
		return
	}
	if ent.sectors != 0 {
		ent.sectors |= sectors
	}
	p := &b.sms[ws.sm].pb
	it := &p.items[ent.pbi-p.base]
	if w := ws.id; w != it.w && !slices.Contains(it.more, w) {
		it.more = append(it.more, w)
	}
	it.after = max(it.after, ws.orderItem)
	ws.lastItem = max(ws.lastItem, ent.pbi)
}

// marker adds an order, acquire, release or durable point of warp ws to
// its SM's persist buffer (SBRP) at cycle t; it returns when it is in.
func (b *Backend) marker(ws *warpState, t uint64) uint64 {
	t = b.pbReserve(ws.sm, t)
	i := b.pbPut(ws, -1, t)
	ws.lastItem, ws.orderItem = i, i
	return t
}

// orderPoint makes every item of warp ws's SM so far precede the warp's
// later persists (a persist barrier's order): its stores no longer merge
// into them.
func (b *Backend) orderPoint(ws *warpState) {
	p := &b.sms[ws.sm].pb
	ws.orderItem = max(ws.orderItem, p.base+int64(len(p.items))-1)
}

func (b *Backend) sbrpVerb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	st := &b.last.Stalls
	switch kind {
	case pm.OpOFence:
		return b.marker(ws, t) + 1
	case pm.OpDFence:
		t = b.marker(ws, t)
		if b.deferWait(ws, t, 0) {
			return t + 1 // the warp blocks until the drain passes it (pbuffer.go)
		}
		return waitAcks(t, b.warpAcks(ws), &st.DFence)
	case pm.OpEpochBarrier:
		t = b.marker(ws, t)
		b.sms[ws.sm].l1.invalidate()
		if b.deferWait(ws, t, b.l2Lat) {
			return t + 1
		}
		d := waitAcks(t, b.warpAcks(ws), &st.DFence)
		return d + b.l2Lat
	case pm.OpPRel:
		t = b.marker(ws, t)
		rel := b.warpAcks(ws)
		for i := range group {
			if p := &group[i]; !p.done && p.kind == kind && p.scope == sc {
				b.relFront[p.addr] = max(b.relFront[p.addr], rel)
			}
		}
		d := t + 1
		if sc >= pm.Device {
			// Device scope: the warp waits until its persists are durable.
			d = waitAcks(t, rel, &st.Release)
		}
		return max(d, b.persistOps(ws, d-1, kind, sc, group))
	case pm.OpPAcq:
		for i := range group {
			if p := &group[i]; !p.done && p.kind == kind && p.scope == sc {
				ws.front = max(ws.front, b.relFront[p.addr])
			}
		}
		t = b.marker(ws, t)
		return b.acquire(ws, t, sc, group)
	case pm.OpPBarrier:
		t = b.marker(ws, t)
		if sc >= pm.Device {
			return waitAcks(t, b.warpAcks(ws), &st.PBarrier)
		}
		return t + 1
	}
	// SyncThreads: an execution barrier only, as SBRP's rules have it (the
	// paper orders persists by oFence, pRel/pAcq and dFence, never by a
	// block barrier). The artifact's DISC issue stage (shader.cc, "NORMAL
	// FENCES") also puts an order marker in the persist buffer at
	// __syncthreads; a trial of that here moved quick sbrp-fig6 by under
	// 1%, away from the paper (issue 24's session 20 and 21 notes).
	return t + 1
}
