package coro

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// Ctx is a task's handle; its methods are the CPU verbs. It is valid only
// inside its task.
type Ctx struct {
	pm.Agent
	r        *runner
	slot     int
	yield    func(struct{}) bool
	lastRead pm.Addr
	lastGen  uint64
	spins    int
	lastOp   pm.OpKind
	// cid is the persist context the task last set; restored after a
	// switch when hasCid.
	cid    uint64
	hasCid bool
	// dirty: a persist or CLWB since the task's last ordering point;
	// joinDirty: since its last join (StrandWeaver).
	dirty, joinDirty bool
	// need is the SBatch fence the task waits for.
	need uint64
	// yieldGen is the write generation at the task's last yield.
	yieldGen uint64
	// held: the task waits at a durability point (awaitDurable).
	held bool
	// mem counts the task's loads, stores and CLWBs.
	mem uint64
}

// Spin limits: a task that rereads one address this many times with nothing
// written in between, without yielding, can never see it change (it has the
// core to itself), so it is deadlocked.
const (
	syncSpin = 1 << 10
	loadSpin = 1 << 20
)

// ID returns the task id.
func (c *Ctx) ID() int { return c.Agent.ID }

// Context returns the window context (0..Window-1) the task runs in: its
// COSPlay context id, and a resource (a log partition, say) no other
// active task uses.
func (c *Ctx) Context() int { return c.slot }

// Mode returns the run's mode.
func (c *Ctx) Mode() Mode { return c.r.mode }

func (c *Ctx) report() {
	r := c.r
	r.p.res.Verbs++
	c.lastOp = r.op.Kind
	switch r.op.Kind {
	case pm.OpLoad, pm.OpStore:
		c.mem++
	case pm.OpCLWB:
		r.p.res.CLWBs++
		c.mem++
	case pm.OpSFence, pm.OpCFence, pm.OpPersistBarrier, pm.OpJoinStrand:
		r.p.res.Fences++
	}
	if r.ops {
		r.be.Op(&c.Agent, &r.op)
		if r.dur != nil {
			switch {
			case r.dur.WaitDurable(&c.Agent, &r.op):
				c.awaitDurable()
			case len(r.held) > 0:
				if r.heldVerbs++; r.heldVerbs >= r.cfg.durBound {
					c.makeDurable()
				}
			}
		}
	}
}

// awaitDurable holds the task at a durability point (its verb returns
// when what it persisted is durable) and lets the other contexts run:
// the tasks held together share one MakeDurable (group commit), made when
// every live task is held, when a round of the scheduler passes with
// nothing written and no task ended, or when the others have reported
// the run's bound of verbs (WithDurabilityBound) since the first was
// held. Alone in the window, or the last live task to reach one, the task
// makes them durable at once, as it does at SBatch's shared SFence, which
// other tasks' ordering points rely on. On resuming, its persist context
// is restored, as after a Yield.
func (c *Ctx) awaitDurable() {
	r := c.r
	if r.shared || len(r.held) >= r.live-1 {
		c.makeDurable()
		return
	}
	if len(r.held) == 0 {
		r.heldVerbs = 0
	}
	c.held = true
	r.held = append(r.held, c)
	for c.held {
		if !c.yield(struct{}{}) {
			panic(abortSignal{})
		}
	}
	if c.hasCid && r.coreCtx != c.cid {
		c.SetCtx(c.cid)
	}
}

// makeDurable makes the held tasks durable from the running task, which
// fails the run and unwinds if the backend fails.
func (c *Ctx) makeDurable() {
	if err := c.r.makeDurable(); err != nil {
		panic(abortSignal{})
	}
}

func (c *Ctx) fault(err error) { panic(faultSignal{err}) }

func (c *Ctx) access(a pm.Addr, n, align uint64) ([]byte, bool) {
	b, persistent, err := c.r.mem.Bytes(a, n, align)
	if err != nil {
		c.fault(err)
	}
	return b, persistent
}

// observe fails the run if the task keeps rereading a word nobody can change.
func (c *Ctx) observe(a pm.Addr, limit int) {
	if a != c.lastRead || c.r.p.wgen != c.lastGen {
		c.spins = 0
		c.lastRead, c.lastGen = a, c.r.p.wgen
		return
	}
	c.spins++
	if c.spins >= limit {
		c.r.fail(fmt.Errorf("%w: %v spins on %v without yielding", ErrDeadlock, &c.Agent, a))
		panic(abortSignal{})
	}
}

// wrote notes a write; a persistent one is something to order.
func (c *Ctx) wrote(persistent bool) {
	c.r.p.wgen++
	if persistent {
		c.dirty, c.joinDirty = true, true
	}
}

func (c *Ctx) load(a pm.Addr, size uint64) uint64 {
	c.observe(a, loadSpin)
	b, persistent := c.access(a, size, size)
	c.r.op = pm.Op{Kind: pm.OpLoad, PM: persistent, Size: uint32(size), Addr: a}
	c.report()
	return pm.GetLE(b)
}

