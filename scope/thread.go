package scope

import (
	"fmt"

	"github.com/scopedpm/scopedpm/internal/callsite"
	"github.com/scopedpm/scopedpm/pm"
)

// Thread is the handle of one simulated GPU thread, passed to the kernel. Its
// methods are the GPU verbs. A Thread is valid only inside its kernel call
// and must not be shared with other goroutines.
//
// A verb given a bad address (unmapped, out of range, misaligned) faults: the
// thread stops and Launch returns a *KernelError wrapping ErrFault and the pm
// error; one given a bad argument (not a scope) stops it with ErrBadArg. A
// Thread used after its kernel returned panics with ErrStale (inside
// another launch, that launch fails with it).
type Thread struct {
	pm.Agent
	e   *engine
	blk *block
	w   *warp
	tib int
	wk  *worker

	state  uint8
	budget int // verbs left in this step (timing backends)
	// Spin detection: the addresses read since the engine's write count
	// was rgen (at most len(rset) of them), how many reads revisited one
	// of them, and the value of the last read.
	rset    [4]pm.Addr
	rn      uint8
	rhit    uint8 // the addresses of rset read more than once: those it polls
	rgen    uint64
	spins   int
	lastVal uint64
	parkSeq uint32 // counts parks; stale entries of the parked map differ
	parkAt  pm.Addr
	waitOp  string
}

// Spin thresholds. A thread spins when, with no write anywhere in between,
// it keeps rereading a few addresses (at most len(Thread.rset)): a loop
// that polls one flag, or several in turn. A read of an address it has not
// read since the last write, once the set is full, is progress (a loop
// walking memory) and starts the count again. A synchronising read (PAcq, an atomic
// that did not write) parks at the first revisit, a plain load after
// loadSpin revisits, since rereading a loop-invariant word is common. Once
// nothing else can run, parked threads are woken to probe with syncProbe
// and WithSpinProbe's limits, and a probe round in which nothing is written
// is a deadlock. The limits are small so that a full GPU of spinning
// threads is reported within about a second.
const (
	loadSpin  = 64
	syncProbe = 64
)

// ID returns the global thread id, Block()*BlockDim()+TID().
func (t *Thread) ID() int { return t.Agent.ID }

// Block returns the block id.
func (t *Thread) Block() int { return t.Agent.Block }

// TID returns the thread's index in its block.
func (t *Thread) TID() int { return t.tib }

// Warp returns the global warp id (block-major).
func (t *Thread) Warp() int { return t.Agent.Warp }

// WarpInBlock returns the warp's index in its block.
func (t *Thread) WarpInBlock() int { return t.tib / t.e.lim.WarpSize }

// Lane returns the thread's lane in its warp.
func (t *Thread) Lane() int { return t.Agent.Lane }

// WarpSize returns the number of threads per warp.
func (t *Thread) WarpSize() int { return t.e.lim.WarpSize }

// BlockDim returns the number of threads per block.
func (t *Thread) BlockDim() int { return t.e.grid.Threads }

// GridDim returns the number of blocks in the grid.
func (t *Thread) GridDim() int { return t.e.grid.Blocks }

// Shared returns the address of the block's shared memory (see
// WithShared), or 0 if the launch has none.
func (t *Thread) Shared() pm.Addr { return t.blk.shared }

// SM returns the SM the thread's block is resident on.
func (t *Thread) SM() int { return t.Agent.Unit }

// suspend yields the thread's coroutine to the engine.
func (t *Thread) suspend() {
	if !t.wk.yield(t) {
		// The launch is torn down: unwind the kernel. A verb in a deferred
		// call aborts the same way (it is still this thread's, not stale).
		t.state = stRunning
		panic(abortSignal{})
	}
	t.state = stRunning
}

func (t *Thread) fault(err error) { panic(faultSignal{err}) }

// live panics with an error wrapping ErrStale unless t is the thread
// running now: a *Thread kept after its kernel returned (or handed to
// another thread's kernel) must not touch memory. Inside a launch the
// panic fails that launch with a *KernelError; from the host it is a
// panic, as a send on a closed channel is.
func (t *Thread) live() {
	if t.state != stRunning {
		t.stale() // out of line: live is inlined into every verb
	}
}

