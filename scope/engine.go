package scope

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
)

// Kernel is the code every thread of a launch runs.
type Kernel func(t *Thread)

// Option configures a launch.
type Option func(*config)

type config struct {
	name      string
	spinProbe int
	durBound  int // WithDurabilityBound
	ctx       context.Context
	promote   []persistency.Promotion // applied to PRel and PAcq in order
	sites     map[string]Scope        // per call site overrides
	shared    int                     // bytes of shared memory per block
	err       error                   // the first bad option (ErrBadArg)
}

// bad records the first bad option.
func (c *config) bad(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrBadArg}, args...)...)
	}
}

// WithShared gives every block a zero-filled scratchpad of n bytes of
// shared memory (pm.SharedMem, CUDA's __shared__): Thread.Shared returns its
// address. It is mapped while the block is resident and gone after; its
// accesses are timed by the backend as any volatile access. A negative n
// makes Launch fail with ErrBadArg.
func WithShared(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.bad("WithShared(%d): a negative size", n)
			return
		}
		c.shared = n
	}
}

// WithPromotion makes the launch's persist releases and acquires (PRel,
// PAcq) that name scope from use scope to instead (persistency.Promotion):
// WithPromotion(pm.Block, pm.Device) runs a kernel "without scopes" (SBRP
// Figure 7). Barriers, fences and atomics keep their scopes. Options
// apply in order; it is an error (ErrBadArg) for to to be narrower than
// from, or for either not to be a scope.
func WithPromotion(from, to Scope) Option {
	return func(c *config) {
		if !from.Valid() || !to.Valid() {
			c.bad("WithPromotion(%v, %v): not a scope (have %v, %v, %v, %v, %v)", from, to, pm.Thread, pm.Warp, pm.Block, pm.Device, pm.System)
			return
		}
		c.promote = append(c.promote, persistency.Promotion{From: from, To: to})
	}
}

// WithContext lets ctx cancel the launch: the engine checks it between warp
// steps and returns ctx's error, wrapped, once it is done.
func WithContext(ctx context.Context) Option { return func(c *config) { c.ctx = ctx } }

// WithName names the launch in backend statistics and errors.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithSpinProbe sets how many plain-load rereads of the words a thread
// polls it may make, once nothing else can run and nothing is written, before
// the launch is declared deadlocked (default 256; see loadSpin in
// thread.go). Raise it for a kernel that legitimately rereads a few words
// more often than that with nothing written anywhere in between.
func WithSpinProbe(n int) Option { return func(c *config) { c.spinProbe = max(n, 1) } }

// WithDurabilityBound sets how many verbs the threads that can run may
// report, after a thread began to wait at a durability point of a backend
// with pm.Durability (the native backend's DFence, PRel, EpochBarrier),
// before the waiting threads are served with one MakeDurable, if no
// thread can run sooner; the running thread then yields. The default is
// pm.DurabilityBound (65,536; see there why); n < 1 means 1. Backends
// without pm.Durability, the simulated ones, ignore it.
func WithDurabilityBound(n int) Option { return func(c *config) { c.durBound = max(n, 1) } }

// WithSiteScopes overrides the scope of the verbs issued from given call
// sites, keyed as pm/record reports sites (internal/callsite: the first
// frame outside the library, module-relative, e.g.
// "workloads/reduction.go:226"). The scope advisor uses it to time a
// program with one site narrowed. It costs a stack walk per scoped verb.
func WithSiteScopes(sites map[string]Scope) Option {
	return func(c *config) { c.sites = sites }
}

// applyDefaults applies the machine's launch defaults (pm.LaunchDefaults)
// to c, as the options WithPromotion, WithSiteScopes and WithContext would.
func applyDefaults(c *config, d pm.LaunchDefaults) {
	for _, p := range d.Promote {
		WithPromotion(p.From, p.To)(c)
	}
	if d.SiteScopes != nil {
		WithSiteScopes(d.SiteScopes)(c)
	}
	if d.Context != nil {
		WithContext(d.Context)(c)
	}
}

// Result reports what a launch did.
type Result struct {
	Blocks, Threads int    // the grid
	Verbs           uint64 // thread-verbs executed
	Steps           uint64 // warp steps
	Switches        uint64 // coroutine resumes
	Coroutines      int    // coroutines used (about the peak of suspended threads)
	PeakResident    int    // peak resident threads
	Preempted       int    // blocks swapped out while waiting at a device barrier
	Probes          int    // rounds in which every parked thread was woken to probe for a deadlock
	Parks           uint64 // times a spinning thread parked
	Stats           pm.Stats
}

// KernelError is a fault or panic inside a kernel, with the thread that
// raised it.
type KernelError struct {
	Agent pm.Agent
	Err   error  // wraps ErrPanic, ErrFault (and the pm error), ErrBadArg or ErrStale
	Stack string // the goroutine stack at a panic
}

func (e *KernelError) Error() string { return fmt.Sprintf("%v: %v", &e.Agent, e.Err) }

// Unwrap returns the underlying error.
func (e *KernelError) Unwrap() error { return e.Err }

// Thread states.
const (
	stNew      uint8 = iota // not started
	stRunnable              // suspended, may run
	stRunning               // executing
	stBarrier               // waiting at a barrier
	stParked                // spinning: waits for a write to its word
	stDurable               // waits at a durability point (pm.Durability)
	stDone                  // finished
)

type worker struct {
	e     *engine // the launch it serves, while it serves one
	next  func() (*Thread, bool)
	stop  func()
	yield func(*Thread) bool
	queue []*Thread // threads to start, in order
}

type warp struct {
	id       int
	blk      *block
	lanes    []*Thread
	live     int
	ready    uint64
	queued   bool
	stepping bool
	blocked  bool // the backend's Step returned pm.Blocked: out of the queue until woken
	bar      barrier
}

type block struct {
	id, sm   int
	threads  []Thread
	warps    []warp
	live     int
	resident bool
	bar      barrier
	gridWait int     // threads of this block waiting at the device barrier
	swapping bool    // in engine.swapping
	aliveIdx int     // index in engine.alive
	shared   pm.Addr // its shared memory (WithShared), or 0
}

