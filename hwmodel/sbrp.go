package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// sbrpPolicy is SBRP: a per-SM persist buffer drained in order through a
// window of outstanding flushes (persist.window, SBRP's own limit);
// OFence and block-scope PRel/PAcq are buffered markers, device-scope PRel
// and DFence block only the issuing warp until its persists are durable,
// device-scope PAcq invalidates the L1. The L1 keeps buffered lines until
// their flush may start.
type sbrpPolicy struct{ basePolicy }

func (p sbrpPolicy) store(ws *warpState, line, sectors, t uint64) (int32, uint64, bool) {
	return p.sbrpStore(ws, &p.sms[ws.sm], line, sectors, t)
}

func (p sbrpPolicy) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	return p.sbrpVerb(ws, t, kind, sc, group)
}

func (sbrpPolicy) ordersEvictions() bool { return true }

// sbrpStore puts a PM line into the SM's persist buffer.
func (b *Backend) sbrpStore(ws *warpState, s *smState, line, sectors uint64, t uint64) (int32, uint64, bool) {
	if e, ok := s.pbLine[line]; ok {
		ent := &b.entries[e]
		if ent.start > t && (ent.start >= ws.front || b.hooks.brokenMerge) {
			// Not flushed yet and no order marker of this warp since: merge.
			ws.lastAck = max(ws.lastAck, ent.ack)
			if add := sectors &^ ent.sectors; add != 0 && ent.sectors != 0 {
				b.moreSectors(e, add, ws.sm)
			}
			return e, t + 1, true
		}
		if ent.start > t {
			// A marker of this warp lies between: wait for the flush to start.
			b.last.Stalls.Evict += ent.start - t
			t = ent.start
		}
	}
	way := s.l1.lookup(line)
	if way < 0 {
		t = b.l1Fill(ws, line, t)
		way = s.l1.lookup(line)
	}
	t = b.pbReserve(s, t)
	start := s.slots.firstFree(max(t, ws.front), b.cfg.Persist.Window)
	e := b.newEntry(line)
	b.entries[e].sectors = sectors
	ack := b.flush(e, start, ws.sm)
	s.slots.add(start, ack)
	b.pbPush(s, ack)
	s.pbLine[line] = e
	s.l1.entry[way] = e
	ws.lastAck = max(ws.lastAck, ack)
	return e, t + 1, false
}

// pbReserve waits, from cycle t, for a free persist buffer entry and
// returns when one is free.
func (b *Backend) pbReserve(s *smState, t uint64) uint64 {
	for s.pbHead < len(s.pbRel) && s.pbRel[s.pbHead] <= t {
		s.pbHead++
	}
	if len(s.pbRel)-s.pbHead >= b.cfg.Persist.BufferEntries {
		free := s.pbRel[s.pbHead]
		b.last.Stalls.BufferFull += free - t
		t = free
		s.pbHead++
	}
	if s.pbHead > 4096 && s.pbHead*2 > len(s.pbRel) {
		s.pbRel = append(s.pbRel[:0], s.pbRel[s.pbHead:]...)
		s.pbHead = 0
	}
	return t
}

// pbPush appends an entry that completes at done; entries leave the buffer
// in order.
func (b *Backend) pbPush(s *smState, done uint64) {
	s.pbLast = max(s.pbLast, done)
	s.pbRel = append(s.pbRel, s.pbLast)
}

// marker adds an order, acquire, release or durable marker of warp ws to
// its SM's persist buffer (SBRP) at cycle t; it returns when it is in.
func (b *Backend) marker(ws *warpState, t uint64) uint64 {
	s := &b.sms[ws.sm]
	t = b.pbReserve(s, t)
	b.pbPush(s, ws.lastAck)
	ws.front = max(ws.front, ws.lastAck)
	return t
}
func (b *Backend) sbrpVerb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	st := &b.last.Stalls
	switch kind {
	case pm.OpOFence:
		return b.marker(ws, t) + 1
	case pm.OpDFence:
		t = b.marker(ws, t)
		return waitAcks(t, ws.lastAck, &st.DFence)
	case pm.OpEpochBarrier:
		t = b.marker(ws, t)
		d := waitAcks(t, ws.lastAck, &st.DFence)
		b.sms[ws.sm].l1.invalidate()
		return d + b.l2Lat
	case pm.OpPRel:
		t = b.marker(ws, t)
		rel := ws.lastAck
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
			return waitAcks(t, ws.lastAck, &st.PBarrier)
		}
		return t + 1
	}
	return t + 1 // SyncThreads: an execution barrier only
}