// stale panics with the error of live.
//
//go:noinline
func (t *Thread) stale() {
	panic(fmt.Errorf("%w: %v, used at %s after its kernel returned or from another thread's kernel", ErrStale, &t.Agent, callsite.Site(2)))
}

// stepBefore ends the lane's step before a verb that reads what other
// warps write (an atomic), unless it is the first verb of the step. Under a
// timing backend a step's verbs take effect when the step runs but are
// timed one after another from the warp's clock; an atomic late in a long
// step would take effect before atomics of other warps that the timing puts
// earlier, and read their successors' values. As the first verb of a step it
// takes effect when the warp's clock has reached it, in time order with the
// other warps' (the engine runs the warp with the least clock first).
func (t *Thread) stepBefore() {
	if e := t.e; e.batch > 0 && t.budget < e.batch {
		t.budget = e.batch
		t.state = stRunnable
		t.suspend()
	}
}

// report hands the verb in e.op (and e.opData) to the backend if it wants
// verbs, counts it, and ends the step when a timing backend's batch is used
// up. Callers fill e.op only when e.ops is set.
func (t *Thread) report() {
	e := t.e
	e.res.Verbs++
	if e.cfg.ctx != nil && e.res.Verbs&1023 == 0 {
		// A thread that never waits would otherwise never return to the
		// scheduler, where the context is also checked.
		if err := e.cfg.ctx.Err(); err != nil {
			e.fail(e.cancelled(err))
			t.fault(err)
		}
	}
	switch {
	case e.queueOps:
		e.queueOp(t.Agent.Lane)
	case e.ops:
		var data []byte
		if e.op.HasData {
			data, e.opData = e.opData, nil
		}
		e.callOp(&t.Agent, &e.op, data)
		if e.dur != nil {
			switch {
			case e.dur.WaitDurable(&t.Agent, &e.callScratch):
				e.awaitDurable(t)
			case len(e.durWait) > 0:
				e.countDurable(t)
			}
		}
	}
	if e.batch > 0 {
		t.budget--
		if t.budget <= 0 {
			t.budget = e.batch
			t.state = stRunnable
			t.suspend()
		}
	}
}

// observe notes that t is about to read address a and parks it
// if it is spinning (see loadSpin): it then waits for a write to any word
// it has been polling.
func (t *Thread) observe(a pm.Addr, what string, sync bool) {
	t.live()
	e := t.e
	w := a // exact address: neighbouring flags share a word but are not rereads
	if e.wgen != t.rgen {
		t.rgen, t.rn, t.rhit, t.spins = e.wgen, 0, 0, 0
	}
	revisit := false
	for k, r := range t.rset[:t.rn] {
		if r == w {
			revisit = true
			t.rhit |= 1 << k
			break
		}
	}
	if !revisit {
		if int(t.rn) == len(t.rset) {
			t.rn, t.rhit, t.spins = 0, 0, 0 // a new word past a full set: progress
		}
		t.rset[t.rn] = w
		t.rn++
		return
	}
	t.spins++
	limit := 1
	if !sync {
		limit = loadSpin
	}
	if e.probing && e.wgen == e.probeGen {
		limit = syncProbe
		if !sync {
			limit = e.cfg.spinProbe
		}
	}
	if t.spins < limit {
		return
	}
	t.waitOp = what
	e.park(t)
}

// noteRead keeps the value t read last, for deadlock reports.
func (t *Thread) noteRead(v uint64) { t.lastVal = v }

// access returns the bytes of a verb's operand or faults the thread.
func (t *Thread) access(a pm.Addr, size, align uint64) ([]byte, space) {
	t.live()
	b, k, err := t.e.mem.Access(a, size, align)
	if err != nil {
		t.fault(err)
	}
	return b, space{PM: k == pm.PMem, Shared: k == pm.SharedMem}
}

// space is where a verb's operand lies: PM, a block's shared memory, or
// other volatile memory (neither).
type space struct{ PM, Shared bool }