// verbRec is a verb as a thread reports it: a pm.Op without its Data (kept
// apart, in engine.opData or engine.qdata), so that copying one needs no
// garbage-collector write barriers.
type verbRec struct {
	Kind    pm.OpKind
	Scope   pm.Scope
	Wrote   bool
	WT      bool
	Gather  bool
	Space   space
	HasData bool
	Size    uint32
	Addr    pm.Addr
	Value   uint64
	Old     uint64
}

// queuedOp is a verb waiting to be handed to Backend.Op (engine.queueOps):
// lane is the reporting thread's lane in the warp being stepped.
type queuedOp struct {
	verb verbRec
	lane int32
	data int32 // where the verb's data starts in engine.qdata
}

// queuedCall is a backend call other than Op made while verbs were queued:
// it goes to the backend after the first pos queued verbs.
type queuedCall struct {
	pos   int
	kind  callKind
	group int    // Sync: where its group starts in engine.qgroup
	n     int    // Sync: the group's size
	warp  int    // Admit, Retire, Resume
	sm    int    // Admit, Resume
	at    uint64 // Admit, Resume
}

type callKind uint8

const (
	callSync callKind = iota
	callAdmit
	callRetire
	callResume
)

// barrier counts arrivals of the live members of a group.
type barrier struct {
	waiting []*Thread
}

type engine struct {
	mem    *pm.Memory
	be     pm.Backend
	ops    bool
	batch  int
	lim    pm.GPULimits
	grid   Grid
	kernel Kernel
	cfg    config

	warpsPerBlock int
	wgen          uint64 // writes so far; a spin parks only if none happened since its last read
	live          int    // threads not finished (including blocks not yet started)

	smThreads, smBlocks []int
	rr                  int
	nextBlock           int
	alive               []*block // started and not finished, in no order
	readmit             []*block // blocks swapped out, ready to come back
	swapping            []*block // blocks to swap out once the step is over
	blockPool           []*block
	finished            []*block
	residentThreads     int

	ready  warpHeap
	parked map[pm.Addr][]parkEntry // spinning threads by 8-byte word they poll
	nPark  int
	// parkFree holds emptied lists of parked, for reuse: a word's list is
	// dropped when a write wakes it, and spinning threads park again at
	// once.
	parkFree [][]parkEntry
	gridBar  barrier

	residency pm.Residency // the backend's, if it has one and is timed
	waker     pm.Waker     // the backend's, if it has one and is timed
	deferrer  pm.Deferrer  // the backend's, if it has one and is timed
	endsStep  uint64       // bit k: a verb of kind k ends its lane's step (pm.Waker)
	blocked   map[int]*warp
	// dur is the backend's pm.Durability, if it has one and takes verbs
	// unbatched: a thread whose verb is a durability point waits in
	// durWait until no thread can run, or until the other threads have
	// run the launch's durability bound (WithDurabilityBound) of verbs since the first of them began to wait, and one
	// MakeDurable call then serves every waiting thread (group commit).
	dur         pm.Durability
	durWait     []*Thread
	durVerbs    int        // verbs reported since the first thread in durWait began to wait
	durDue      bool       // durVerbs reached the bound: the scheduler calls makeDurable
	durRound    uint64     // durability points made due by the bound so far
	smFree      [][]uint64 // per SM, cycles at which block slots became free
	probing     bool
	probeGen    uint64
	op          verbRec // the verb being reported; one thread runs at a time
	opData      []byte  // op's data, if op.HasData
	callScratch pm.Op
	// With a timing backend the verbs are queued as they run and handed to
	// Backend.Op from the scheduler (flushOps), not from the simulated
	// thread's coroutine: the backend's work then runs on one warm stack
	// instead of on a cold thread stack per verb, and a thread's stack does
	// not depend on the backend's frame sizes. The backend calls a thread
	// makes besides Op (Sync when it opens a barrier, Retire when it ends
	// its warp, Admit when it lets blocks in) are queued among the verbs
	// too, so the backend sees the same calls in the same order; Step and
	// End flush the queue first.
	queueOps     bool
	stepW        *warp // the warp being stepped: the queued verbs are its lanes'
	qops         []queuedOp
	qdata        []byte       // the queued verbs' data
	qcalls       []queuedCall // Sync, Admit and Retire calls among the ops
	qgroup       []pm.Agent   // the queued Sync calls' groups, as they were
	qptrs        []*pm.Agent
	workers      []*worker
	free         []*worker
	sharedRanges []pm.Addr // shared memory mapped for blocks, unmapped at the end
	err          error
	res          Result
	syncGroup    []*pm.Agent
}

