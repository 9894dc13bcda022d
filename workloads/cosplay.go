package workloads

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/txn"
)

// The COSPlay workloads (COSPlay Table 3) are CPU task workloads: every
// task is an undo-logged transaction (package txn, on a CPU log of its
// window context) under try-locks that yield when taken, run by package
// coro under a configuration (Baseline, COSPlay, SBatch, StrandWeaver, ...)
// that decides how the log is ordered before the updates. A task has the
// paper's shape (COSPlay §3, Fig. 2 and 4): one batch of undo-log entries
// and their CLWBs, one ordering point, the updates in place and their
// CLWBs, one ordering point, then the commit (the log's generation, one
// store, its CLWB and an ordering point, which makes the task durable
// before it unlocks). The task code is the same under every configuration
// but StrandWeaver, under which TPC-C gives each strand its own batch.

func init() {
	for _, app := range cpuApps {
		register("cosplay-"+app.name, "COSPlay Table 3 "+app.desc+", undo-logged tasks in a COSPlay window",
			func(s Size) crash.Workload { return mustWorkload(NewCPU(app.name, cpuShape(s), NoBug)) })
	}
	for _, app := range []string{"sps", "pc", "tatp", "tpcc", "cq4"} {
		register("cosplay-"+app+"-nofence", "cosplay-"+app+" without the ordering point (CFence) between the undo-log batch and the updates: a persistency bug",
			func(s Size) crash.Workload { return mustWorkload(NewCPU(app, cpuShape(s), BugNoLogFence)) })
		register("cosplay-"+app+"-noclwb", "cosplay-"+app+" without the CLWBs of the undo-log batch before its ordering point: a persistency bug",
			func(s Size) crash.Workload { return mustWorkload(NewCPU(app, cpuShape(s), BugNoLogFlush)) })
	}
}

// CPUBug seeds a persistency bug into a COSPlay workload's log inserts.
type CPUBug uint8

// The seeded bugs.
const (
	NoBug CPUBug = iota
	// BugNoLogFence drops the ordering point (CFence under COSPlay,
	// SFence under Baseline) between a task's batch of undo-log entries
	// and its later persists: the log may persist after the updates it
	// covers.
	BugNoLogFence
	// BugNoLogFlush keeps that ordering point but drops the CLWBs of the
	// batch's lines before it: the fence orders nothing of them, and they
	// are written back only with the updates.
	BugNoLogFlush
)

var bugNames = [...]string{"", "nofence", "noclwb"}

// CPUShape sizes a COSPlay workload run.
type CPUShape struct {
	Tasks  int
	Config coro.Config
	// Seed drives each task's choices: task i draws from a generator
	// seeded with (Seed, i), so a task does the same under every
	// configuration.
	Seed uint64
	// Scale multiplies the workload's table sizes (1 at Tiny).
	Scale int
}

// cpuShape is the registered shape at each size: a COSPlay window.
func cpuShape(s Size) CPUShape {
	switch s {
	case Tiny:
		return CPUShape{Tasks: 12, Config: coro.Config{Mode: coro.COSPlay, Window: 4}, Seed: 1, Scale: 1}
	case Quick:
		return CPUShape{Tasks: 256, Config: coro.Config{Mode: coro.COSPlay, Window: 8}, Seed: 1, Scale: 8}
	}
	return CPUShape{Tasks: 10000, Config: coro.Config{Mode: coro.COSPlay, Window: 8}, Seed: 1, Scale: 64}
}

// cpuApp is one benchmark of COSPlay Table 3.
type cpuApp struct {
	name, desc string
	// clwbs and fences are what one task issues under Baseline, by the
	// benchmark's layout (log lines, updated lines and the commit's line;
	// the log batch, the updates and the commit).
	clwbs, fences float64
	// make returns the benchmark's state for a shape.
	make func(sh CPUShape) cpuBench
}

// cpuWidth is the core's dispatch width (COSPlay Table 2: 4-wide), which
// turns a task's compute instructions into Work cycles.
const cpuWidth = 4

// instructions returns the instructions of one task, from COSPlay Table
// 3: the task's CLWBs at the benchmark's CKI and its fences at its SKI
// each imply a task length (1000 clwbs/CKI, 1000 fences/SKI); the task
// takes their geometric mean, which misses both by the same factor where
// they disagree.
func (a cpuApp) instructions() uint64 {
	p := paperRates[a.name]
	return uint64(math.Round(math.Sqrt(a.clwbs * 1000 / p[0] * a.fences * 1000 / p[1])))
}

