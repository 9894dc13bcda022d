package coro_test

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
)

func TestInterleaving(t *testing.T) {
	run := func() ([]string, []record.Event) {
		rec := record.New(functional.New(pm.GPULimits{}), false)
		m, err := pm.NewMachine(rec)
		require.NoError(t, err)
		log, err := m.CreateRegion("log", 8*64)
		require.NoError(t, err)
		next, err := m.Alloc(pm.HostMem, 8)
		require.NoError(t, err)
		var order []string
		task := func(c *coro.Ctx) {
			for step := range c.ID() + 2 {
				slot := c.AtomicAdd64(next, 1)
				a := log.Base.Add(8 * slot)
				c.Store64(a, uint64(c.ID()<<8|step))
				c.CLWB(a)
				c.SFence()
				order = append(order, fmt.Sprintf("%d.%d", c.ID(), step))
				c.Yield()
			}
		}
		res, err := coro.Run(m, []coro.Task{task, task, task})
		require.NoError(t, err)
		require.Equal(t, uint64(2+3+4), res.Yields)
		return order, rec.Events()
	}
	order, ev := run()
	require.Equal(t, []string{"0.0", "1.0", "2.0", "0.1", "1.1", "2.1", "1.2", "2.2", "2.3"}, order)
	order2, ev2 := run()
	require.Equal(t, order, order2)
	require.Equal(t, ev, ev2)
	var clwb, sfence int
	for _, e := range ev {
		switch e.Op.Kind {
		case pm.OpCLWB:
			clwb++
			require.Equal(t, pm.CPUTask, e.Agent.Kind)
		case pm.OpSFence:
			sfence++
		}
	}
	require.Equal(t, 9, clwb)
	require.Equal(t, 9, sfence)
}

func TestTryLock(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	lock, err := m.Alloc(pm.HostMem, 16)
	require.NoError(t, err)
	counter := lock.Add(8)
	task := func(c *coro.Ctx) {
		for range 10 {
			for c.CAS64(lock, 0, 1) != 0 {
				c.Yield()
			}
			v := c.Load64(counter)
			c.Yield() // hold the lock across a switch
			c.Store64(counter, v+1)
			c.Store64(lock, 0)
		}
	}
	_, err = coro.Run(m, []coro.Task{task, task, task, task})
	require.NoError(t, err)
	v, err := m.Memory().Load(counter, 8)
	require.NoError(t, err)
	require.Equal(t, uint64(40), v)
}