// Launch runs kernel k on every thread of grid g on machine m and returns
// when all threads have finished, or with the first error.
func Launch(m *pm.Machine, g Grid, k Kernel, opts ...Option) (Result, error) {
	switch {
	case m == nil:
		return Result{}, fmt.Errorf("%w: nil machine", ErrBadArg)
	case k == nil:
		return Result{}, fmt.Errorf("%w: nil kernel", ErrBadArg)
	}
	if err := m.Err(); err != nil {
		return Result{}, err
	}
	caps := m.Caps()
	e := &engine{mem: m.Memory(), be: m.Backend(), ops: caps.Ops, batch: caps.Batch, lim: caps.GPU, grid: g, kernel: k,
		cfg: config{name: "kernel", spinProbe: 256, durBound: pm.DurabilityBound}, parked: map[pm.Addr][]parkEntry{}}
	applyDefaults(&e.cfg, m.LaunchDefaults())
	for _, o := range opts {
		o(&e.cfg)
	}
	if e.cfg.err != nil {
		return Result{}, e.cfg.err
	}
	for _, p := range e.cfg.promote {
		if p.To < p.From {
			return Result{}, fmt.Errorf("%w: promotion of %v to narrower %v", ErrBadArg, p.From, p.To)
		}
	}
	if err := e.checkGeometry(); err != nil {
		return Result{}, err
	}
	if e.cfg.shared > 0 && uint64(e.cfg.shared) > pm.MaxRangeSize {
		return Result{}, fmt.Errorf("%w: %d bytes of shared memory", ErrGeometry, e.cfg.shared)
	}
	if l := e.lim.SharedPerSM; l > 0 && e.cfg.shared > l {
		return Result{}, fmt.Errorf("%w: %d bytes of shared memory per block, an SM holds %d", ErrGeometry, e.cfg.shared, l)
	}
	e.warpsPerBlock = (g.Threads + e.lim.WarpSize - 1) / e.lim.WarpSize
	e.live = g.Total()
	e.smThreads = make([]int, e.lim.SMs)
	e.smFree = make([][]uint64, e.lim.SMs)
	e.queueOps = e.ops && e.batch > 0
	if r, ok := pm.As[pm.Residency](e.be); ok && e.batch > 0 {
		e.residency = r
	}
	if d, ok := pm.As[pm.Deferrer](e.be); ok && e.batch > 0 {
		e.deferrer = d
	}
	if d, ok := pm.As[pm.Durability](e.be); ok && e.ops && !e.queueOps {
		e.dur = d
	}
	e.smBlocks = make([]int, e.lim.SMs)
	e.res.Blocks, e.res.Threads = g.Blocks, g.Threads
	if err := e.be.Begin(pm.Launch{Name: e.cfg.name, Blocks: g.Blocks, Threads: g.Threads}); err != nil {
		return Result{}, fmt.Errorf("%w: begin %s: %w", pm.ErrBackend, e.be.Name(), err)
	}
	if wk, ok := pm.As[pm.Waker](e.be); ok && e.batch > 0 {
		e.waker, e.blocked = wk, map[int]*warp{}
		for _, k := range wk.BeginWaking() {
			e.endsStep |= 1 << uint(k)
		}
	}
	runErr := e.run()
	e.flushOps()
	e.res.Coroutines = len(e.workers)
	e.shutdown()
	e.unmapShared()
	stats, err := e.be.End()
	e.res.Stats = stats
	if runErr != nil {
		return e.res, runErr
	}
	if err != nil {
		return e.res, fmt.Errorf("%w: end %s: %w", pm.ErrBackend, e.be.Name(), err)
	}
	return e.res, nil
}

func (e *engine) checkGeometry() error {
	l, g := e.lim, e.grid
	switch {
	case e.kernel == nil:
		return fmt.Errorf("%w: nil kernel", ErrGeometry)
	case l.SMs <= 0 || l.WarpSize <= 0 || l.MaxThreadsPerSM <= 0 || l.MaxBlocksPerSM <= 0 || l.MaxThreadsPerBlock <= 0:
		return fmt.Errorf("%w: backend reports GPU limits %+v", ErrGeometry, l)
	case g.Blocks <= 0 || g.Threads <= 0:
		return fmt.Errorf("%w: %d blocks of %d threads", ErrGeometry, g.Blocks, g.Threads)
	case g.Threads > l.MaxThreadsPerBlock:
		return fmt.Errorf("%w: %d threads per block, limit %d", ErrGeometry, g.Threads, l.MaxThreadsPerBlock)
	case g.Threads > l.MaxThreadsPerSM:
		return fmt.Errorf("%w: %d threads per block, an SM holds %d", ErrGeometry, g.Threads, l.MaxThreadsPerSM)
	case g.Blocks > (1<<31-1)/g.Threads:
		return fmt.Errorf("%w: %d blocks of %d threads overflow the thread ids", ErrGeometry, g.Blocks, g.Threads)
	}
	return nil
}

// run is the scheduler loop.
func (e *engine) run() error {
	e.admit()
	for e.err == nil {
		if len(e.blocked) > 0 {
			e.wakeBlocked()
		}
		if e.durDue {
			if err := e.makeDurable(); err != nil {
				return err
			}
		}
		w := e.ready.pop()
		if w == nil {
			if len(e.blocked) > 0 {
				continue // wakeBlocked wakes every one: no warp is ready
			}
			if e.live == 0 {
				return nil
			}
			if len(e.durWait) > 0 {
				if err := e.makeDurable(); err != nil {
					return err
				}
				continue
			}
			if e.probe() {
				continue
			}
			return e.deadlock()
		}
		e.step(w)
		e.retire()
		if e.cfg.ctx != nil && e.res.Steps%256 == 0 {
			if err := e.cfg.ctx.Err(); err != nil {
				return e.cancelled(err)
			}
		}
	}
	return e.err
}

// step runs each runnable lane of w until it suspends. While it runs, w is
// not queued: a barrier that a lane opens only marks its lanes runnable, and
// the warp is queued after the step with its new ready cycle.
func (e *engine) step(w *warp) {
	e.stepW = w
	w.stepping = true
	if e.deferrer != nil && e.deferrer.Untimed(w.id) {
		// The backend times the rest of w's last step first (pm.Deferrer).
		e.timed(w)
		return
	}
	e.res.Steps++
	lanes := w.lanes
	// With a timing backend, only the lanes runnable when the step starts
	// run in it: lanes a barrier releases during the step wait for the
	// next one, together, so that the warp's instructions stay full.
	var start uint64
	masked := e.batch > 0 && len(lanes) <= 64
	if masked {
		for i, t := range lanes {
			if t.state == stRunnable || t.state == stNew {
				start |= 1 << i
			}
		}
	}
	for i := 0; i < len(lanes) && e.err == nil; {
		t := lanes[i]
		if masked && start&(1<<i) == 0 {
			i++
			continue
		}
		switch t.state {
		case stNew:
			j := i + 1
			for j < len(lanes) && lanes[j].state == stNew {
				j++
			}
			wk := e.worker()
			wk.queue = lanes[i:j]
			e.drive(wk)
			i = j
		case stRunnable:
			e.drive(t.wk)
			i++
		default:
			i++
		}
	}
	if e.batch > 0 {
		e.flushOps()
		e.timed(w)
		return
	}
	w.stepping = false
	e.requeue(w)
}

// timed ends a step of w with the backend's Step and queues w again.
func (e *engine) timed(w *warp) {
	w.ready = e.be.Step(w.id)
	if w.ready == pm.Blocked && e.waker != nil {
		w.blocked = true
		e.blocked[w.id] = w
	}
	w.stepping = false
	e.requeue(w)
}