func (t *Thread) load(a pm.Addr, size uint64) uint64 { return t.loadAs(a, size, false) }

// loadAs loads size bytes at a; gather marks it one of a group of
// independent loads (Gather32).
func (t *Thread) loadAs(a pm.Addr, size uint64, gather bool) uint64 {
	t.observe(a, "Load", false)
	b, sp := t.access(a, size, size)
	v := pm.GetLE(b)
	t.noteRead(v)
	if e := t.e; e.ops {
		e.op = verbRec{Kind: pm.OpLoad, Space: sp, Size: uint32(size), Addr: a, Gather: gather}
	}
	t.report()
	t.loaded(sp)
	return v
}

// Gather32 loads the 4-byte values at addrs into dst (len(dst) must equal
// len(addrs)) as independent loads: a timing backend issues them back to
// back and the thread waits for their data only at its next other verb,
// the memory-level parallelism a GPU's scoreboard gives loads whose
// addresses do not depend on each other's values (an unrolled loop over
// an array). Use it only where that holds: where one load's address or
// whether it happens depends on another's value, the loads are dependent
// and must be plain Load32 calls. Functionally it is len(addrs) Load32s.
func (t *Thread) Gather32(dst []uint32, addrs ...pm.Addr) {
	if len(dst) != len(addrs) {
		t.fault(fmt.Errorf("%w: Gather32 at %s of %d addresses into %d values", ErrBadArg, callerSite(), len(addrs), len(dst)))
	}
	for i, a := range addrs {
		dst[i] = uint32(t.loadAs(a, 4, true))
	}
}

// Gather64 is Gather32 for 8-byte values.
func (t *Thread) Gather64(dst []uint64, addrs ...pm.Addr) {
	if len(dst) != len(addrs) {
		t.fault(fmt.Errorf("%w: Gather64 at %s of %d addresses into %d values", ErrBadArg, callerSite(), len(addrs), len(dst)))
	}
	for i, a := range addrs {
		dst[i] = t.loadAs(a, 8, true)
	}
}

// Gather128 is Gather32 for 16-byte vectors (a CUDA uint4 or float4: one
// 16-byte load a lane), each 16-byte aligned: dst[i] holds the vector at
// addrs[i], its low 8 bytes first.
func (t *Thread) Gather128(dst [][2]uint64, addrs ...pm.Addr) {
	if len(dst) != len(addrs) {
		t.fault(fmt.Errorf("%w: Gather128 at %s of %d addresses into %d values", ErrBadArg, callerSite(), len(addrs), len(dst)))
	}
	for i, a := range addrs {
		t.observe(a, "Load", false)
		b, sp := t.access(a, 16, 16)
		dst[i] = [2]uint64{pm.GetLE(b[:8]), pm.GetLE(b[8:])}
		t.noteRead(dst[i][0])
		if e := t.e; e.ops {
			e.op = verbRec{Kind: pm.OpLoad, Space: sp, Size: 16, Addr: a, Gather: true, HasData: true}
			e.opData = b
		}
		t.report()
		t.loaded(sp)
	}
}

func (t *Thread) store(a pm.Addr, size, v uint64) {
	b, sp := t.access(a, size, size)
	pm.PutLE(b, v)
	e := t.e
	e.wrote(a, size)
	if e.ops {
		e.op = verbRec{Kind: pm.OpStore, Space: sp, Size: uint32(size), Addr: a, Value: v}
	}
	t.report()
}

// Load8 loads the byte at a.
func (t *Thread) Load8(a pm.Addr) uint8 { return uint8(t.load(a, 1)) }

// Load16 loads the 2-byte value at a, which must be 2-byte aligned.
func (t *Thread) Load16(a pm.Addr) uint16 { return uint16(t.load(a, 2)) }

// Load32 loads the 4-byte value at a, which must be 4-byte aligned.
func (t *Thread) Load32(a pm.Addr) uint32 { return uint32(t.load(a, 4)) }

// Load64 loads the 8-byte value at a, which must be 8-byte aligned.
func (t *Thread) Load64(a pm.Addr) uint64 { return t.load(a, 8) }