func TestErrors(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	a, err := m.Alloc(pm.HostMem, 8)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		tasks []coro.Task
		is    error
		msg   string
	}{
		{"yield-spin", []coro.Task{func(c *coro.Ctx) {
			for c.Load64(a) == 0 {
				c.Yield()
			}
		}}, coro.ErrDeadlock, "task 0 (core 0) yields after Yield"},
		{"cas-spin", []coro.Task{func(c *coro.Ctx) {
			for c.CAS64(a, 1, 2) != 1 {
			}
		}}, coro.ErrDeadlock, "without yielding"},
		{"panic", []coro.Task{func(*coro.Ctx) {}, func(*coro.Ctx) { panic("oops") }}, coro.ErrPanic, "task 1"},
		{"fault", []coro.Task{func(c *coro.Ctx) { c.Store32(a.Add(2), 1) }}, pm.ErrMisaligned, "task 0"},
		{"unmapped-clwb", []coro.Task{func(c *coro.Ctx) { c.CLWB(0) }}, pm.ErrUnmapped, "task 0"},
		{"many-yield-spins", slices.Repeat([]coro.Task{func(c *coro.Ctx) {
			for c.Load64(a) == 0 {
				c.Yield()
			}
		}}, 20), coro.ErrDeadlock, "and 12 more not listed"},
		{"none", nil, coro.ErrBadArg, "no tasks"},
		{"nil", []coro.Task{nil}, coro.ErrBadArg, "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := coro.Run(m, tc.tasks, coro.WithIdleRounds(16))
			require.ErrorIs(t, err, tc.is)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

// Tasks take turns on one core at each Yield.
func ExampleRun() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	r, _ := m.CreateRegion("r", 64)
	task := func(c *coro.Ctx) {
		for i := range 2 {
			a := r.Base.Add(uint64(8 * (2*c.ID() + i)))
			c.Store64(a, uint64(10*c.ID()+i))
			c.CLWB(a)
			c.SFence()
			fmt.Printf("task %d step %d\n", c.ID(), i)
			c.Yield()
		}
	}
	_, _ = coro.Run(m, []coro.Task{task, task})
	// Output:
	// task 0 step 0
	// task 1 step 0
	// task 0 step 1
	// task 1 step 1
}

// logUpdate is the task shape of COSPlay Figure 4a: a log write, an
// ordering point, an in-place update, an ordering point. Task i writes
// line 2i (its log) and line 2i+1 (its data).
func logUpdate(base pm.Addr) coro.Task {
	return func(c *coro.Ctx) {
		log := base.Add(uint64(128 * c.ID()))
		c.Store64(log, uint64(c.ID()))
		c.CLWB(log)
		c.Fence()
		c.NewStrand() // nothing under most modes
		c.Store64(log.Add(64), uint64(c.ID()))
		c.CLWB(log.Add(64))
		c.Fence()
	}
}

// runMode runs n logUpdate tasks under cfg on a recorded functional
// machine and returns the result and the verbs as "Kind" or "Kind(v)",
// each prefixed with its task id.
func runMode(t *testing.T, cfg coro.Config, n int) (coro.Result, []string) {
	t.Helper()
	rec := record.New(functional.New(pm.GPULimits{}), false)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	r, err := m.CreateRegion("r", uint64(128*n))
	require.NoError(t, err)
	tasks := make([]coro.Task, n)
	for i := range tasks {
		tasks[i] = logUpdate(r.Base)
	}
	res, err := coro.Run(m, tasks, coro.WithConfig(cfg))
	require.NoError(t, err)
	var out []string
	for _, e := range rec.Events() {
		switch e.Op.Kind {
		case pm.OpStore, pm.OpCLWB:
			out = append(out, fmt.Sprintf("%d:%s", e.Agent.ID, e.Op.Kind))
		default:
			out = append(out, fmt.Sprintf("%d:%s(%d)", e.Agent.ID, e.Op.Kind, e.Op.Value))
		}
	}
	return res, out
}

func TestModes(t *testing.T) {
	sw := coro.DefaultSwitchCycles
	for _, tc := range []struct {
		cfg  coro.Config
		want []string
	}{
		{coro.Config{Mode: coro.Baseline, Window: 1}, []string{
			"0:Store", "0:CLWB", "0:SFence(0)", "0:Store", "0:CLWB", "0:SFence(0)",
			"1:Store", "1:CLWB", "1:SFence(0)", "1:Store", "1:CLWB", "1:SFence(0)"}},
		{coro.Config{Mode: coro.Unordered, Window: 1}, []string{
			"0:Store", "0:CLWB", "0:Store", "0:CLWB", "1:Store", "1:CLWB", "1:Store", "1:CLWB"}},
		{coro.Config{Mode: coro.COSPlay, Window: 2}, []string{
			"0:SetCtx(0)", "0:Store", "0:CLWB", fmt.Sprintf("0:Yield(%d)", sw),
			"1:SetCtx(1)", "1:Store", "1:CLWB", fmt.Sprintf("1:Yield(%d)", sw),
			"0:SetCtx(0)", "0:CFence(0)", "0:Store", "0:CLWB", fmt.Sprintf("0:Yield(%d)", sw),
			"1:SetCtx(1)", "1:CFence(1)", "1:Store", "1:CLWB", fmt.Sprintf("1:Yield(%d)", sw),
			"0:SetCtx(0)", "0:CFence(0)", fmt.Sprintf("0:Yield(%d)", sw),
			"1:SetCtx(1)", "1:CFence(1)"}},
		{coro.Config{Mode: coro.FreeSwitch, Window: 2, SwitchCycles: 99}, []string{
			"0:SetCtx(0)", "0:Store", "0:CLWB", "0:Yield(0)",
			"1:SetCtx(1)", "1:Store", "1:CLWB", "1:Yield(0)",
			"0:SetCtx(0)", "0:CFence(0)", "0:Store", "0:CLWB", "0:Yield(0)",
			"1:SetCtx(1)", "1:CFence(1)", "1:Store", "1:CLWB", "1:Yield(0)",
			"0:SetCtx(0)", "0:CFence(0)", "0:Yield(0)",
			"1:SetCtx(1)", "1:CFence(1)"}},
		{coro.Config{Mode: coro.SBatch, Window: 2, SwitchCycles: 5}, []string{
			"0:Store", "0:CLWB", "0:Yield(5)",
			"1:Store", "1:CLWB", "1:Yield(5)",
			"0:SFence(0)", "0:Store", "0:CLWB", "0:Yield(5)",
			"1:Store", "1:CLWB", "1:Yield(5)",
			"0:SFence(0)", "0:Yield(5)"}},
		{coro.Config{Mode: coro.StrandWeaver}, []string{
			"0:Store", "0:CLWB", "0:PersistBarrier(0)", "0:NewStrand(1)", "0:Store", "0:CLWB", "0:PersistBarrier(0)", "0:JoinStrand(0)",
			"1:Store", "1:CLWB", "1:PersistBarrier(0)", "1:NewStrand(2)", "1:Store", "1:CLWB", "1:PersistBarrier(0)", "1:JoinStrand(0)"}},
	} {
		t.Run(tc.cfg.Name(), func(t *testing.T) {
			res, got := runMode(t, tc.cfg, 2)
			require.Equal(t, tc.want, got)
			var clwb, fences uint64
			for _, v := range got {
				switch {
				case strings.HasSuffix(v, ":CLWB"):
					clwb++
				case strings.Contains(v, "Fence(") || strings.Contains(v, "Barrier(") || strings.Contains(v, "JoinStrand("):
					fences++
				}
			}
			require.Equal(t, clwb, res.CLWBs)
			require.Equal(t, fences, res.Fences)
			require.Equal(t, uint64(len(got)), res.Verbs)
		})
	}
}

// TestSBatchOneFencePerRound: with a full window, SBatch issues one SFence
// per round of ordering points, COSPlay one CFence per ordering point.
func TestSBatchOneFencePerRound(t *testing.T) {
	for _, tc := range []struct {
		mode       coro.Mode
		window     int
		wantFences uint64
	}{
		{coro.SBatch, 4, 2 * 8 / 4},
		{coro.SBatch, 8, 2},
		{coro.SBatch, 1, 2 * 8},
		{coro.COSPlay, 4, 2 * 8},
		{coro.Baseline, 1, 2 * 8},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.mode, tc.window), func(t *testing.T) {
			res, _ := runMode(t, coro.Config{Mode: tc.mode, Window: tc.window}, 8)
			require.Equal(t, tc.wantFences, res.Fences)
		})
	}
}