// requeue queues w if the backend has ops of it to time (pm.Deferrer) or
// one of its lanes can run.
func (e *engine) requeue(w *warp) {
	if e.deferrer != nil && e.deferrer.Untimed(w.id) {
		e.push(w)
		return
	}
	for _, t := range w.lanes {
		if t.state == stRunnable {
			e.push(w)
			break
		}
	}
}

// drive resumes wk until its thread suspends or its queue is empty. When a
// thread suspends it keeps wk; the rest of the queue moves to another worker.
func (e *engine) drive(wk *worker) {
	for {
		e.res.Switches++
		t, ok := wk.next()
		e.flushOps()
		if !ok {
			panic("scope: worker coroutine ended unexpectedly")
		}
		if t == nil {
			e.free = append(e.free, wk)
			return
		}
		if len(wk.queue) == 0 || e.err != nil {
			return
		}
		rest := wk.queue
		wk.queue = nil
		wk = e.worker()
		wk.queue = rest
	}
}

func (e *engine) worker() *worker {
	if n := len(e.free); n > 0 {
		wk := e.free[n-1]
		e.free = e.free[:n-1]
		return wk
	}
	wk := pool.get()
	if wk == nil {
		wk = newWorker()
	}
	wk.e = e
	e.workers = append(e.workers, wk)
	return wk
}

// newWorker starts a coroutine that runs the threads queued on it, one after
// another, and yields nil when its queue is empty.
func newWorker() *worker {
	wk := &worker{}
	wk.next, wk.stop = iter.Pull(func(yield func(*Thread) bool) {
		wk.yield = yield
		for {
			for len(wk.queue) > 0 && wk.e.err == nil {
				t := wk.queue[0]
				wk.queue = wk.queue[1:]
				if !wk.e.runThread(wk, t) {
					return
				}
			}
			wk.queue = nil
			if !yield(nil) {
				return
			}
		}
	})
	return wk
}

// pool keeps idle worker coroutines between launches, so that a run of many
// launches (an experiment sweep) does not start a goroutine per thread each
// time. It holds at most poolCap workers (about 3 KiB each): more than the
// resident threads of the largest preset GPU (volta, 80 SMs of 2,048), so
// a sweep reuses every coroutine instead of stopping the ones over the cap
// and starting new ones at the next launch, which cost more than keeping
// them (reduction and scan at paper scale on the SBRP machines: 24% less
// CPU than with a cap of 16,384, the same peak RSS, since the workers of a
// launch are alive while it runs anyway).
var pool workerPool

const poolCap = 1 << 18

type workerPool struct {
	mu   sync.Mutex
	free []*worker
}

func (p *workerPool) get() *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		wk := p.free[n-1]
		p.free = p.free[:n-1]
		return wk
	}
	return nil
}

// put keeps idle workers up to the cap and returns the ones it did not keep.
func (p *workerPool) put(ws []*worker) []*worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(ws), poolCap-len(p.free))
	for _, wk := range ws[:n] {
		wk.e = nil
		p.free = append(p.free, wk)
	}
	return ws[n:]
}

// abortSignal unwinds a suspended thread when the launch is torn down.
type abortSignal struct{}

// faultSignal carries a verb's error out of the kernel.
type faultSignal struct{ err error }

// runThread runs the kernel on t. It returns false if the launch is being
// torn down and the worker must exit.
func (e *engine) runThread(wk *worker, t *Thread) (ok bool) {
	ok = true
	defer func() {
		if r := recover(); r != nil {
			switch r := r.(type) {
			case abortSignal:
				ok = false
				return
			case faultSignal:
				if errors.Is(r.err, ErrBadArg) || errors.Is(r.err, ErrStale) {
					e.fail(&KernelError{Agent: t.Agent, Err: r.err}) // a misuse, not a memory fault
					break
				}
				e.fail(&KernelError{Agent: t.Agent, Err: fmt.Errorf("%w: %w", ErrFault, r.err)})
			case error:
				if errors.Is(r, ErrStale) {
					e.fail(&KernelError{Agent: t.Agent, Err: r})
					break
				}
				// Keep the chain: errors.Is(err, pkg.ErrX) holds for a
				// kernel that panicked with (a wrap of) pkg.ErrX.
				e.fail(&KernelError{Agent: t.Agent, Err: fmt.Errorf("%w: %w", ErrPanic, r), Stack: string(debug.Stack())})
			default:
				e.fail(&KernelError{Agent: t.Agent, Err: fmt.Errorf("%w: %v", ErrPanic, r), Stack: string(debug.Stack())})
			}
			t.state = stDone
		}
	}()
	t.wk = wk
	t.state = stRunning
	e.kernel(t)
	e.exit(t)
	return ok
}

// queueOp queues the verb in e.op of the stepped warp's lane for
// Backend.Op. It fills the queue's slot in place: a temporary would land on
// the thread's stack, which is cold whenever the thread was just resumed.
func (e *engine) queueOp(lane int) {
	e.qops = append(e.qops, queuedOp{})
	q := &e.qops[len(e.qops)-1]
	q.verb, q.lane = e.op, int32(lane)
	if e.op.HasData {
		// The kernel may reuse its buffer before the queue is flushed.
		q.data = int32(len(e.qdata))
		e.qdata = append(e.qdata, e.opData...)
		e.opData = nil
	}
}

// flushOps hands the queued verbs and calls to the backend, in the order
// they were made.
func (e *engine) flushOps() {
	if len(e.qops) == 0 && len(e.qcalls) == 0 {
		return
	}
	j := 0
	for i := range e.qops {
		for ; j < len(e.qcalls) && e.qcalls[j].pos == i; j++ {
			e.call(&e.qcalls[j])
		}
		q := &e.qops[i]
		var data []byte
		if q.verb.HasData {
			data = e.qdata[q.data : int(q.data)+int(q.verb.Size) : int(q.data)+int(q.verb.Size)]
		}
		e.callOp(&e.stepW.lanes[q.lane].Agent, &q.verb, data)
	}
	for ; j < len(e.qcalls); j++ {
		e.call(&e.qcalls[j])
	}
	e.qops, e.qdata, e.qcalls, e.qgroup = e.qops[:0], e.qdata[:0], e.qcalls[:0], e.qgroup[:0]
}

