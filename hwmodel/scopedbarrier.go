package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// scopedBarrierPolicy is the scoped persist barrier paper's hardware: PM
// stores are written through NVW-FIFOs (persist.nvw_fifo_l1 per L1,
// persist.nvw_fifo_l2 in the L2); PBarrier(s) waits for the members of s,
// then for the FIFOs covering s to drain.
type scopedBarrierPolicy struct{ basePolicy }

func (p scopedBarrierPolicy) store(ws *warpState, line, sectors, t uint64) (int32, uint64, bool) {
	s := &p.sms[ws.sm]
	if s.l1.lookup(line) < 0 {
		t = p.l1Fill(ws, line, t)
	}
	start := t
	for {
		a := s.slots.firstFree(start, p.cfg.Persist.NVWFIFOL1)
		g := p.l2Slots.firstFree(a, p.cfg.Persist.NVWFIFOL2)
		if g == a {
			start = a
			break
		}
		start = g
	}
	e := p.newEntry(line)
	p.entries[e].sectors = sectors
	ack := p.flush(e, start, ws.sm)
	// An NVW-FIFO tracks the NV writes its cache still holds (the
	// scoped persist barrier paper, §6): the L1's entry is dequeued
	// when the line's write-back to the L2 is issued, the L2's when
	// the line's write-back towards NVRAM is accepted. Barriers still
	// wait for the acks.
	s.slots.add(start, min(start+1, ack))
	p.l2Slots.add(start, min(p.sent, ack))
	ws.lastAck = max(ws.lastAck, ack)
	p.last.Stalls.NVWFull += start - t
	return e, start + 1, false
}

func (p scopedBarrierPolicy) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	st := &p.last.Stalls
	switch kind {
	case pm.OpOFence, pm.OpDFence:
		return waitAcks(t, ws.lastAck, &st.DFence)
	case pm.OpEpochBarrier:
		return waitAcks(t, p.ackBy(t), &st.DFence)
	case pm.OpPBarrier:
		if sc == pm.Thread {
			return waitAcks(t, ws.lastAck, &st.PBarrier)
		}
		return t + 1 // the drain is timed when the scope has arrived (barrier)
	case pm.OpPRel:
		d := waitAcks(t, p.drainOf(ws, sc, t), &st.Release)
		return max(d, p.persistOps(ws, d, kind, sc, group))
	case pm.OpPAcq:
		return p.acquire(ws, t, sc, group)
	}
	return t + 1
}

// barrier is the conservative scoped barrier: once the scope has arrived,
// the NVW-FIFOs covering it drain and the scope waits for the acks.
func (p scopedBarrierPolicy) barrier(group []*pm.Agent, kind pm.OpKind, sc pm.Scope, at uint64) uint64 {
	if kind != pm.OpPBarrier {
		return 0
	}
	if sc >= pm.Device {
		return p.ackBy(at)
	}
	var acks uint64
	p.syncStamp++
	for _, a := range group {
		ws := p.warp(a.Warp)
		if ws.stamp != p.syncStamp {
			ws.stamp = p.syncStamp
			acks = max(acks, p.drainOf(ws, pm.Block, at))
		}
	}
	return acks
}

// drainOf returns the cycle by which the NVW-FIFOs covering scope sc of the
// warp have drained (ScopedBarrier): the warp's own writes for thread and
// warp scope, its SM's L1 FIFO for block scope, every FIFO otherwise.
func (b *Backend) drainOf(ws *warpState, sc pm.Scope, t uint64) uint64 {
	switch sc {
	case pm.Thread, pm.Warp:
		return ws.lastAck
	case pm.Block:
		return b.sms[ws.sm].ackBy(t)
	}
	return b.ackBy(t)
}
