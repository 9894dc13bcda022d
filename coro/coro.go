// Package coro runs CPU tasks as coroutines on one simulated core of a
// pm.Machine, the software interface of COSPlay (§4.2, Figure 4): a window
// of N task contexts is active at once and runs round robin, switching
// when a task yields; when a task ends, the next task is spawned into its
// context. Tasks issue the CPU verbs (Load/Store, CLWB, SFence, SetCtx,
// CFence, the StrandWeaver verbs, Work) that the machine's backend times
// and makes durable, and mark their ordering points with Fence and Join;
// the run's Config (Baseline, Unordered, COSPlay, SBatch, StrandWeaver,
// FreeSwitch) decides what those issue, so one task code runs under every
// configuration. Everything is deterministic: the same tasks and inputs
// give the same verbs, switches and per-task latencies.
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
	durBound   int // WithDurabilityBound
	run        Config
}

// OnCore runs the tasks on core n (default 0); it becomes Agent.Unit.
func OnCore(n int) Option { return func(c *config) { c.core = n } }

// WithName names the run in backend statistics.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithIdleRounds sets how many consecutive rounds in which every live task
// yields and nothing is written make Run give up with ErrDeadlock (default
// 4096).
func WithIdleRounds(n int) Option { return func(c *config) { c.idleRounds = max(n, 1) } }

// WithDurabilityBound sets how many verbs the tasks that run may report,
// after a task began to wait at a durability point of a backend with
// pm.Durability (the native backend's SFence, CFence, JoinStrand), before
// the waiting tasks are made durable with one MakeDurable, if they are not
// sooner (every live task held, or a round with nothing written). The
// default is pm.DurabilityBound (65,536; see there why); n < 1 means 1.
// Backends without pm.Durability, the simulated ones, ignore it.
func WithDurabilityBound(n int) Option { return func(c *config) { c.durBound = max(n, 1) } }

// Latency is one task's start and end: in backend cycles when the backend
// has a clock (a Now method), else in verbs executed by the run so far
// (see Result.Clock).
type Latency struct {
	Start, End uint64
}

// Duration returns End - Start.
func (l Latency) Duration() uint64 { return l.End - l.Start }

// Result reports what a run did.
type Result struct {
	Tasks    int
	Verbs    uint64 // task-verbs executed
	Yields   uint64 // Yield calls, including those of ordering points
	Switches uint64 // coroutine switches: yields and task ends that gave the core to another context
	CLWBs    uint64
	// Fences counts the persist fences issued: SFence, CFence,
	// PersistBarrier and JoinStrand.
	Fences uint64
	// Works counts the Work verbs and WorkCycles the cycles they charged.
	Works, WorkCycles uint64
	// Latency holds each task's start and end, indexed by task id.
	Latency []Latency
	// Clock says what Latency counts: "cycles" or "verbs".
	Clock string
	Stats pm.Stats
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

// clock is what a timing backend offers for latencies.
type clock interface{ Now() uint64 }

// slot is one context of the window: a coroutine that runs its tasks one
// after another.
type slot struct {
	id   int
	next func() (struct{}, bool)
	stop func()
	cur  *Ctx // the task running in the slot
	done bool
}

type runner struct {
	mem      *pm.Memory
	be       pm.Backend
	ops      bool
	cfg      config
	mode     Mode
	switchCy uint64
	clock    clock
	dur      pm.Durability // the backend's, if it has one: see Ctx.awaitDurable
	// held are the tasks waiting at a durability point, in the order they
	// reached it; heldVerbs counts the verbs reported since the first.
	held      []*Ctx
	heldVerbs int
	shared    bool  // the verb being issued is SBatch's shared SFence
	p         *pool // what the run's cores share
	slots     []*slot
	live      int // slots with a task to run
	soloIdle  int // consecutive solo yields with nothing written
	// coreCtx is the core's context register (the last SetCtx).
	coreCtx uint64
	// batch counts the SFences SBatch's scheduler issued.
	batch   uint64
	strands uint64
	op      pm.Op
}

// pool is what the cores of a run share: the tasks, spawned in order
// into whichever core's context frees first, the write generation, the
// first error and the result.
type pool struct {
	tasks             []Task
	cores             int
	spawned, finished int
	wgen              uint64
	err               error
	res               Result
}

type abortSignal struct{}
type faultSignal struct{ err error }

// Run runs tasks on one core of m until all finish, or until the first
// error. Task i has Agent.ID i. Without WithConfig every task is active
// at once and an ordering point is an SFence (Baseline).
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
	r := &runner{mem: m.Memory(), be: m.Backend(), ops: m.Caps().Ops, cfg: config{name: "cpu", idleRounds: 4096, durBound: pm.DurabilityBound}, p: &pool{tasks: tasks}}
	for _, o := range opts {
		o(&r.cfg)
	}
	if err := r.cfg.run.Validate(); err != nil {
		return Result{}, err
	}
	for i, t := range tasks {
		if t == nil {
			return Result{}, fmt.Errorf("%w: task %d is nil", ErrBadArg, i)
		}
	}
	p := r.p
	p.cores = max(r.cfg.run.Cores, 1)
	r.mode, r.switchCy = r.cfg.run.Mode, r.cfg.run.Switch()
	p.res.Tasks, p.res.Clock = len(tasks), "verbs"
	p.res.Latency = make([]Latency, len(tasks))
	if c, ok := pm.As[clock](r.be); ok {
		r.clock, p.res.Clock = c, "cycles"
	}
	if d, ok := pm.As[pm.Durability](r.be); ok && r.ops {
		if p.cores > 1 {
			return Result{}, fmt.Errorf("%w: %d cores on backend %s, whose durability points hold tasks (one core only)", ErrBadArg, p.cores, r.be.Name())
		}
		r.dur = d
	}
	if err := r.be.Begin(pm.Launch{Name: r.cfg.name, Threads: len(tasks), CPU: r.cfg.run.launch()}); err != nil {
		return Result{}, fmt.Errorf("%w: begin %s: %w", pm.ErrBackend, r.be.Name(), err)
	}
	w := r.cfg.run.Window
	if w == 0 || w > len(tasks) {
		w = len(tasks)
	}
	// One runner per core, core k on Agent.Unit base+k, each with its
	// window of contexts.
	rs := make([]*runner, p.cores)
	for k := range rs {
		rk := *r
		rk.cfg.core = r.cfg.core + k
		rs[k] = &rk
	}
	var all []*slot
	for _, rk := range rs {
		slots := make([]*slot, w)
		for i := range slots {
			s := &slot{id: i}
			s.next, s.stop = iter.Pull(func(yield func(struct{}) bool) { rk.context(s, yield) })
			slots[i] = s
		}
		rk.live, rk.slots = w, slots
		all = append(all, slots...)
	}
	runErr := schedule(rs, all)
	for _, s := range all {
		s.stop()
	}
	stats, err := r.be.End()
	p.res.Stats = stats
	if runErr != nil {
		return p.res, runErr
	}
	if err != nil {
		return p.res, fmt.Errorf("%w: end %s: %w", pm.ErrBackend, r.be.Name(), err)
	}
	return p.res, nil
}