// Store8 stores the byte v at a. A store to PM is a persist.
func (t *Thread) Store8(a pm.Addr, v uint8) { t.store(a, 1, uint64(v)) }

// Store16 stores v at a, which must be 2-byte aligned.
func (t *Thread) Store16(a pm.Addr, v uint16) { t.store(a, 2, uint64(v)) }

// Store32 stores v at a, which must be 4-byte aligned.
func (t *Thread) Store32(a pm.Addr, v uint32) { t.store(a, 4, uint64(v)) }

// Store64 stores v at a, which must be 8-byte aligned. An aligned 8-byte
// store to PM persists atomically.
func (t *Thread) Store64(a pm.Addr, v uint64) { t.store(a, 8, v) }

// LoadBytes copies len(buf) bytes at a into buf.
func (t *Thread) LoadBytes(a pm.Addr, buf []byte) {
	b, sp := t.access(a, uint64(len(buf)), 1)
	copy(buf, b)
	if e := t.e; e.ops {
		e.op = verbRec{Kind: pm.OpLoad, Space: sp, Size: uint32(len(buf)), Addr: a, HasData: true}
		e.opData = buf
	}
	t.report()
	t.loaded(sp)
}

// StoreBytes copies data to a. A store to PM persists in aligned 8-byte
// words: a crash may keep some words and lose others.
func (t *Thread) StoreBytes(a pm.Addr, data []byte) {
	b, sp := t.access(a, uint64(len(data)), 1)
	copy(b, data)
	e := t.e
	e.wrote(a, uint64(len(data)))
	if e.ops {
		e.op = verbRec{Kind: pm.OpStore, Space: sp, Size: uint32(len(data)), Addr: a, HasData: true}
		e.opData = data
	}
	t.report()
}

var pacqNames = [...]string{"PAcq.thread", "PAcq.warp", "PAcq.block", "PAcq.device", "PAcq.system"}

// scopeOf validates the scope of verb k and applies the launch's site
// overrides.
func (t *Thread) scopeOf(k pm.OpKind, s Scope) Scope {
	if !s.Valid() {
		t.badScope(k, s)
	}
	if t.e.cfg.sites != nil {
		if o, ok := t.e.cfg.sites[callerSite()]; ok && o.Valid() {
			return o
		}
	}
	return s
}

// persistScopeOf is scopeOf for a persist release or acquire: a site
// override wins, else the launch's promotions apply.
func (t *Thread) persistScopeOf(k pm.OpKind, s Scope) Scope {
	if !s.Valid() {
		t.badScope(k, s)
	}
	if t.e.cfg.sites != nil {
		if o, ok := t.e.cfg.sites[callerSite()]; ok && o.Valid() {
			return o
		}
	}
	for _, p := range t.e.cfg.promote {
		s = p.Apply(k, s)
	}
	return s
}

// badScope stops the thread: verb k was given s, which is not a scope.
func (t *Thread) badScope(k pm.OpKind, s Scope) {
	t.live()
	t.fault(fmt.Errorf("%w: %v at %s: %v is not a scope (use %v, %v, %v, %v or %v)",
		ErrBadArg, k, callerSite(), s, pm.Thread, pm.Warp, pm.Block, pm.Device, pm.System))
}

// callerSite returns the site of the verb being issued: the first frame
// outside scopedpm's library (internal/callsite), the same name pm/record
// gives the verb.
func callerSite() string { return callsite.Site(1) }

// atomic applies f to the value at a as one indivisible step and returns the
// old value. f returns the new value and whether to write it.
func (t *Thread) atomic(a pm.Addr, size uint64, s Scope, f func(old uint64) (uint64, bool)) uint64 {
	s = t.scopeOf(pm.OpAtomic, s)
	t.stepBefore()
	b, sp := t.access(a, size, size)
	old := pm.GetLE(b)
	nv, write := f(old)
	t.noteRead(old)
	e := t.e
	if write {
		pm.PutLE(b, nv)
		e.wrote(a, size)
	}
	// An atomic that wrote made progress; one that did not (a failed CAS)
	// is a read, and rereading unchanged words is a spin. It is observed
	// after its effect, so a CAS that would succeed never waits.
	defer func() {
		if !write {
			t.observe(a, "atomic", true)
		}
	}()
	if e.ops {
		e.op = verbRec{Kind: pm.OpAtomic, Scope: s, Wrote: write, Space: sp, Size: uint32(size), Addr: a, Value: nv, Old: old}
	}
	t.report()
	return old
}

