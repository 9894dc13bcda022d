package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// nonePolicy is no persistency (COSPlay's Unordered, and the DRAM-only
// machine, persist.none, which takes no other model): PM lines are written back from the L1 on
// eviction, at a device-scope release and at the kernel's end, through the
// same memory system as every model's; no verb waits for a persist.
type nonePolicy struct{ basePolicy }

func (p nonePolicy) store(ws *warpState, line, sectors, t uint64) (int32, uint64, bool) {
	return p.dirtyStore(ws, line, sectors, t, false)
}

func (p nonePolicy) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	switch kind {
	case pm.OpPAcq:
		return p.acquire(ws, t, sc, group)
	case pm.OpPRel:
		if sc >= pm.Device {
			p.publish(ws, t)
		}
		return p.persistOps(ws, t, kind, sc, group)
	case pm.OpPBarrier:
		if sc >= pm.Device {
			p.publish(ws, t) // the barrier's round trip is timed once its scope has arrived (barrier)
		}
	case pm.OpEpochBarrier:
		if sc >= pm.Device {
			p.publish(ws, t)
			return t + p.l2Lat
		}
	}
	return t + 1
}

// barrier: a persist barrier of device scope or wider is a release of that
// scope once its members have arrived: an L2 round trip. It is timed once
// per barrier, not per warp instruction that arrives (a warp whose lanes
// arrive in several steps pays it once), as ScopedBarrier's drain is.
func (p nonePolicy) barrier(_ []*pm.Agent, kind pm.OpKind, sc pm.Scope, at uint64) uint64 {
	if kind == pm.OpPBarrier && sc >= pm.Device {
		return at + p.l2Lat
	}
	return 0
}

// acquireL1 writes the L1's dirty lines back and invalidates it.
func (p nonePolicy) acquireL1(ws *warpState, t uint64) { p.writeBack(ws, t) }