func (c *Ctx) store(a pm.Addr, size, v uint64) {
	b, persistent := c.access(a, size, size)
	pm.PutLE(b, v)
	c.wrote(persistent)
	c.r.op = pm.Op{Kind: pm.OpStore, PM: persistent, Size: uint32(size), Addr: a, Value: v}
	c.report()
}

// Load8 loads the byte at a.
func (c *Ctx) Load8(a pm.Addr) uint8 { return uint8(c.load(a, 1)) }

// Load32 loads the 4-byte value at a (4-byte aligned).
func (c *Ctx) Load32(a pm.Addr) uint32 { return uint32(c.load(a, 4)) }

// Load64 loads the 8-byte value at a (8-byte aligned).
func (c *Ctx) Load64(a pm.Addr) uint64 { return c.load(a, 8) }

// Store8 stores the byte v at a. A store to PM is a persist.
func (c *Ctx) Store8(a pm.Addr, v uint8) { c.store(a, 1, uint64(v)) }

// Store32 stores v at a (4-byte aligned).
func (c *Ctx) Store32(a pm.Addr, v uint32) { c.store(a, 4, uint64(v)) }

// Store64 stores v at a (8-byte aligned); to PM it persists atomically.
func (c *Ctx) Store64(a pm.Addr, v uint64) { c.store(a, 8, v) }

// LoadBytes copies len(buf) bytes at a into buf.
func (c *Ctx) LoadBytes(a pm.Addr, buf []byte) {
	b, persistent := c.access(a, uint64(len(buf)), 1)
	copy(buf, b)
	c.r.op = pm.Op{Kind: pm.OpLoad, PM: persistent, Size: uint32(len(buf)), Addr: a, Data: buf}
	c.report()
}

// StoreBytes copies data to a; to PM it persists in aligned 8-byte words.
func (c *Ctx) StoreBytes(a pm.Addr, data []byte) {
	b, persistent := c.access(a, uint64(len(data)), 1)
	copy(b, data)
	c.wrote(persistent)
	c.r.op = pm.Op{Kind: pm.OpStore, PM: persistent, Size: uint32(len(data)), Addr: a, Data: data}
	c.report()
}

// CAS64 stores nv at a if it holds old and returns what it held: a try-lock
// is CAS64(lock, 0, 1) == 0 (see Lock).
func (c *Ctx) CAS64(a pm.Addr, old, nv uint64) uint64 {
	c.observe(a, syncSpin)
	b, persistent := c.access(a, 8, 8)
	cur := pm.GetLE(b)
	wrote := cur == old
	if wrote {
		pm.PutLE(b, nv)
		c.wrote(persistent)
	}
	c.r.op = pm.Op{Kind: pm.OpAtomic, Scope: pm.System, Wrote: wrote, PM: persistent, Size: 8, Addr: a, Value: nv, Old: cur}
	c.report()
	return cur
}

// AtomicAdd64 adds v to the 8-byte value at a and returns the old value.
func (c *Ctx) AtomicAdd64(a pm.Addr, v uint64) uint64 {
	b, persistent := c.access(a, 8, 8)
	cur := pm.GetLE(b)
	pm.PutLE(b, cur+v)
	c.wrote(persistent)
	c.r.op = pm.Op{Kind: pm.OpAtomic, Scope: pm.System, Wrote: true, PM: persistent, Size: 8, Addr: a, Value: cur + v, Old: cur}
	c.report()
	return cur
}

// Lock takes the try-lock at a (an 8-byte word, 0 when free): while another
// task holds it, the task yields to the next context instead of spinning
// (COSPlay §4.4).
func (c *Ctx) Lock(a pm.Addr) {
	for c.CAS64(a, 0, 1) != 0 {
		c.Yield()
	}
}

// Unlock releases the try-lock at a.
func (c *Ctx) Unlock(a pm.Addr) { c.Store64(a, 0) }

func (c *Ctx) verb(k pm.OpKind, a pm.Addr, v uint64) {
	c.r.op = pm.Op{Kind: k, Scope: pm.Thread, Addr: a, Value: v}
	c.report()
}

// CLWB writes back the cache line holding a toward the persistence point.
func (c *Ctx) CLWB(a pm.Addr) {
	c.access(a, 1, 1)
	c.dirty, c.joinDirty = true, true
	c.verb(pm.OpCLWB, a, 0)
}

// SFence orders: the task's earlier CLWBs complete before its later stores.
// It waits for every context of the core.
func (c *Ctx) SFence() {
	c.dirty, c.joinDirty = false, false
	c.verb(pm.OpSFence, 0, 0)
}

// SetCtx makes later stores of the task belong to persist context cid
// (COSPlay's setctx). The task's context is restored whenever it resumes
// after a switch.
func (c *Ctx) SetCtx(cid uint64) {
	c.cid, c.hasCid = cid, true
	c.r.coreCtx = cid
	c.verb(pm.OpSetCtx, 0, cid)
}

