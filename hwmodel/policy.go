package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// policy is one persistency model's part of the GPU timing: what it
// buffers, when it writes a line towards the persistence point, and what
// an ordering, durability or barrier verb waits for. Every policy writes
// through the one memory system (memsys.go); a new model is one policy
// file plus its rule in package persistency.
type policy interface {
	// store times one PM line of a store-like instruction of warp ws at
	// cycle t (sectors: the sectors it writes, 0 without sectors) and
	// returns the line's persist entry, when the warp may go on, and
	// whether the line joined an entry already pending.
	store(ws *warpState, line, sectors, t uint64) (e int32, done uint64, merged bool)
	// verb times a persistency verb or barrier of warp ws issued at t (the
	// fences, CPU verbs and warp barriers every model treats alike are
	// timed by Backend.verb before it).
	verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64
	// acquireL1 is what a device-scope acquire does to the warp's L1 at t
	// once its flag is read.
	acquireL1(ws *warpState, t uint64)
	// ordersEvictions reports whether the L1 must keep buffered PM lines
	// until their flush may start (evicting one waits for it).
	ordersEvictions() bool
	// barrier returns the cycle by which the persists a barrier of kind
	// and scope sc orders have drained, once its group arrived at at (0:
	// nothing to wait for).
	barrier(group []*pm.Agent, kind pm.OpKind, sc pm.Scope, at uint64) uint64
	// evict handles dirty PM entry e, whose line SM sm's L1 evicts at t,
	// and returns when the line has left the L1.
	evict(sm int, e int32, t uint64) uint64
	// finish writes back what the model still buffers at the kernel's
	// end, cycle t.
	finish(t uint64)
	// stepEnders returns the verbs that end their lane's step under the
	// model (pm.Waker): the ones whose warp blocks until something the
	// executor advances (fenceAll: gpu.fence_waits_all's fences, which
	// wait for every other warp to run past them).
	stepEnders(fenceAll bool) []pm.OpKind
	// advance drains what the model buffers up to cycle at (every buffer
	// for pm.Blocked), as Wake asks.
	advance(at uint64)
}

// newPolicy returns the policy of b's model.
func newPolicy(b *Backend) policy {
	base := basePolicy{b}
	switch b.model {
	case Strict:
		return strictPolicy{base}
	case Epoch:
		return epochPolicy{base, false}
	case GPM:
		return epochPolicy{base, true}
	case SBRP:
		return sbrpPolicy{base}
	case ScopedBarrier:
		return scopedBarrierPolicy{base, newNVWFIFOs(b.cfg.GPU.SMs)}
	case WriteBackADR, WriteBackPCT:
		return writeBackPolicy{base}
	}
	return nonePolicy{base}
}

// basePolicy holds what most policies share: a device-scope acquire
// invalidates the L1, evictions need no order, barriers drain nothing.
type basePolicy struct{ *Backend }

func (p basePolicy) acquireL1(ws *warpState, t uint64) { p.sms[ws.sm].l1.invalidate() }

func (basePolicy) ordersEvictions() bool { return false }

func (basePolicy) barrier([]*pm.Agent, pm.OpKind, pm.Scope, uint64) uint64 { return 0 }

// evict writes a dirty PM line back in the background (Epoch, GPM, None).
func (p basePolicy) evict(sm int, e int32, t uint64) uint64 {
	if p.entries.at(e).ack == noAck {
		p.flush(e, t, sm)
	}
	return t
}

func (basePolicy) finish(uint64) {}

// stepEnders: with gpu.fence_waits_all a fence ends its step (fenceAll).
func (basePolicy) stepEnders(fenceAll bool) []pm.OpKind {
	if fenceAll {
		return []pm.OpKind{pm.OpFence}
	}
	return nil
}

func (basePolicy) advance(uint64) {}

// writeBackPolicy is the re-study's write-back ADR and PCT models: PM
// lines stay dirty in the L2 until a write-through store, CLWB, L2WB or
// eviction (writeback.go).
type writeBackPolicy struct{ basePolicy }

func (p writeBackPolicy) store(ws *warpState, line, _, t uint64) (int32, uint64, bool) {
	return p.wbStore(ws, line, t)
}

func (p writeBackPolicy) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	return p.wbVerb(ws, t, kind, sc, group)
}