// callOp hands one verb to Backend.Op.
func (e *engine) callOp(a *pm.Agent, v *verbRec, data []byte) {
	o := &e.callScratch
	// Field by field: assigning a whole pm.Op copies it with a write
	// barrier for Data (a tenth of sbrp-fig6's verb handling, pprof).
	o.Kind, o.Scope, o.Wrote, o.WT, o.Gather = v.Kind, v.Scope, v.Wrote, v.WT, v.Gather
	o.PM, o.Shared, o.Size, o.Addr, o.Value, o.Old = v.Space.PM, v.Space.Shared, v.Size, v.Addr, v.Value, v.Old
	if data != nil || o.Data != nil {
		o.Data = data
	}
	e.be.Op(a, o)
	if o.Data != nil {
		o.Data = nil
	}
}

// call makes a queued backend call.
func (e *engine) call(c *queuedCall) {
	switch c.kind {
	case callSync:
		e.qptrs = e.qptrs[:0]
		for i := range e.qgroup[c.group : c.group+c.n] {
			e.qptrs = append(e.qptrs, &e.qgroup[c.group+i])
		}
		e.be.Sync(e.qptrs)
		clear(e.qptrs)
	case callAdmit:
		e.residency.Admit(c.warp, c.sm, c.at)
	case callRetire:
		e.residency.Retire(c.warp)
	case callResume:
		e.residency.Resume(c.warp, c.sm, c.at)
	}
}

// admitWarp tells the backend that warp w starts on sm at cycle at.
func (e *engine) admitWarp(w, sm int, at uint64) {
	if e.queueOps {
		e.qcalls = append(e.qcalls, queuedCall{pos: len(e.qops), kind: callAdmit, warp: w, sm: sm, at: at})
		return
	}
	e.residency.Admit(w, sm, at)
}

// resumeWarp tells the backend that warp w, swapped out at the device
// barrier, is back on SM sm, in a slot free from cycle at.
func (e *engine) resumeWarp(w, sm int, at uint64) {
	if e.queueOps {
		e.qcalls = append(e.qcalls, queuedCall{pos: len(e.qops), kind: callResume, warp: w, sm: sm, at: at})
		return
	}
	e.residency.Resume(w, sm, at)
}

// retireWarp tells the backend that warp w has ended.
func (e *engine) retireWarp(w int) {
	if e.queueOps {
		e.qcalls = append(e.qcalls, queuedCall{pos: len(e.qops), kind: callRetire, warp: w})
		return
	}
	e.residency.Retire(w)
}

// sync tells the backend that the agents of e.syncGroup passed a barrier.
func (e *engine) sync() {
	if e.queueOps {
		// The members' agents as they are now, when the barrier opened.
		e.qcalls = append(e.qcalls, queuedCall{pos: len(e.qops), kind: callSync, group: len(e.qgroup), n: len(e.syncGroup)})
		for _, a := range e.syncGroup {
			e.qgroup = append(e.qgroup, *a)
		}
		return
	}
	e.be.Sync(e.syncGroup)
}

func (e *engine) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// exit retires a finished thread and releases barriers it was holding up.
func (e *engine) exit(t *Thread) {
	t.state = stDone
	t.wk = nil
	w, b := t.w, t.blk
	w.live--
	if w.live == 0 && e.residency != nil {
		e.retireWarp(w.id)
	}
	b.live--
	e.live--
	e.residentThreads--
	if len(w.bar.waiting) > 0 {
		e.checkBarrier(&w.bar, w.live)
	}
	if len(b.bar.waiting) > 0 {
		e.checkBarrier(&b.bar, b.live)
	}
	if len(e.gridBar.waiting) > 0 {
		e.checkBarrier(&e.gridBar, e.live)
	}
	if b.live == 0 {
		e.finished = append(e.finished, b)
	} else if b.gridWait > 0 && b.gridWait == b.live {
		e.swapOut(b)
	}
}

// arrive makes t wait at bar until all live members of its group arrived;
// the last to arrive releases the others and goes on.
func (e *engine) arrive(t *Thread, bar *barrier, live int) {
	bar.waiting = append(bar.waiting, t)
	if e.checkBarrier(bar, live) {
		if e.batch > 0 {
			// The lanes reconverge: the last to arrive waits for the next
			// step too, so that all of them issue their next verbs
			// together (a timing backend groups a step's k-th verbs).
			t.state = stRunnable
			t.suspend()
		}
		return
	}
	t.state = stBarrier
	if bar == &e.gridBar {
		b := t.blk
		b.gridWait++
		if b.gridWait == b.live {
			e.swapOut(b)
		}
	}
	t.suspend()
}

// checkBarrier releases bar if every live member has arrived.
func (e *engine) checkBarrier(bar *barrier, live int) bool {
	if len(bar.waiting) == 0 || len(bar.waiting) < live {
		return false
	}
	if e.ops {
		e.syncGroup = e.syncGroup[:0]
		for _, t := range bar.waiting {
			e.syncGroup = append(e.syncGroup, &t.Agent)
		}
		e.sync()
	}
	grid := bar == &e.gridBar
	for _, t := range bar.waiting {
		if grid {
			t.blk.gridWait = 0
		}
		if e.batch > 0 {
			t.budget = e.batch // the members start the next step in step
		}
		if t.state == stBarrier {
			e.wake(t)
		}
	}
	bar.waiting = bar.waiting[:0]
	if grid {
		// Bring back the blocks swapped out at this barrier.
		e.admit()
	}
	return true
}

// wake makes a waiting thread runnable and queues its warp.

// awaitDurable suspends t, whose last verb is a durability point, until
// makeDurable has made it durable.
func (e *engine) awaitDurable(t *Thread) {
	t.state = stDurable
	if len(e.durWait) == 0 {
		e.durVerbs = 0
	}
	e.durWait = append(e.durWait, t)
	t.suspend()
}