// AtomicAdd32 adds v to the 4-byte value at a, atomically within scope s,
// and returns the old value.
func (t *Thread) AtomicAdd32(a pm.Addr, v uint32, s Scope) uint32 {
	return uint32(t.atomic(a, 4, s, func(o uint64) (uint64, bool) { return uint64(uint32(o) + v), true }))
}

// AtomicAdd64 adds v to the 8-byte value at a and returns the old value.
func (t *Thread) AtomicAdd64(a pm.Addr, v uint64, s Scope) uint64 {
	return t.atomic(a, 8, s, func(o uint64) (uint64, bool) { return o + v, true })
}

// AtomicCAS32 stores nv at a if it holds old, and returns what it held.
func (t *Thread) AtomicCAS32(a pm.Addr, old, nv uint32, s Scope) uint32 {
	return uint32(t.atomic(a, 4, s, func(o uint64) (uint64, bool) { return uint64(nv), uint32(o) == old }))
}

// AtomicCAS64 stores nv at a if it holds old, and returns what it held.
func (t *Thread) AtomicCAS64(a pm.Addr, old, nv uint64, s Scope) uint64 {
	return t.atomic(a, 8, s, func(o uint64) (uint64, bool) { return nv, o == old })
}

// AtomicExch32 stores v at a and returns the old value.
func (t *Thread) AtomicExch32(a pm.Addr, v uint32, s Scope) uint32 {
	return uint32(t.atomic(a, 4, s, func(uint64) (uint64, bool) { return uint64(v), true }))
}

// AtomicExch64 stores v at a and returns the old value.
func (t *Thread) AtomicExch64(a pm.Addr, v uint64, s Scope) uint64 {
	return t.atomic(a, 8, s, func(uint64) (uint64, bool) { return v, true })
}

// verb reports a verb with no visible effect.
func (t *Thread) verb(k pm.OpKind, s Scope, v uint64) {
	t.live()
	e := t.e
	if e.ops {
		e.op = verbRec{Kind: k, Scope: s, Value: v}
	}
	t.report()
	t.endStepAt(k)
}

// endStepAt ends the step after a verb of kind k that the backend may
// block the warp at (pm.Waker), and after a load of PM when loads are
// among those verbs.
func (t *Thread) endStepAt(k pm.OpKind) {
	if e := t.e; e.endsStep&(1<<uint(k)) != 0 && t.budget < e.batch {
		t.budget = e.batch
		t.state = stRunnable
		t.suspend()
	}
}

// loaded ends the step after a load of PM when the backend asked
// (endStepAt).
func (t *Thread) loaded(sp space) {
	if sp.PM {
		t.endStepAt(pm.OpLoad)
	}
}

// Fence is a scoped memory fence: the thread's earlier loads and stores are
// visible to scope s before its later ones. It orders visibility, not
// persists.
func (t *Thread) Fence(s Scope) {
	s = t.scopeOf(pm.OpFence, s)
	t.verb(pm.OpFence, s, 0)
}

// OFence orders the thread's earlier persists before its later ones.
func (t *Thread) OFence() { t.verb(pm.OpOFence, pm.Thread, 0) }

// DFence returns when the thread's earlier persists are durable.
func (t *Thread) DFence() { t.verb(pm.OpDFence, pm.Thread, 0) }

// EpochBarrier is a system-scope persist barrier (GPM's gpm_persist): the
// thread's earlier persists are durable, and ordered before everything after.
func (t *Thread) EpochBarrier() { t.verb(pm.OpEpochBarrier, pm.System, 0) }