// cpuBench is a benchmark's layout and code.
type cpuBench interface {
	// size is the bytes of its PM data region; locks its try-locks.
	size() uint64
	locks() int
	// fill returns the data region's initial contents (len size()).
	fill(seed uint64) []byte
	// task runs one task: it takes its locks, logs and updates through
	// t.tx, commits and unlocks.
	task(t *cpuTask) error
	// check verifies the data region's invariant.
	check(m *pm.Machine, data pm.Addr, seed uint64) error
}

// Region names of the COSPlay workloads.
const (
	cpuData = "cosplay-data"
	// cpuLog names the undo logs: "cosplay-log-<k>" for window context k.
	cpuLog = "cosplay-log"
	// cpuLogCap is the log stream bytes of one window context: enough for
	// TPC-C's dozen whole rows (3.5 KB of entries, 4 KB when each starts
	// a line under StrandWeaver).
	cpuLogCap = 8192
)

// CPUWorkload is a COSPlay benchmark as a crash-checkable workload.
type CPUWorkload struct {
	app   cpuApp
	bench cpuBench
	sh    CPUShape
	bug   CPUBug
	last  coro.Result
}

// NewCPU returns the COSPlay benchmark called app ("sps", "pc", "tatp",
// "tpcc", "cq4", "cq16", "cq64") with shape sh and the seeded bug.
func NewCPU(app string, sh CPUShape, bug CPUBug) (*CPUWorkload, error) {
	switch {
	case sh.Tasks < 1 || sh.Scale < 1:
		return nil, fmt.Errorf("%w: %d tasks at scale %d", ErrConfig, sh.Tasks, sh.Scale)
	case int(bug) >= len(bugNames):
		return nil, fmt.Errorf("%w: bug %d", ErrConfig, bug)
	}
	if err := sh.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, a := range cpuApps {
		if a.name == app {
			return &CPUWorkload{app: a, bench: a.make(sh), sh: sh, bug: bug}, nil
		}
	}
	return nil, fmt.Errorf("%w: COSPlay benchmark %q", ErrUnknown, app)
}

// Name returns "cosplay-sps(cosplay(w=4))", with the bug if seeded.
func (w *CPUWorkload) Name() string {
	n := fmt.Sprintf("cosplay-%s(%s)", w.app.name, w.sh.Config.Name())
	if w.bug != NoBug {
		n += "/" + bugNames[w.bug]
	}
	return n
}

// contexts is the number of window contexts, of every core. Each has an undo log of its
// own (a CPU log of one partition in a region of its own), so that its
// control word (the generation, which every commit writes back) is on a
// CPU line of its own: contexts are independent tasks (COSPlay §3), and
// sharing a line would make one context's CLWB of it wait for another's
// pending CLWB of the same line (COSPlay §4.3's write-back buffer rule),
// serializing the contexts' persists.
func (w *CPUWorkload) contexts() int { return w.window() * max(w.sh.Config.Cores, 1) }

// window is the number of contexts on each core.
func (w *CPUWorkload) window() int {
	if w.sh.Config.Window == 0 {
		return w.sh.Tasks
	}
	return w.sh.Config.Window
}

// Setup creates the data region with its seeded contents and an empty
// log, then reads the data region through the CPU once (warm).
func (w *CPUWorkload) Setup(m *pm.Machine) error {
	rg, err := m.CreateRegion(cpuData, w.bench.size())
	if err != nil {
		return err
	}
	if err := m.CopyIn(rg.Base, w.bench.fill(w.sh.Seed)); err != nil {
		return err
	}
	for k := range w.contexts() {
		if _, err := txn.CreateCPU(m, logName(k), 1, cpuLogCap); err != nil {
			return err
		}
	}
	return w.warm(m, rg)
}

// warm reads every CPU line of the data region once, in order, in a run of
// its own before Run's: the caches then hold the tables as a program that
// has just populated and persisted them holds them, every line that fits
// in the LLC (and the last ones in the L2 and L1). The suite the COSPlay
// benchmarks come from (Kolli et al.'s TPC-C and TATP) populates its
// tables in the process that then runs ten million transactions, so the
// paper measures that steady state; a run of a few thousand tasks from
// cold caches would instead measure first touches (TPC-C: 22 of its rows'
// lines a task read from PM, each stalling a fence 600 cycles longer).
// Setup's cycles are not the run's: the figures time Run alone.
func (w *CPUWorkload) warm(m *pm.Machine, rg pm.Range) error {
	_, err := coro.Run(m, []coro.Task{func(c *coro.Ctx) {
		for off := uint64(0); off < rg.Size; off += cline {
			c.Load8(rg.Base.Add(off))
		}
	}}, coro.WithName(w.Name()+"/warm"))
	return err
}