// countDurable counts a verb of t, which does not wait, while threads wait
// at a durability point. At the bound (WithDurabilityBound) such verbs t yields, so that the
// scheduler serves the waiting threads; its warp then runs after the
// warps they are in (they may set what t is spinning on) and after every
// other warp that waited less.
func (e *engine) countDurable(t *Thread) {
	if e.durVerbs++; e.durVerbs < e.cfg.durBound {
		return
	}
	e.durDue = true
	e.durRound++
	t.w.ready = e.durRound
	t.state = stRunnable
	t.suspend()
}

// makeDurable runs when no thread can run and some wait at a durability
// point, or when the others have run the launch's durability bound (WithDurabilityBound) of verbs since the first
// began to wait: one MakeDurable call serves them all, and they go on. An
// error fails the launch, their verbs unreturned.
func (e *engine) makeDurable() error {
	e.durDue = false
	if len(e.durWait) == 0 {
		return nil
	}
	if err := e.dur.MakeDurable(); err != nil {
		return fmt.Errorf("%w: durability point of %s on %s: %w", pm.ErrBackend, e.cfg.name, e.be.Name(), err)
	}
	for _, t := range e.durWait {
		e.wake(t)
	}
	clear(e.durWait)
	e.durWait = e.durWait[:0]
	e.durVerbs = 0
	return nil
}

func (e *engine) wake(t *Thread) {
	t.state = stRunnable
	if t.blk.resident {
		e.push(t.w)
	}
}

// wakeBlocked asks the backend which blocked warps are ready by the cycle
// of the next warp to run (every one, when none can run) and queues them.
func (e *engine) wakeBlocked() {
	at := pm.Blocked
	if len(e.ready) > 0 {
		at = e.ready[0].ready
	}
	woken := e.waker.Wake(at)
	if at == pm.Blocked && len(woken) == 0 {
		e.fail(fmt.Errorf("%w: backend %s leaves %d warps blocked with none to run", pm.ErrBackend, e.be.Name(), len(e.blocked)))
		return
	}
	for _, r := range woken {
		w, ok := e.blocked[r.Warp]
		if !ok {
			panic(fmt.Sprintf("scope: backend woke warp %d, which is not blocked", r.Warp))
		}
		delete(e.blocked, r.Warp)
		w.blocked, w.ready = false, r.At
		e.requeue(w)
	}
}

func (e *engine) push(w *warp) {
	if !w.queued && !w.stepping && !w.blocked {
		w.queued = true
		e.ready.push(w)
	}
}

// parkEntry is a thread waiting on a word; seq tells a live entry from the
// stale ones a thread leaves on its other words when one of them wakes it.
type parkEntry struct {
	t   *Thread
	seq uint32
}

// park suspends t until some thread writes one of the words it has been
// polling (the words of t.rset it reread).
func (e *engine) park(t *Thread) {
	t.state = stParked
	t.parkSeq++
	e.res.Parks++
	first := true
	for k, a := range t.rset[:t.rn] {
		if t.rhit&(1<<k) != 0 {
			w := a &^ 7
			if first {
				t.parkAt, first = w, false
			}
			l, ok := e.parked[w]
			if n := len(e.parkFree); !ok && n > 0 {
				l, e.parkFree = e.parkFree[n-1], e.parkFree[:n-1]
			}
			e.parked[w] = append(l, parkEntry{t, t.parkSeq})
		}
	}
	e.nPark++
	t.suspend()
}

// wrote records a write of n bytes at a and wakes threads spinning there.
func (e *engine) wrote(a pm.Addr, n uint64) {
	e.wgen++
	if e.nPark != 0 {
		e.wakeWords(a, n)
	}
}

func (e *engine) wakeWords(a pm.Addr, n uint64) {
	for word := a &^ 7; word < a+pm.Addr(n); word += 8 {
		ts, ok := e.parked[word]
		if !ok {
			continue
		}
		delete(e.parked, word)
		for _, p := range ts {
			e.unpark(p)
		}
		clear(ts) // hold no threads
		e.parkFree = append(e.parkFree, ts[:0])
	}
}

// unpark wakes the thread of a live park entry.
func (e *engine) unpark(p parkEntry) {
	if t := p.t; t.state == stParked && t.parkSeq == p.seq {
		e.nPark--
		t.rn, t.rhit, t.spins = 0, 0, 0
		e.wake(t)
	}
}

// probe runs when no warp is ready but threads are parked on spins: it wakes
// them all once, with their spin counts reset, letting each reread its words
// up to the probe limits. If that round ends with no write anywhere, the
// launch is deadlocked.
func (e *engine) probe() bool {
	if e.nPark == 0 || (e.probing && e.wgen == e.probeGen) {
		return false
	}
	e.probing = true
	e.probeGen = e.wgen
	e.res.Probes++
	for _, t := range e.parkedThreads() {
		e.unpark(parkEntry{t, t.parkSeq})
	}
	clear(e.parked)
	e.nPark = 0
	return true
}

// parkedThreads returns the parked threads, each once, by id.
func (e *engine) parkedThreads() []*Thread {
	var ts []*Thread
	for _, l := range e.parked {
		for _, p := range l {
			if p.t.state == stParked && p.t.parkSeq == p.seq {
				ts = append(ts, p.t)
			}
		}
	}
	slices.SortFunc(ts, func(a, b *Thread) int { return a.Agent.ID - b.Agent.ID })
	return slices.CompactFunc(ts, func(a, b *Thread) bool { return a == b })
}

// deadlock builds the error naming blocked threads.
func (e *engine) deadlock() error {
	var blocked []*Thread
	for _, b := range e.alive {
		for i := range b.threads {
			if t := &b.threads[i]; t.state == stBarrier || t.state == stParked {
				blocked = append(blocked, t)
			}
		}
	}
	slices.SortFunc(blocked, func(a, b *Thread) int { return a.Agent.ID - b.Agent.ID })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d threads blocked", len(blocked))
	if e.nextBlock < e.grid.Blocks {
		fmt.Fprintf(&sb, ", %d blocks never started", e.grid.Blocks-e.nextBlock)
	}
	listThreads(&sb, blocked)
	return fmt.Errorf("%w: %s", ErrDeadlock, sb.String())
}