// CFence orders the persists of context cid only (COSPlay's cfence).
func (c *Ctx) CFence(cid uint64) {
	if c.hasCid && cid == c.cid {
		c.dirty = false
	}
	c.verb(pm.OpCFence, 0, cid)
}

// PersistBarrier orders the current strand's earlier persists before its
// later ones (StrandWeaver).
func (c *Ctx) PersistBarrier() {
	c.dirty = false
	c.verb(pm.OpPersistBarrier, 0, 0)
}

// JoinStrand orders the persists of every earlier strand before the later
// ones and waits for them (StrandWeaver).
func (c *Ctx) JoinStrand() {
	c.dirty, c.joinDirty = false, false
	c.verb(pm.OpJoinStrand, 0, 0)
}

// NewStrand marks the start of persists that need no order with the task's
// earlier ones. Under StrandWeaver it starts a strand (NewStrand); under
// the other modes it issues nothing.
func (c *Ctx) NewStrand() {
	r := c.r
	if r.mode != StrandWeaver {
		return
	}
	r.strands++
	c.dirty = false // the new strand has nothing to order yet
	c.verb(pm.OpNewStrand, 0, r.strands)
}

// Fence is the task's ordering point: its earlier persists (written back
// with CLWB) are ordered before its later ones, and, except under
// Unordered and StrandWeaver, durable when it returns. What it issues is
// the run's Mode's: an SFence (Baseline), nothing (Unordered), a switch to
// the next context and then SetCtx and CFence of the task's context
// (COSPlay, FreeSwitch), a switch after which the scheduler's shared SFence
// has covered it (SBatch), or a PersistBarrier (StrandWeaver). A Fence with
// nothing stored or written back since the task's last one issues nothing.
func (c *Ctx) Fence() {
	if !c.dirty {
		return
	}
	switch c.r.mode {
	case Baseline:
		c.SFence()
	case COSPlay, FreeSwitch:
		c.Yield()
		c.CFence(c.cid)
	case SBatch:
		c.need = c.r.batch + 1
		c.Yield()
	case StrandWeaver:
		c.PersistBarrier()
	}
	c.dirty = false
}

// Join is an ordering point across strands: under StrandWeaver a JoinStrand
// (if anything was stored since the last one), under the other modes Fence.
func (c *Ctx) Join() {
	if c.r.mode != StrandWeaver {
		c.Fence()
		return
	}
	if c.joinDirty {
		c.JoinStrand()
	}
}

// Work charges cycles of computation the model cannot see.
func (c *Ctx) Work(cycles uint64) {
	c.r.p.res.Works++
	c.r.p.res.WorkCycles += cycles
	c.verb(pm.OpWork, 0, cycles)
}

// MemVerbs returns the number of loads, stores and CLWBs the task has
// issued so far: its own program's, the same under every Mode (atomics,
// whose lock retries depend on the other tasks, and the verbs a Mode adds
// at an ordering point are not counted).
func (c *Ctx) MemVerbs() uint64 { return c.mem }

// switched reports a coroutine switch, with its cost for a timing backend.
func (c *Ctx) switched() {
	c.r.p.res.Switches++
	c.verb(pm.OpYield, 0, c.r.switchCy)
}

// Yield gives the core to the next live context; it returns when this
// task's turn comes again. On return the task's persist context is
// restored (SetCtx) if it has one, and under SBatch the scheduler's SFence
// covers the task's last ordering point.
func (c *Ctx) Yield() {
	r := c.r
	r.p.res.Yields++
	c.spins, c.lastRead = 0, 0
	c.switched()
	if r.live > 1 || r.p.cores > 1 {
		// Another context, or another core's, may run.
		if !c.yield(struct{}{}) {
			panic(abortSignal{})
		}
		r.soloIdle = 0
	} else if c.yieldGen == r.p.wgen {
		// Alone in the window: the task resumes at once. Yielding with
		// nothing written since its last yield can never change anything.
		if r.soloIdle++; r.soloIdle >= r.cfg.idleRounds {
			r.fail(r.deadlock(r.slots))
			panic(abortSignal{})
		}
	} else {
		r.soloIdle = 0
	}
	c.yieldGen = r.p.wgen
	c.resumed()
}

// resumed restores what a switch took from the task.
func (c *Ctx) resumed() {
	r := c.r
	if r.mode == SBatch && c.need > r.batch {
		r.batch++
		// The shared SFence covers the ordering points of every task
		// resumed after it: it is durable before any of them goes on, so
		// it is not held (see awaitDurable).
		r.shared = true
		c.SFence()
		r.shared = false
	}
	switch {
	case r.mode == COSPlay || r.mode == FreeSwitch:
		c.SetCtx(c.cid)
	case c.hasCid && r.coreCtx != c.cid:
		c.SetCtx(c.cid)
	}
}
