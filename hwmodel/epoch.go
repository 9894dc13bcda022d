package hwmodel

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// epochPolicy is Epoch persistency and GPM (gpm set): PM stores leave their
// L1 line dirty, or with persist.epoch_write_through are written through as
// they execute; every ordering verb and block barrier writes back the SM's
// dirty PM lines, invalidates the L1 and stalls the warp until the acks are
// back; an OFence or DFence takes at least gpu.fence_latency_cycles. GPM
// adds a device-scope fence (an L2 round trip, at least the fence latency)
// after every persistency verb, as it runs on unmodified hardware.
type epochPolicy struct {
	basePolicy
	gpm bool
}

func (p epochPolicy) store(ws *warpState, line, sectors, t uint64) (int32, uint64, bool) {
	return p.dirtyStore(ws, line, sectors, t, true)
}

func (p epochPolicy) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	done := p.epochFlush(ws, t)
	if p.hooks.earlyFence && kind == pm.OpDFence {
		return t + 1
	}
	if kind == pm.OpOFence || kind == pm.OpDFence {
		done = p.fenceFloor(t, done, &p.last.Stalls.Epoch) // the fence instruction's own latency
	}
	if kind == pm.OpPAcq {
		done = max(done, p.loads(ws, done, kind, sc, group, false))
	}
	if kind == pm.OpPRel {
		done = max(done, p.persistOps(ws, done, kind, sc, group))
	}
	if p.gpm && kind != pm.OpSyncThreads {
		if f := uint64(p.cfg.GPU.FenceSystemCycles); f > 0 {
			// The system fence: its own round trip to the host, or
			// the last write's arrival there (done) and the
			// acknowledgement's way back (half the round trip),
			// whichever is later; with gpu.fence_waits_all, every
			// earlier write's, any SM's.
			done = p.fenceAll(ws, t, f, true, max(done+f/2, t+f))
		} else {
			// The extra device-scope fence, issued at done.
			done = p.fenceAll(ws, t, 2*p.l2Lat, false, p.fenceFloor(done, done+p.l2Lat, nil))
		}
	}
	return done
}

// acquireL1 writes the L1's dirty lines back and invalidates it.
func (p epochPolicy) acquireL1(ws *warpState, t uint64) { p.writeBack(ws, t) }

// stepEnders: under GPM with gpu.fence_waits_all every persistency verb
// takes the system fence (verb), so each ends its step as a fence does.
func (p epochPolicy) stepEnders(fenceAll bool) []pm.OpKind {
	kinds := p.basePolicy.stepEnders(fenceAll)
	if fenceAll && p.gpm {
		kinds = append(kinds, pm.OpOFence, pm.OpDFence, pm.OpEpochBarrier, pm.OpPAcq, pm.OpPRel)
	}
	return kinds
}

// dirtyStore puts a PM line of warp ws into its L1 as a dirty line at t
// (Epoch, GPM, None), or under an ordering model with
// persist.epoch_write_through (ordering set) writes it through at once; the
// warp goes on and its next fence waits for the ack. ordering also notes
// the line among the warp's own (persist.epoch_own_acks).
func (b *Backend) dirtyStore(ws *warpState, line, sectors, t uint64, ordering bool) (int32, uint64, bool) {
	s := &b.sms[ws.sm]
	way := s.l1.lookup(line)
	if way < 0 {
		t = b.l1Fill(ws, line, t)
		way = s.l1.lookup(line)
	}
	if b.cfg.Persist.EpochWriteThrough && ordering {
		if e := s.l1.entry[way]; e >= 0 && b.entries.at(e).ack == noAck {
			// A line dirtied before the key took effect cannot
			// exist: every store of this model writes through.
			panic(fmt.Sprintf("hwmodel: a dirty L1 line under write-through Epoch at cycle %d", t))
		}
		e := b.newEntry(line)
		b.entries.at(e).sectors = sectors
		b.entries.at(e).dirty = t // stored at t (ackDirtyBy)
		s.l1.entry[way] = e
		ack := b.flush(e, t, ws.sm)
		ws.lastAck = max(ws.lastAck, ack)
		b.own(ws, e)
		// The store retires once its write has left the SM: it waits
		// for an outstanding-write slot (mem.sm_writes) and the SM's
		// injection port, as a volatile store waits for the port.
		return e, max(t+1, b.left), false
	}
	if e := s.l1.entry[way]; e >= 0 && b.entries.at(e).ack == noAck {
		b.entries.at(e).dirty = min(b.entries.at(e).dirty, t)
		b.entries.at(e).sectors |= sectors
		if ordering {
			b.own(ws, e)
		}
		return e, t + 1, true
	}
	e := b.newEntry(line)
	b.entries.at(e).dirty = t
	b.entries.at(e).sectors = sectors
	s.l1.entry[way] = e
	s.dirty = append(s.dirty, e)
	if ordering {
		b.own(ws, e)
	}
	return e, t + 1, false
}

// own notes that warp ws stored into dirty entry e (for
// persist.epoch_own_acks).
func (b *Backend) own(ws *warpState, e int32) {
	if !b.cfg.Persist.EpochOwnAcks {
		return // only Epoch's and GPM's fences read the list
	}
	if len(ws.owned) == 0 || ws.owned[len(ws.owned)-1] != e {
		ws.owned = append(ws.owned, e)
	}
}

// epochFlush writes back every dirty PM line of the SM's L1 from cycle t,
// invalidates the L1 and returns when every ack of the SM is back, those of
// the write-backs it issued included (with persist.epoch_own_acks: every
// ack of the lines this warp dirtied).
func (b *Backend) epochFlush(ws *warpState, t uint64) uint64 {
	issued := b.writeBack(ws, t)
	var ack uint64
	if b.cfg.Persist.EpochOwnAcks {
		for _, e := range ws.owned {
			if b.entries.at(e).ack == noAck {
				panic(fmt.Sprintf("hwmodel: a line warp-stored before cycle %d is still unflushed after the Epoch write-back", t))
			}
			ack = max(ack, b.entries.at(e).ack)
		}
		ws.owned = ws.owned[:0]
	} else {
		// Every flush of the SM started by t, and the write-backs this
		// fence issued, which the window may start later than t, and
		// those of lines dirtied by t that a warp ahead in time wrote
		// back later than t.
		ack = max(b.sms[ws.sm].ackBy(t), issued, b.sms[ws.sm].ackDirtyBy(t))
		if b.cfg.Persist.EpochWriteThrough {
			// And the warp's own write-throughs, which the window may
			// also have started later than t.
			ack = max(ack, ws.lastAck)
		}
	}
	done := max(t+1, ack)
	b.last.Stalls.Epoch += done - t - 1
	return done
}