// listedThreads is how many threads an error describes one by one.
const listedThreads = 8

// listThreads appends to sb where each of the first listedThreads of ts
// is, and how many it left out.
func listThreads(sb *strings.Builder, ts []*Thread) {
	for i, t := range ts {
		if i == listedThreads {
			fmt.Fprintf(sb, "; and %d more not listed", len(ts)-i)
			break
		}
		fmt.Fprintf(sb, "; %v %s", &t.Agent, t.waitDesc())
	}
}

// cancelled returns the error of a launch its context stopped (cause is
// the context's error), saying where the live threads were: a spin that
// also writes is no deadlock, and this is where a user finds it.
func (e *engine) cancelled(cause error) error {
	var live []*Thread
	fresh := 0
	for _, b := range e.alive {
		for i := range b.threads {
			switch t := &b.threads[i]; t.state {
			case stDone:
			case stNew:
				fresh++
			default:
				live = append(live, t)
			}
		}
	}
	slices.SortFunc(live, func(a, b *Thread) int { return a.Agent.ID - b.Agent.ID })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d threads live", len(live)+fresh)
	if fresh > 0 {
		fmt.Fprintf(&sb, ", %d of them not started", fresh)
	}
	if e.nextBlock < e.grid.Blocks {
		fmt.Fprintf(&sb, ", %d blocks not started", e.grid.Blocks-e.nextBlock)
	}
	listThreads(&sb, live)
	return fmt.Errorf("scope: launch %s cancelled (%s): %w", e.cfg.name, sb.String(), cause)
}

func (t *Thread) waitDesc() string {
	switch t.state {
	case stParked:
		return fmt.Sprintf("spins on %s at %v (read %d)", t.waitOp, t.parkAt, t.lastVal)
	case stBarrier:
		return "waits at " + t.waitOp
	case stDurable:
		return "waits at a durability point"
	}
	// Running or runnable: what it read last between writes anywhere
	// (the flags a spin that also writes polls).
	if t.rn > 0 {
		var read []string
		for _, a := range t.rset[:t.rn] {
			read = append(read, a.String())
		}
		return fmt.Sprintf("runs, reading %s (read %d last)", strings.Join(read, ", "), t.lastVal)
	}
	return "runs"
}

// admit makes blocks resident while some SM has room: swapped-out blocks
// whose barrier has opened first (on their own SM if it has room, else on
// the next that has), then new ones in block order.
func (e *engine) admit() {
	for i := 0; i < len(e.readmit); {
		b := e.readmit[i]
		if b.gridWait > 0 {
			i++ // still waiting at the device barrier
			continue
		}
		sm := b.sm
		if !e.roomOn(sm) {
			var ok bool
			if sm, ok = e.room(); !ok {
				return
			}
		}
		e.readmit = slices.Delete(e.readmit, i, i+1)
		e.place(b, sm)
		if e.residency != nil {
			// Its warps go on from the barrier, but not before the slot
			// they take was free.
			at := e.slotFree(sm)
			for i := range b.warps {
				b.warps[i].ready = max(b.warps[i].ready, at)
				e.resumeWarp(b.warps[i].id, sm, at)
			}
		}
		for i := range b.warps {
			w := &b.warps[i]
			for _, t := range w.lanes {
				if t.state == stRunnable {
					e.push(w)
					break
				}
			}
		}
	}
	for e.nextBlock < e.grid.Blocks {
		sm, ok := e.room()
		if !ok {
			return
		}
		b := e.newBlock(e.nextBlock, sm)
		e.nextBlock++
		b.aliveIdx = len(e.alive)
		e.alive = append(e.alive, b)
		e.place(b, sm)
		if e.residency != nil {
			at := e.slotFree(sm)
			for i := range b.warps {
				b.warps[i].ready = at
				e.admitWarp(b.warps[i].id, sm, at)
			}
		}
		for i := range b.warps {
			e.push(&b.warps[i])
		}
	}
}

// room returns the next SM, round robin, that can take one more block.
func (e *engine) room() (int, bool) {
	n := e.lim.SMs
	for k := range n {
		sm := (e.rr + k) % n
		if e.roomOn(sm) {
			e.rr = (sm + 1) % n
			return sm, true
		}
	}
	return 0, false
}

// roomOn reports whether SM sm can take one more block.
func (e *engine) roomOn(sm int) bool {
	return e.smThreads[sm]+e.grid.Threads <= e.lim.MaxThreadsPerSM && e.smBlocks[sm] < e.lim.MaxBlocksPerSM && e.sharedFits(sm)
}

// sharedFits reports whether SM sm has shared memory for one more block
// (pm.GPULimits.SharedPerSM): every block of a launch holds the same.
func (e *engine) sharedFits(sm int) bool {
	return e.lim.SharedPerSM <= 0 || (e.smBlocks[sm]+1)*e.cfg.shared <= e.lim.SharedPerSM
}

func (e *engine) place(b *block, sm int) {
	b.sm, b.resident = sm, true
	e.smThreads[sm] += e.grid.Threads
	e.smBlocks[sm]++
	for i := range b.threads {
		b.threads[i].Unit = sm
	}
	e.residentThreads += b.live
	e.res.PeakResident = max(e.res.PeakResident, e.residentThreads)
}

func (e *engine) unplace(b *block) {
	b.resident = false
	e.smThreads[b.sm] -= e.grid.Threads
	e.smBlocks[b.sm]--
	e.residentThreads -= b.live
}

// swapOut frees the SM slot of a block whose live threads all wait at the
// device barrier (emulated preemption), so blocks not yet started can run
// and reach the barrier too, as the next wave of a kernel that ends at the
// barrier would. The slot frees once the step that brought the block to
// the barrier is over (retire): a block that takes it starts when this
// one arrived, not before.
func (e *engine) swapOut(b *block) {
	if !b.resident || b.swapping {
		return
	}
	b.swapping = true
	e.swapping = append(e.swapping, b)
}