// TestWindowSpawn: tasks are spawned in order into the context whose task
// ended, and each task's latency is recorded.
func TestWindowSpawn(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	var trace []string
	task := func(c *coro.Ctx) {
		for step := range 1 + c.ID()%3 {
			trace = append(trace, fmt.Sprintf("t%d@c%d.%d", c.ID(), c.Context(), step))
			c.Work(1)
			c.Yield()
		}
	}
	tasks := []coro.Task{task, task, task, task, task}
	res, err := coro.Run(m, tasks, coro.WithConfig(coro.Config{Mode: coro.COSPlay, Window: 2}))
	require.NoError(t, err)
	require.Equal(t, []string{
		// t0 ends at its next turn; t2 is spawned into its context when the
		// scheduler comes back to it.
		"t0@c0.0", "t1@c1.0", "t1@c1.1", "t2@c0.0", "t2@c0.1", "t3@c1.0",
		"t2@c0.2", "t4@c1.0", "t4@c1.1"}, trace)
	require.Equal(t, "verbs", res.Clock)
	require.Len(t, res.Latency, len(tasks))
	for i, l := range res.Latency {
		require.Less(t, l.Start, l.End, "task %d", i)
	}
	require.Less(t, res.Latency[0].Duration(), res.Latency[2].Duration())
}