// logName names window context k's undo log region.
func logName(k int) string { return fmt.Sprintf("%s-%d", cpuLog, k) }

// cpuTask is what a benchmark's task code works with.
type cpuTask struct {
	c     *coro.Ctx
	x     *txn.CPUExec // the transaction's Exec, or the one a bugExec wraps
	tx    *txn.Tx
	rng   *rand.Rand
	data  pm.Addr
	locks pm.Addr
	seed  uint64 // the workload's seed, which its tables derive from
	// instrs is the task's length in instructions (cpuApp.instructions):
	// half of it is compute before the task's first verb (finding its
	// records), the rest, less the loads, stores and CLWBs it issued,
	// compute before its commit (the new values).
	instrs uint64
}

// newStrand starts a StrandWeaver strand after writing back the lines the
// last one stored to (CLWB, unordered): they belong to it, and written
// back after the new strand's CLWBs and before its PersistBarrier they
// would order the new strand behind the old one.
func (t *cpuTask) newStrand() {
	t.x.Flush()
	t.c.NewStrand()
}

// work charges n instructions of compute at the core's width.
func (t *cpuTask) work(n uint64) {
	if cy := n / cpuWidth; cy > 0 {
		t.c.Work(cy)
	}
}

// lock takes try-lock i, yielding while another task holds it.
func (t *cpuTask) lock(i int) { t.c.Lock(t.locks.Add(uint64(8 * i))) }

// unlock releases try-lock i.
func (t *cpuTask) unlock(i int) { t.c.Unlock(t.locks.Add(uint64(8 * i))) }

// commit commits the task's transaction, durably, and then releases its
// locks, last taken first.
func (t *cpuTask) commit(locks ...int) error {
	if rest := t.instrs - t.instrs/2; rest > t.c.MemVerbs() {
		t.work(rest - t.c.MemVerbs())
	}
	if err := t.tx.Commit(); err != nil {
		return err
	}
	for k := len(locks) - 1; k >= 0; k-- {
		t.unlock(locks[k])
	}
	return nil
}

// openCPU finds the data region and opens the contexts' logs.
func (w *CPUWorkload) openCPU(m *pm.Machine) (pm.Range, []*txn.CPULog, error) {
	rg, err := m.OpenRegion(cpuData)
	if err != nil {
		return pm.Range{}, nil, err
	}
	logs := make([]*txn.CPULog, w.contexts())
	for k := range logs {
		if logs[k], err = txn.OpenCPU(m, logName(k)); err != nil {
			return pm.Range{}, nil, err
		}
	}
	return rg, logs, nil
}

// Run runs the tasks under the shape's configuration.
func (w *CPUWorkload) Run(m *pm.Machine) error {
	rg, logs, err := w.openCPU(m)
	if err != nil {
		return err
	}
	locks, err := m.Alloc(pm.HostMem, uint64(8*max(w.bench.locks(), 1)))
	if err != nil {
		return err
	}
	tasks := make([]coro.Task, w.sh.Tasks)
	for i := range tasks {
		tasks[i] = func(c *coro.Ctx) {
			log := logs[c.Unit*w.window()+c.Context()] // core c.Unit's context
			cx := txn.CPU(c)
			var x txn.Exec = cx
			if w.bug != NoBug {
				x = &bugExec{CPUExec: cx, c: c, bug: w.bug, stream: log.Stream(0)}
			}
			t := &cpuTask{c: c, x: cx, rng: taskRNG(w.sh.Seed, c.ID()), data: rg.Base, locks: locks, seed: w.sh.Seed, instrs: w.app.instructions()}
			t.work(t.instrs / 2)
			tx, err := txn.Begin(x, log, 0)
			if err == nil {
				t.tx = tx
				err = w.bench.task(t)
			}
			if err != nil {
				panic(fmt.Errorf("%s task %d: %w", w.app.name, c.ID(), err))
			}
		}
	}
	w.last, err = coro.Run(m, tasks, coro.WithConfig(w.sh.Config), coro.WithName(w.Name()))
	return errors.Join(err, m.Free(locks))
}

