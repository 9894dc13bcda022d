// Package coro runs CPU tasks as coroutines on one simulated core of a
// pm.Machine, in the style of COSPlay: a task runs until it calls
// Yield, then the next live task runs, round robin, deterministically. Tasks
// issue the CPU verbs (Load/Store, CLWB, SFence, SetCtx, CFence, Work) that
// the machine's backend times and makes durable.
package coro

import (
	"errors"
	"fmt"
	"iter"
	"runtime/debug"

	"github.com/scopedpm/scopedpm/pm"
)

// Sentinel errors of package coro.
var (
	// ErrDeadlock: the live tasks can make no progress.
	ErrDeadlock = errors.New("coro: deadlock")
	// ErrPanic: a task panicked.
	ErrPanic = errors.New("coro: task panicked")
	// ErrFault: a task made a bad access (see the wrapped pm error).
	ErrFault = errors.New("coro: memory fault")
	// ErrBadArg: bad arguments to Run.
	ErrBadArg = errors.New("coro: bad argument")
)

// Task is the code of one CPU task.
type Task func(c *Ctx)

// Option configures Run.
type Option func(*config)

type config struct {
	core       int
	name       string
	idleRounds int
}

// OnCore runs the tasks on core n (default 0); it becomes Agent.Unit.
func OnCore(n int) Option { return func(c *config) { c.core = n } }

// WithName names the run in backend statistics.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithIdleRounds sets how many consecutive rounds in which every live task
// yields and nothing is written make Run give up with ErrDeadlock (default
// 4096).
func WithIdleRounds(n int) Option { return func(c *config) { c.idleRounds = max(n, 1) } }

// Result reports what a run did.
type Result struct {
	Tasks  int
	Verbs  uint64 // task-verbs executed
	Yields uint64
	Stats  pm.Stats
}

// TaskError is a fault or panic inside a task.
type TaskError struct {
	Agent pm.Agent
	Err   error
	Stack string
}

func (e *TaskError) Error() string { return fmt.Sprintf("%v: %v", &e.Agent, e.Err) }

// Unwrap returns the underlying error.
func (e *TaskError) Unwrap() error { return e.Err }

type runner struct {
	mem  *pm.Memory
	be   pm.Backend
	ops  bool
	cfg  config
	wgen uint64
	op   pm.Op
	err  error
	res  Result
}

// Ctx is a task's handle; its methods are the CPU verbs. It is valid only
// inside its task.
type Ctx struct {
	pm.Agent
	r        *runner
	yield    func(struct{}) bool
	done     bool
	lastRead pm.Addr
	lastGen  uint64
	spins    int
	lastOp   pm.OpKind
}

// Spin limits: a task that rereads one address this many times with nothing
// written in between, without yielding, can never see it change (it has the
// core to itself), so it is deadlocked.
const (
	syncSpin = 1 << 10
	loadSpin = 1 << 20
)

type abortSignal struct{}
type faultSignal struct{ err error }

// Run runs tasks on one core of m until all finish, or until the first
// error. Task i has Agent.ID i.
func Run(m *pm.Machine, tasks []Task, opts ...Option) (Result, error) {
	if m == nil {
		return Result{}, fmt.Errorf("%w: nil machine", ErrBadArg)
	}
	if err := m.Err(); err != nil {
		return Result{}, err
	}
	if len(tasks) == 0 {
		return Result{}, fmt.Errorf("%w: no tasks", ErrBadArg)
	}
	r := &runner{mem: m.Memory(), be: m.Backend(), ops: m.Caps().Ops, cfg: config{name: "cpu", idleRounds: 4096}}
	for _, o := range opts {
		o(&r.cfg)
	}
	for i, t := range tasks {
		if t == nil {
			return Result{}, fmt.Errorf("%w: task %d is nil", ErrBadArg, i)
		}
	}
	r.res.Tasks = len(tasks)
	if err := r.be.Begin(pm.Launch{Name: r.cfg.name, Threads: len(tasks)}); err != nil {
		return Result{}, fmt.Errorf("%w: begin %s: %w", pm.ErrBackend, r.be.Name(), err)
	}
	ctxs := make([]*Ctx, len(tasks))
	nexts := make([]func() (struct{}, bool), len(tasks))
	stops := make([]func(), len(tasks))
	for i, task := range tasks {
		c := &Ctx{Agent: pm.Agent{Kind: pm.CPUTask, ID: i, Unit: r.cfg.core}, r: r}
		ctxs[i] = c
		nexts[i], stops[i] = iter.Pull(func(yield func(struct{}) bool) {
			c.yield = yield
			r.runTask(c, task)
		})
	}
	runErr := r.schedule(ctxs, nexts)
	for _, stop := range stops {
		stop()
	}
	stats, err := r.be.End()
	r.res.Stats = stats
	if runErr != nil {
		return r.res, runErr
	}
	if err != nil {
		return r.res, fmt.Errorf("%w: end %s: %w", pm.ErrBackend, r.be.Name(), err)
	}
	return r.res, nil
}