// swapOutNow frees the slots of the blocks swapOut marked that still wait
// at the device barrier, and notes each slot free from the block's
// arrival (its warps' latest ready cycle).
func (e *engine) swapOutNow() {
	for _, b := range e.swapping {
		b.swapping = false
		if !b.resident || b.gridWait == 0 || b.gridWait != b.live || e.nextBlock == e.grid.Blocks && !e.waitingReadmit() {
			continue // released, or nothing is waiting for its slot
		}
		e.unplace(b)
		e.res.Preempted++
		e.readmit = append(e.readmit, b)
		if e.residency != nil {
			var at uint64
			for i := range b.warps {
				at = max(at, b.warps[i].ready)
			}
			e.smFree[b.sm] = append(e.smFree[b.sm], at)
		}
	}
	e.swapping = e.swapping[:0]
}

// slotFree takes the earliest cycle at which a block slot of sm became free
// (0 if none was recorded: the first wave).
func (e *engine) slotFree(sm int) uint64 {
	f := e.smFree[sm]
	if len(f) == 0 {
		return 0
	}
	i := 0
	for j := range f {
		if f[j] < f[i] {
			i = j
		}
	}
	at := f[i]
	e.smFree[sm] = append(f[:i], f[i+1:]...)
	return at
}

// waitingReadmit reports whether a swapped-out block is ready to come back.
func (e *engine) waitingReadmit() bool {
	for _, b := range e.readmit {
		if b.gridWait == 0 {
			return true
		}
	}
	return false
}

// retire frees the slots of finished blocks and of blocks swapped out at
// the device barrier, and admits new ones.
func (e *engine) retire() {
	if len(e.finished) == 0 && len(e.swapping) == 0 {
		return
	}
	e.swapOutNow()
	kept := e.finished[:0]
	for _, b := range e.finished {
		if e.untimedBlock(b) {
			// Its last instructions are still to be timed: its slot is
			// free only from their end.
			kept = append(kept, b)
			continue
		}
		if e.residency != nil {
			var done uint64
			for i := range b.warps {
				done = max(done, b.warps[i].ready)
			}
			e.smFree[b.sm] = append(e.smFree[b.sm], done)
		}
		e.unplace(b)
		last := e.alive[len(e.alive)-1]
		e.alive[b.aliveIdx], last.aliveIdx = last, b.aliveIdx
		e.alive = e.alive[:len(e.alive)-1]
		e.blockPool = append(e.blockPool, b)
	}
	e.finished = kept
	e.admit()
}

// untimedBlock reports whether a warp of b has ops the backend has not
// timed yet (pm.Deferrer).
func (e *engine) untimedBlock(b *block) bool {
	if e.deferrer == nil {
		return false
	}
	for i := range b.warps {
		if e.deferrer.Untimed(b.warps[i].id) {
			return true
		}
	}
	return false
}

func (e *engine) newBlock(id, sm int) *block {
	var b *block
	if n := len(e.blockPool); n > 0 {
		b = e.blockPool[n-1]
		e.blockPool = e.blockPool[:n-1]
	} else {
		b = &block{threads: make([]Thread, e.grid.Threads), warps: make([]warp, e.warpsPerBlock)}
		for i := range b.warps {
			lo := i * e.lim.WarpSize
			hi := min(lo+e.lim.WarpSize, e.grid.Threads)
			b.warps[i].lanes = make([]*Thread, hi-lo)
			for j := range hi - lo {
				b.warps[i].lanes[j] = &b.threads[lo+j]
			}
		}
	}
	b.id, b.sm, b.live, b.gridWait = id, sm, e.grid.Threads, 0
	if n := uint64(e.cfg.shared); n > 0 {
		if b.shared == 0 {
			a, err := e.mem.MapShared(n)
			if err != nil {
				e.fail(fmt.Errorf("%w: shared memory for block %d: %w", ErrGeometry, id, err))
			}
			b.shared = a
			e.sharedRanges = append(e.sharedRanges, a)
		} else if buf, _, err := e.mem.Bytes(b.shared, n, 1); err == nil {
			clear(buf) // a new block finds its shared memory zeroed
		}
	}
	for i := range b.warps {
		w := &b.warps[i]
		w.id = id*e.warpsPerBlock + i
		w.blk, w.live, w.ready, w.queued = b, len(w.lanes), 0, false
	}
	for i := range b.threads {
		t := &b.threads[i]
		wi := i / e.lim.WarpSize
		*t = Thread{
			Agent: pm.Agent{Kind: pm.GPUThread, ID: id*e.grid.Threads + i, Block: id, Warp: id*e.warpsPerBlock + wi, Lane: i % e.lim.WarpSize, Unit: sm},
			e:     e, blk: b, w: &b.warps[wi], tib: i, budget: e.batch,
		}
	}
	return b
}

// unmapShared unmaps the blocks' shared memory.
func (e *engine) unmapShared() {
	for _, a := range e.sharedRanges {
		_ = e.mem.UnmapShared(a) // mapped by newBlock: cannot fail
	}
	e.sharedRanges = nil
}

// shutdown stops every worker; suspended threads unwind.
// Idle workers go back to the pool; the pool's overflow and workers whose
// threads are still suspended (after an error) are stopped.
func (e *engine) shutdown() {
	idle := map[*worker]bool{}
	for _, wk := range e.free {
		idle[wk] = true
	}
	var busy []*worker
	for _, wk := range e.workers {
		if !idle[wk] {
			busy = append(busy, wk)
		}
	}
	for _, wk := range append(busy, pool.put(e.free)...) {
		wk.stop()
	}
	e.free, e.workers = nil, nil
}

// warpHeap orders warps by (ready, id).
type warpHeap []*warp

func (h warpHeap) less(i, j int) bool {
	if h[i].ready != h[j].ready {
		return h[i].ready < h[j].ready
	}
	return h[i].id < h[j].id
}

func (h *warpHeap) push(w *warp) {
	*h = append(*h, w)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *warpHeap) pop() *warp {
	s := *h
	if len(s) == 0 {
		return nil
	}
	w := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = nil
	s = s[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	w.queued = false
	return w
}