// TestTryLockContention: tasks of a window contend for one lock; the loser
// yields (COSPlay §4.4) and the count comes out right.
func TestTryLockContention(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	lock, err := m.Alloc(pm.HostMem, 16)
	require.NoError(t, err)
	counter := lock.Add(8)
	task := func(c *coro.Ctx) {
		c.Lock(lock)
		v := c.Load64(counter)
		c.Yield() // hold the lock across a switch
		c.Store64(counter, v+1)
		c.Unlock(lock)
	}
	tasks := make([]coro.Task, 12)
	for i := range tasks {
		tasks[i] = task
	}
	res, err := coro.Run(m, tasks, coro.WithConfig(coro.Config{Mode: coro.COSPlay, Window: 4}))
	require.NoError(t, err)
	v, err := m.Memory().Load(counter, 8)
	require.NoError(t, err)
	require.Equal(t, uint64(len(tasks)), v)
	require.Greater(t, res.Yields, uint64(len(tasks)), "contended locks yield")
}

// TestCores: tasks on several cores, each with its own window, run on
// Agent.Unit 0..Cores-1, all of them, in spawn order, and a lock held by a
// task of one core across a switch is waited for by the other cores'.
func TestCores(t *testing.T) {
	for _, tc := range []struct {
		cfg  coro.Config
		name string
	}{
		{coro.Config{Mode: coro.COSPlay, Window: 2, Cores: 3}, "cosplay(w=2)x3"},
		{coro.Config{Mode: coro.Baseline, Window: 1, Cores: 4}, "baseline(w=1)x4"},
		{coro.Config{Mode: coro.Unordered, Window: 1, Cores: 2}, "unordered(w=1)x2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.cfg.Name())
			m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
			require.NoError(t, err)
			lock, err := m.Alloc(pm.HostMem, 16)
			require.NoError(t, err)
			counter := lock.Add(8)
			tasks := make([]coro.Task, 24)
			units := make([]int, len(tasks))
			for i := range tasks {
				tasks[i] = func(c *coro.Ctx) {
					units[c.ID()] = c.Unit
					c.Lock(lock)
					v := c.Load64(counter)
					c.Yield() // hold the lock across a switch
					c.Store64(counter, v+1)
					c.Unlock(lock)
				}
			}
			res, err := coro.Run(m, tasks, coro.WithConfig(tc.cfg))
			require.NoError(t, err)
			require.Equal(t, len(tasks), res.Tasks)
			v, err := m.Memory().Load(counter, 8)
			require.NoError(t, err)
			require.Equal(t, uint64(len(tasks)), v)
			seen := map[int]bool{}
			for _, u := range units {
				require.GreaterOrEqual(t, u, 0)
				require.Less(t, u, tc.cfg.Cores)
				seen[u] = true
			}
			require.Len(t, seen, tc.cfg.Cores, "every core ran tasks")
		})
	}
}

