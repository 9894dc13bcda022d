package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// strictPolicy is Strict persistency: every PM store is written through to
// the persistence point and its warp waits for the ack; ordering verbs then
// have nothing left to wait for.
type strictPolicy struct{ basePolicy }

func (p strictPolicy) store(ws *warpState, line, sectors, t uint64) (int32, uint64, bool) {
	if p.sms[ws.sm].l1.lookup(line) < 0 {
		t = p.l1Fill(ws, line, t)
	}
	e := p.newEntry(line)
	p.entries.at(e).sectors = sectors
	ack := p.flush(e, t, ws.sm)
	ws.lastAck = max(ws.lastAck, ack)
	p.last.Stalls.Strict += ack - t
	return e, ack, false
}

func (p strictPolicy) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	switch kind {
	case pm.OpPAcq:
		return p.acquire(ws, t, sc, group)
	case pm.OpPRel:
		return p.persistOps(ws, t, kind, sc, group)
	case pm.OpDFence:
		return p.fenceFloor(t, waitAcks(t, ws.lastAck, &p.last.Stalls.DFence), &p.last.Stalls.DFence)
	case pm.OpEpochBarrier:
		return waitAcks(t, ws.lastAck, &p.last.Stalls.DFence)
	case pm.OpOFence:
		return p.fenceFloor(t, t+1, &p.last.Stalls.DFence)
	}
	return t + 1
}