// now is the latency clock.
func (r *runner) now() uint64 {
	if r.clock != nil {
		return r.clock.Now()
	}
	return r.p.res.Verbs
}

// context is the body of a window slot's coroutine: it runs the tasks
// spawned into the slot, giving the core back to the scheduler after each.
func (r *runner) context(s *slot, yield func(struct{}) bool) {
	for r.p.err == nil && r.p.spawned < len(r.p.tasks) {
		id := r.p.spawned
		r.p.spawned++
		c := &Ctx{Agent: pm.Agent{Kind: pm.CPUTask, ID: id, Unit: r.cfg.core}, r: r, slot: s.id, yield: yield}
		s.cur = c
		r.p.res.Latency[id].Start = r.now()
		if !r.runTask(c, r.p.tasks[id]) {
			return
		}
		r.p.res.Latency[id].End = r.now()
		r.p.finished++
		if r.p.err != nil {
			break
		}
		more := r.p.spawned < len(r.p.tasks)
		if r.mode.coroutines() && (more || r.live > 1) {
			// TASK_END: back to the scheduler, which moves on to the
			// next context.
			c.switched()
		}
		if !more {
			break
		}
		if (r.live > 1 || r.p.cores > 1) && !yield(struct{}{}) {
			return
		}
	}
	s.done = true
	r.live--
}

// schedule resumes the live contexts of each core round robin, core
// after core, until every task has ended, failing if whole rounds pass in
// which nothing is written and no task ends.
func schedule(rs []*runner, all []*slot) error {
	p := rs[0].p
	idle := 0
	for p.err == nil {
		gen, finished := p.wgen, p.finished
		live, durable := 0, false
		for _, r := range rs {
			if r.live == 0 {
				continue
			}
			for _, s := range r.slots {
				if s.done || (s.cur != nil && s.cur.held) {
					continue
				}
				s.next()
				if p.err != nil {
					return p.err
				}
			}
			if len(r.held) > 0 && (len(r.held) >= r.live || (p.finished == finished && gen == p.wgen)) {
				// Every live task is held, or the others made no
				// progress (they may wait for a held one): make the
				// held durable.
				if err := r.makeDurable(); err != nil {
					return err
				}
				durable = true
			}
			live += r.live
		}
		if live == 0 {
			break
		}
		if durable {
			idle = 0
			continue
		}
		if p.finished == finished && gen == p.wgen {
			idle++
			if idle >= rs[0].cfg.idleRounds {
				return rs[0].deadlock(all)
			}
		} else {
			idle = 0
		}
	}
	return p.err
}

// makeDurable makes every persist reported so far durable with one
// MakeDurable call and releases the held tasks. An error fails the run;
// the held tasks' verbs never return.
func (r *runner) makeDurable() error {
	if err := r.dur.MakeDurable(); err != nil {
		r.fail(fmt.Errorf("%w: durability point of %s on %s: %w", pm.ErrBackend, r.cfg.name, r.be.Name(), err))
		return r.p.err
	}
	for _, c := range r.held {
		c.held = false
	}
	clear(r.held)
	r.held = r.held[:0]
	r.heldVerbs = 0
	return nil
}

// deadlock names the first tasks that were live, what each did last, and
// how many it left out.
func (r *runner) deadlock(slots []*slot) error {
	const listed = 8
	msg, live := "", 0
	for _, s := range slots {
		if !s.done && s.cur != nil {
			if live < listed {
				msg += fmt.Sprintf("; %v yields after %s", &s.cur.Agent, s.cur.lastOp)
			}
			live++
		}
	}
	if live > listed {
		msg += fmt.Sprintf("; and %d more not listed", live-listed)
	}
	return fmt.Errorf("%w: %d rounds with nothing written, %d tasks live%s", ErrDeadlock, r.cfg.idleRounds, live, msg)
}

// runTask runs task in c and reports whether the context may go on.
func (r *runner) runTask(c *Ctx, task Task) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			ok = false
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
	}()
	if r.mode == COSPlay || r.mode == FreeSwitch {
		// TASK_START: the task's persists belong to its context.
		c.SetCtx(uint64(c.slot))
	}
	task(c)
	if r.mode == StrandWeaver {
		c.Join() // synchronous persistence: the task ends durable
	}
	return true
}

func (r *runner) fail(err error) {
	if r.p.err == nil {
		r.p.err = err
	}
}