func (r *runner) schedule(ctxs []*Ctx, nexts []func() (struct{}, bool)) error {
	live, idle := len(ctxs), 0
	for live > 0 && r.err == nil {
		gen, finished := r.wgen, 0
		for i, c := range ctxs {
			if c.done {
				continue
			}
			nexts[i]()
			if c.done {
				finished++
			}
			if r.err != nil {
				return r.err
			}
		}
		live -= finished
		if finished == 0 && gen == r.wgen && live > 0 {
			idle++
			if idle >= r.cfg.idleRounds {
				return r.deadlock(ctxs)
			}
		} else {
			idle = 0
		}
	}
	return r.err
}

func (r *runner) deadlock(ctxs []*Ctx) error {
	msg := ""
	for _, c := range ctxs {
		if !c.done {
			msg += fmt.Sprintf("; %v yields after %s", &c.Agent, c.lastOp)
		}
	}
	return fmt.Errorf("%w: %d rounds with nothing written%s", ErrDeadlock, r.cfg.idleRounds, msg)
}

func (r *runner) runTask(c *Ctx, task Task) {
	defer func() {
		if p := recover(); p != nil {
			switch p := p.(type) {
			case abortSignal:
			case faultSignal:
				r.fail(&TaskError{Agent: c.Agent, Err: fmt.Errorf("%w: %w", ErrFault, p.err)})
			case error:
				r.fail(&TaskError{Agent: c.Agent, Err: fmt.Errorf("%w: %w", ErrPanic, p), Stack: string(debug.Stack())})
			default:
				r.fail(&TaskError{Agent: c.Agent, Err: fmt.Errorf("%w: %v", ErrPanic, p), Stack: string(debug.Stack())})
			}
		}
		c.done = true
	}()
	task(c)
}

func (r *runner) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// ID returns the task id.
func (c *Ctx) ID() int { return c.Agent.ID }

func (c *Ctx) report() {
	r := c.r
	r.res.Verbs++
	c.lastOp = r.op.Kind
	if r.ops {
		r.be.Op(&c.Agent, &r.op)
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
	if a != c.lastRead || c.r.wgen != c.lastGen {
		c.spins = 0
		c.lastRead, c.lastGen = a, c.r.wgen
		return
	}
	c.spins++
	if c.spins >= limit {
		c.r.fail(fmt.Errorf("%w: %v spins on %v without yielding", ErrDeadlock, &c.Agent, a))
		panic(abortSignal{})
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
	c.r.wgen++
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
	c.r.wgen++
	c.r.op = pm.Op{Kind: pm.OpStore, PM: persistent, Size: uint32(len(data)), Addr: a, Data: data}
	c.report()
}

// CAS64 stores nv at a if it holds old and returns what it held: a try-lock
// is CAS64(lock, 0, 1) == 0.
func (c *Ctx) CAS64(a pm.Addr, old, nv uint64) uint64 {
	c.observe(a, syncSpin)
	b, persistent := c.access(a, 8, 8)
	cur := pm.GetLE(b)
	wrote := cur == old
	if wrote {
		pm.PutLE(b, nv)
		c.r.wgen++
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
	c.r.wgen++
	c.r.op = pm.Op{Kind: pm.OpAtomic, Scope: pm.System, Wrote: true, PM: persistent, Size: 8, Addr: a, Value: cur + v, Old: cur}
	c.report()
	return cur
}

func (c *Ctx) verb(k pm.OpKind, a pm.Addr, v uint64) {
	c.r.op = pm.Op{Kind: k, Scope: pm.Thread, Addr: a, Value: v}
	c.report()
}

// CLWB writes back the cache line holding a toward the persistence point.
func (c *Ctx) CLWB(a pm.Addr) {
	c.access(a, 1, 1)
	c.verb(pm.OpCLWB, a, 0)
}

// SFence orders: the task's earlier CLWBs complete before its later stores.
func (c *Ctx) SFence() { c.verb(pm.OpSFence, 0, 0) }

// SetCtx makes later stores of the task belong to persist context cid
// (COSPlay's setctx).
func (c *Ctx) SetCtx(cid uint64) { c.verb(pm.OpSetCtx, 0, cid) }

// CFence orders the persists of context cid only (COSPlay's cfence).
func (c *Ctx) CFence(cid uint64) { c.verb(pm.OpCFence, 0, cid) }

// Work charges cycles of computation the model cannot see.
func (c *Ctx) Work(cycles uint64) { c.verb(pm.OpWork, 0, cycles) }

// Yield gives the core to the next live task; it returns when this task's
// turn comes again.
func (c *Ctx) Yield() {
	c.r.res.Yields++
	c.verb(pm.OpYield, 0, 0)
	c.spins = 0
	c.lastRead = 0
	if !c.yield(struct{}{}) {
		panic(abortSignal{})
	}
}