// Work charges cycles of computation the model cannot see: the cycles one
// of the SM's warp schedulers spends issuing the thread's warp's
// arithmetic. A timing backend holds a scheduler that long, so warps that
// share an SM beyond its schedulers take turns (hwmodel).
func (t *Thread) Work(cycles uint64) { t.verb(pm.OpWork, pm.Thread, cycles) }

// PRel is a scoped persist release: it sets the 4-byte flag at a to v, made
// visible to scope s after the thread's earlier persists. A PAcq of the flag
// with a scope covering both threads orders those persists before the
// acquirer's later ones.
func (t *Thread) PRel(flag pm.Addr, v uint32, s Scope) {
	s = t.persistScopeOf(pm.OpPRel, s)
	b, sp := t.access(flag, 4, 4)
	pm.PutLE(b, uint64(v))
	e := t.e
	e.wrote(flag, 4)
	if e.ops {
		e.op = verbRec{Kind: pm.OpPRel, Scope: s, Space: sp, Size: 4, Addr: flag, Value: uint64(v)}
	}
	t.report()
}

// PAcq is a scoped persist acquire: it returns the 4-byte flag at a as scope
// s sees it. Spin on it to wait for a PRel:
//
//	for t.PAcq(flag, pm.Device) == 0 {
//	}
//
// A spinning thread waits without burning host time; if no thread can ever
// write the flag, Launch fails with ErrDeadlock.
func (t *Thread) PAcq(flag pm.Addr, s Scope) uint32 {
	s = t.persistScopeOf(pm.OpPAcq, s)
	t.observe(flag, pacqNames[s], true)
	b, sp := t.access(flag, 4, 4)
	v := pm.GetLE(b)
	t.noteRead(v)
	if e := t.e; e.ops {
		e.op = verbRec{Kind: pm.OpPAcq, Scope: s, Space: sp, Size: 4, Addr: flag, Old: v}
	}
	t.report()
	return uint32(v)
}

// SyncThreads is the block execution barrier: it returns when every live
// thread of the block has reached a SyncThreads. Threads that have exited
// do not count.
func (t *Thread) SyncThreads() {
	t.waitOp = "SyncThreads"
	t.verb(pm.OpSyncThreads, pm.Block, 0)
	t.e.arrive(t, &t.blk.bar, t.blk.live)
}

// SyncWarp is the warp execution barrier (CUDA's __syncwarp): it returns
// when every live lane of the warp has reached a SyncWarp. Lanes that
// diverged (a branch, a spin that ended at different times) reconverge
// here, so their following verbs issue as full-warp instructions on a
// timing backend. It orders persists only under Strict, where every
// synchronization does.
func (t *Thread) SyncWarp() {
	t.waitOp = "SyncWarp"
	t.verb(pm.OpSyncWarp, pm.Warp, 0)
	t.e.arrive(t, &t.w.bar, t.w.live)
}

var pbarNames = [...]string{"PBarrier.thread", "PBarrier.warp", "PBarrier.block", "PBarrier.device", "PBarrier.system"}

// PBarrier is the scoped persist barrier of the scoped persist barrier paper (GPGPU 2018): persists of the
// members of scope s before it are ordered before their persists after it.
// Thread scope orders only the thread's own persists; warp and block scope
// are also execution barriers of the warp or block; device (and system)
// scope is a barrier of the whole grid. When the grid is larger than the GPU
// holds at once, blocks that wait at a device barrier are swapped out so the
// remaining blocks can start and reach it (emulated preemption); on a timing
// backend a block taking a freed slot starts when the block it replaces
// reached the barrier, so the grid runs in waves.
func (t *Thread) PBarrier(s Scope) {
	s = t.scopeOf(pm.OpPBarrier, s)
	t.waitOp = pbarNames[s]
	t.verb(pm.OpPBarrier, s, 0)
	e := t.e
	switch s {
	case pm.Thread:
	case pm.Warp:
		e.arrive(t, &t.w.bar, t.w.live)
	case pm.Block:
		e.arrive(t, &t.blk.bar, t.blk.live)
	default:
		e.arrive(t, &e.gridBar, e.live)
	}
}