// TestDeterministic: the same run twice gives the same verbs, counts and
// latencies.
func TestDeterministic(t *testing.T) {
	for _, mode := range coro.Modes() {
		cfg := coro.Config{Mode: mode, Window: 3}
		if mode == coro.StrandWeaver {
			cfg.Window = 1
		}
		t.Run(mode.String(), func(t *testing.T) {
			r1, v1 := runMode(t, cfg, 7)
			r2, v2 := runMode(t, cfg, 7)
			require.Equal(t, v1, v2)
			require.Equal(t, r1, r2)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	nop := []coro.Task{func(*coro.Ctx) {}}
	for _, tc := range []struct {
		name string
		cfg  coro.Config
		msg  string
	}{
		{"mode", coro.Config{Mode: 42}, "mode(42)"},
		{"window", coro.Config{Window: -1}, "window -1"},
		{"strands-window", coro.Config{Mode: coro.StrandWeaver, Window: 2}, "one task at a time"},
		{"strand-shape", coro.Config{Mode: coro.StrandWeaver, StrandDepth: -4}, "strand buffer"},
		{"cores", coro.Config{Cores: -1}, "-1 cores"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := coro.Run(m, nop, coro.WithConfig(tc.cfg))
			require.ErrorIs(t, err, coro.ErrBadArg)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
	for _, m := range coro.Modes() {
		got, err := coro.ParseMode(strings.ToUpper(m.String()))
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, err = coro.ParseMode("fast")
	require.ErrorIs(t, err, coro.ErrBadArg)
}

// BenchmarkSwitch measures a task switch: a window of 8 tasks that only
// yield, so each Yield hands the core to the next context.
func BenchmarkSwitch(b *testing.B) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(b, err)
	const window = 8
	per := max(b.N/window, 1)
	tasks := make([]coro.Task, window)
	for i := range tasks {
		tasks[i] = func(c *coro.Ctx) {
			for range per {
				c.Yield()
			}
		}
	}
	b.ResetTimer()
	res, err := coro.Run(m, tasks, coro.WithConfig(coro.Config{Mode: coro.COSPlay, Window: window}), coro.WithIdleRounds(1<<30))
	b.StopTimer()
	require.NoError(b, err)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(res.Yields), "ns/switch")
}

// Two tasks of a COSPlay window of 2: each ordering point hands the core to
// the other context, and the task resumes with SetCtx and CFence of its
// own context.
func ExampleRun_window() {
	rec := record.New(functional.New(pm.GPULimits{}), false)
	m, _ := pm.NewMachine(rec)
	r, _ := m.CreateRegion("r", 256)
	task := func(c *coro.Ctx) {
		a := r.Base.Add(uint64(64 * c.ID()))
		c.Store64(a, 1) // the log
		c.CLWB(a)
		c.Fence()
		c.Store64(a.Add(8), 2) // the update
		c.CLWB(a)
		c.Fence()
	}
	res, _ := coro.Run(m, []coro.Task{task, task}, coro.WithConfig(coro.Config{Mode: coro.COSPlay, Window: 2}))
	for _, e := range rec.Events() {
		fmt.Printf("task %d %v\n", e.Agent.ID, &e.Op)
	}
	fmt.Println(res.Switches, "switches,", res.Fences, "fences")
	// Output:
	// task 0 SetCtx(0)
	// task 0 Store 8@0x1:0
	// task 0 CLWB 0x1:0
	// task 0 Yield
	// task 1 SetCtx(1)
	// task 1 Store 8@0x1:40
	// task 1 CLWB 0x1:40
	// task 1 Yield
	// task 0 SetCtx(0)
	// task 0 CFence(0)
	// task 0 Store 8@0x1:8
	// task 0 CLWB 0x1:0
	// task 0 Yield
	// task 1 SetCtx(1)
	// task 1 CFence(1)
	// task 1 Store 8@0x1:48
	// task 1 CLWB 0x1:40
	// task 1 Yield
	// task 0 SetCtx(0)
	// task 0 CFence(0)
	// task 0 Yield
	// task 1 SetCtx(1)
	// task 1 CFence(1)
	// 5 switches, 4 fences
}

// BenchmarkPullFloor is what BenchmarkSwitch cannot go below: a bare
// iter.Pull resume and yield, the two runtime coroutine switches a task
// switch through the scheduler makes.
func BenchmarkPullFloor(b *testing.B) {
	const window = 8
	nexts := make([]func() (struct{}, bool), window)
	for i := range nexts {
		next, stop := iter.Pull(func(yield func(struct{}) bool) {
			for yield(struct{}{}) {
			}
		})
		defer stop()
		nexts[i] = next
	}
	b.ResetTimer()
	for i := range b.N {
		nexts[i%window]()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/switch")
}