// LastRun returns what the last Run's coroutine run reported: verb
// counts, switches and per-task latencies.
func (w *CPUWorkload) LastRun() coro.Result { return w.last }

// taskRNG returns task id's generator.
func taskRNG(seed uint64, id int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(id)^0xc05b1a7))
}

// Recover rolls back every context's unfinished transaction.
func (w *CPUWorkload) Recover(m *pm.Machine) error {
	_, logs, err := w.openCPU(m)
	if err != nil {
		return err
	}
	for _, log := range logs {
		if _, err := txn.RecoverAll(txn.Host(m), log); err != nil {
			return err
		}
	}
	return nil
}

// Check verifies the benchmark's invariant and that the logs are
// consistent.
func (w *CPUWorkload) Check(m *pm.Machine) error {
	rg, logs, err := w.openCPU(m)
	if err != nil {
		return err
	}
	for _, log := range logs {
		if err := log.Check(txn.Host(m)); err != nil {
			return err
		}
	}
	return w.bench.check(m, rg.Base, w.sh.Seed)
}

// bugExec seeds a bug into the ordering point that follows a task's batch
// of undo-log entries: an Order or Durable reached with only lines of its
// log's stream to write back.
type bugExec struct {
	*txn.CPUExec
	c      *coro.Ctx
	bug    CPUBug
	stream pm.Range
}

// afterLog reports whether the lines to write back are all the log's.
func (e *bugExec) afterLog() bool {
	d := e.Dirty()
	for _, l := range d {
		if !e.stream.Contains(l, 1) {
			return false
		}
	}
	return len(d) > 0
}

// Order is the task's ordering point, without the seeded part.
func (e *bugExec) Order() { e.order(e.afterLog()) }

func (e *bugExec) order(seeded bool) {
	switch {
	case !seeded:
		e.CPUExec.Order()
	case e.bug == BugNoLogFlush:
		e.c.Fence() // the log's lines stay dirty: written back with the updates
	}
}

// Durable is Order, seeded the same way.
func (e *bugExec) Durable() { e.order(e.afterLog()) }

// CPURates are a COSPlay workload's persistency verbs per 1,000
// instructions under Baseline, beside COSPlay Table 3's.
type CPURates struct {
	Name                 string
	Tasks                int
	Verbs, CLWBs, Fences uint64
	Switches             uint64
	// Instructions counts a verb as one and Work at the core's width.
	Instructions       uint64
	CKI, SKI           float64 // clwbs and fences per 1,000 instructions, this implementation
	PaperCKI, PaperSKI float64 // COSPlay Table 3
}

// paperRates are COSPlay Table 3's CKI and SKI.
var paperRates = map[string][2]float64{
	"sps": {21.7, 10.9}, "pc": {20.0, 20.0}, "tatp": {30.3, 30.3}, "tpcc": {23.2, 2.7},
	"cq4": {19.5, 2.3}, "cq16": {19.5, 2.3}, "cq64": {19.5, 2.3},
}

// MeasureCPURates runs COSPlay benchmark app on the functional backend
// with shape sh and returns its CLWBs and fences per 1,000 instructions.
// Under Baseline every fence is an SFence, as in Table 3.
func MeasureCPURates(app string, sh CPUShape) (CPURates, error) {
	w, err := NewCPU(app, sh, NoBug)
	if err != nil {
		return CPURates{}, err
	}
	m, err := pm.NewMachine(functional.New(pm.DefaultGPU()))
	if err != nil {
		return CPURates{}, err
	}
	if err := w.Setup(m); err != nil {
		return CPURates{}, err
	}
	if err := w.Run(m); err != nil {
		return CPURates{}, err
	}
	if err := w.Check(m); err != nil {
		return CPURates{}, err
	}
	r := w.LastRun()
	p := paperRates[app]
	ins := r.Verbs - r.Works + cpuWidth*r.WorkCycles
	return CPURates{
		Name: app, Verbs: r.Verbs, CLWBs: r.CLWBs, Fences: r.Fences, Instructions: ins,
		CKI: 1000 * float64(r.CLWBs) / float64(ins), SKI: 1000 * float64(r.Fences) / float64(ins),
		PaperCKI: p[0], PaperSKI: p[1], Switches: r.Switches, Tasks: r.Tasks,
	}, nil
}
