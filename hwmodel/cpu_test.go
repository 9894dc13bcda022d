package hwmodel_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/workloads"
)

// cosplayCPU returns the cosplay preset with overrides.
func cosplayCPU(t *testing.T, set ...string) hwmodel.Config {
	t.Helper()
	cfg := hwmodel.PresetCOSPlay()
	require.NoError(t, cfg.Set(set...))
	return cfg
}

// cpuMachine is a machine on a fresh hwmodel backend of cfg.
func cpuMachine(t *testing.T, cfg hwmodel.Config) (*hwmodel.Backend, *pm.Machine) {
	t.Helper()
	be, err := hwmodel.New(cfg, hwmodel.SBRP)
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	return be, m
}

// CPU tasks run timed on a hwmodel machine: the run takes cycles, its
// persists are durable when it has ended, and a kernel after it still
// works.
func TestCPURun(t *testing.T) {
	be, m := cpuMachine(t, hwmodel.PresetPMNear())
	r, err := m.CreateRegion("r", 64)
	require.NoError(t, err)
	res, err := coro.Run(m, []coro.Task{func(c *coro.Ctx) {
		c.Store64(r.Base, 7)
		c.CLWB(r.Base)
		c.SFence()
	}})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Stats.Persists)
	require.Positive(t, res.Stats.Cycles)
	require.Equal(t, "cycles", res.Clock)
	img, err := be.CrashAt(be.Now())
	require.NoError(t, err)
	ri, _ := img.Region("r")
	require.Equal(t, byte(7), ri.Data[0])
}

// A store, its CLWB and an SFence cost at least the write latency to the
// memory controller plus the BMO, and not much more on an idle machine;
// the persist is not durable a cycle before the SFence could return.
func TestCPUClwbSFenceLatency(t *testing.T) {
	for _, bmo := range hwmodel.BMOs() {
		t.Run(bmo.Name, func(t *testing.T) {
			cfg := cosplayCPU(t, fmt.Sprintf("cpu.bmo_cycles=%d", bmo.Cycles))
			be, m := cpuMachine(t, cfg)
			r, err := m.CreateRegion("r", 64)
			require.NoError(t, err)
			var t0, t1 uint64
			_, err = coro.Run(m, []coro.Task{func(c *coro.Ctx) {
				c.Store64(r.Base, 1) // warms the line: the write-allocate miss
				c.CLWB(r.Base)
				c.SFence()
				t0 = be.Now()
				c.Store64(r.Base, 2)
				c.CLWB(r.Base)
				c.SFence()
				t1 = be.Now()
			}})
			require.NoError(t, err)
			want := uint64(cfg.CPU.PM.WriteLatencyCycles + bmo.Cycles)
			require.GreaterOrEqual(t, t1-t0, want)
			require.LessOrEqual(t, t1-t0, want+20, "an idle clwb+sfence costs little more than the persist")
			img, err := be.CrashAt(t1 - 1 - 3)
			require.NoError(t, err)
			ri, _ := img.Region("r")
			require.Equal(t, byte(1), ri.Data[0], "the second persist is not durable before its SFence could return")
		})
	}
}

// independentTasks are n tasks that each store to a line of their own,
// write it back and reach an ordering point, rounds times.
func independentTasks(r pm.Range, n, rounds int) []coro.Task {
	tasks := make([]coro.Task, n)
	for i := range tasks {
		tasks[i] = func(c *coro.Ctx) {
			for k := range rounds {
				a := r.Base.Add(uint64(64 * (c.ID()*rounds + k)))
				c.Store64(a, uint64(k+1))
				c.CLWB(a)
				c.Fence()
			}
		}
	}
	return tasks
}

// runCPU runs tasks under run on a fresh machine of cfg and returns the
// run's cycles and result.
func runCPU(t *testing.T, cfg hwmodel.Config, run coro.Config, size uint64, tasks func(r pm.Range) []coro.Task) (uint64, coro.Result, hwmodel.CPUStats) {
	t.Helper()
	be, m := cpuMachine(t, cfg)
	r, err := m.CreateRegion("r", size)
	require.NoError(t, err)
	res, err := coro.Run(m, tasks(r), coro.WithConfig(run))
	require.NoError(t, err)
	return res.Stats.Cycles, res, be.LastCPU()
}

// Independent contexts overlap their persists: under COSPlay the
// throughput grows with the window until the PM write bandwidth bounds
// it (64 bytes per line at 2 GB/s and 2.2 GHz: 70.4 cycles a line; the
// run ends when its last line is durable in the controller's write
// pending queue, so the lines the queue still holds when it ends need
// not have crossed the bus), and a smaller write-back buffer bounds it
// sooner (each entry holds its line for the write latency plus the BMO).
func TestCPUContextsOverlap(t *testing.T) {
	const tasks, rounds = 64, 4
	lines := float64(tasks * rounds)
	perLine := 64 / (2e9 / 2.2e9) // cycles per line at 2 GB/s
	for _, tc := range []struct {
		name    string
		set     []string
		windows []int
		grows   int // the window up to which throughput must grow
		wbb     int // bound the WBB puts on it, if set
	}{
		{"ADR", nil, []int{1, 2, 3, 4, 8, 16, 32}, 16, 0},
		{"Comb", []string{"cpu.bmo_cycles=1000"}, []int{1, 2, 4, 8, 16, 32}, 32, 0},
		{"Comb/wbb=4", []string{"cpu.bmo_cycles=1000", "cpu.wbb_entries=4"}, []int{1, 2, 4, 8, 16}, 8, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cosplayCPU(t, tc.set...)
			bwBound := (lines - float64(cfg.CPU.WPQEntries)) * perLine
			var prev uint64
			for _, w := range tc.windows {
				cy, _, _ := runCPU(t, cfg, coro.Config{Mode: coro.COSPlay, Window: w}, uint64(64*tasks*rounds),
					func(r pm.Range) []coro.Task { return independentTasks(r, tasks, rounds) })
				t.Logf("window %2d: %7d cycles, %.1f per line", w, cy, float64(cy)/lines)
				require.GreaterOrEqual(t, float64(cy), bwBound, "window %d beats the write bandwidth", w)
				if w == 32 && tc.wbb == 0 {
					require.Less(t, float64(cy), 1.25*bwBound, "a wide window is bound by the write bandwidth")
				}
				if tc.wbb > 0 {
					hold := float64(cfg.CPU.PM.WriteLatencyCycles + cfg.CPU.BMOCycles)
					require.GreaterOrEqual(t, float64(cy), lines/float64(tc.wbb)*hold, "window %d beats the WBB", w)
				}
				if prev != 0 && w <= tc.grows {
					require.Less(t, cy, prev, "window %d is not faster than the one before", w)
				}
				prev = cy
			}
		})
	}
}

// CFence(a) waits for context a's persists only; SFence for every
// context's. Context 0 writes back one line, then context 1 writes back
// more than the controller's write pending queue holds (they queue for
// the write bandwidth); CFence(0) returns once context 0's line is
// durable, long before context 1's last.
func TestCPUCFenceOwnContext(t *testing.T) {
	const lines = 64
	for _, bmo := range []int{0, 700} {
		cfg := cosplayCPU(t, fmt.Sprintf("cpu.bmo_cycles=%d", bmo))
		fenceAfter := func(cfence bool) (own, fence uint64) {
			be, m := cpuMachine(t, cfg)
			r, err := m.CreateRegion("r", 64*lines)
			require.NoError(t, err)
			_, err = coro.Run(m, []coro.Task{func(c *coro.Ctx) {
				// Warm the lines (write-allocate misses) and drain.
				for k := range lines {
					c.Store64(r.Base.Add(uint64(64*k)), 1)
				}
				c.SFence()
				t0 := be.Now()
				c.SetCtx(0)
				c.Store64(r.Base, 2)
				c.CLWB(r.Base)
				c.SetCtx(1)
				for k := 1; k < lines; k++ {
					a := r.Base.Add(uint64(64 * k))
					c.Store64(a, 2)
					c.CLWB(a)
				}
				c.SetCtx(0)
				if cfence {
					c.CFence(0)
				} else {
					c.SFence()
				}
				fence = be.Now() - t0
			}})
			require.NoError(t, err)
			return uint64(cfg.CPU.PM.WriteLatencyCycles + bmo), fence
		}
		own, cf := fenceAfter(true)
		_, sf := fenceAfter(false)
		t.Logf("bmo %d: CFence(0) after %d cycles, SFence after %d", bmo, cf, sf)
		require.GreaterOrEqual(t, cf, own)
		require.Less(t, cf, own+100, "CFence(0) waited for context 1")
		// Context 1's lines beyond the queue's cross the bus first.
		require.Greater(t, sf, cf+uint64(lines-1-cfg.CPU.WPQEntries)*64/2, "SFence waits for context 1's queued write-backs")
	}
}

// The memory controller's write pending queue is the persistence point:
// an SFence after a burst of write-backs the queue holds waits for the
// write latency (and the BMO), not for the lines to cross the bus; after a
// burst twice the queue's size it also waits for the lines beyond the
// queue to find entries, one per line the bus takes (70.4 cycles a line
// at 2 GB/s), and a one-entry queue makes it wait for every line but the
// last. The SFence is timed from the last CLWB's dispatch, up to 64
// stores and CLWBs after the first write-back left (the slack below).
func TestCPUWriteQueue(t *testing.T) {
	const perLine = 64 / (2e9 / 2.2e9) // cycles per line at 2 GB/s
	const slack = 250
	for _, tc := range []struct {
		name  string
		set   []string
		lines int
		wait  int // lines the SFence waits to cross the bus
	}{
		{"burst-fits", nil, 16, 0},
		{"burst-twice", nil, 64, 32},
		{"one-entry", []string{"cpu.wpq_entries=1"}, 16, 15},
		{"burst-fits/bmo", []string{"cpu.bmo_cycles=700"}, 16, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cosplayCPU(t, tc.set...)
			be, m := cpuMachine(t, cfg)
			r, err := m.CreateRegion("r", uint64(64*tc.lines))
			require.NoError(t, err)
			var fence uint64
			_, err = coro.Run(m, []coro.Task{func(c *coro.Ctx) {
				for k := range tc.lines { // warm the lines, drain
					c.Store64(r.Base.Add(uint64(64*k)), 1)
				}
				c.SFence()
				for k := range tc.lines {
					a := r.Base.Add(uint64(64 * k))
					c.Store64(a, 2)
					c.CLWB(a)
				}
				t0 := be.Now()
				c.SFence()
				fence = be.Now() - t0
			}})
			require.NoError(t, err)
			want := float64(cfg.CPU.PM.WriteLatencyCycles+cfg.CPU.BMOCycles) + float64(tc.wait)*perLine
			t.Logf("%d lines: SFence waited %d cycles, want about %.0f", tc.lines, fence, want)
			require.InDelta(t, want-slack/2, float64(fence), slack/2+100)
		})
	}
}

// cpuApps are the COSPlay benchmarks of workloads.
var cpuApps = []string{"sps", "pc", "tatp", "tpcc", "cq4", "cq16", "cq64"}

// runApp runs COSPlay benchmark app with n tasks under run on a fresh
// cosplay machine with bmo, checks it and returns its cycles, its
// coroutine result and the core's statistics.
func runApp(t *testing.T, app string, n int, run coro.Config, bmo int) (uint64, coro.Result, hwmodel.CPUStats) {
	t.Helper()
	w, err := workloads.NewCPU(app, workloads.CPUShape{Tasks: n, Config: run, Seed: 1, Scale: 2}, workloads.NoBug)
	require.NoError(t, err)
	be, m := cpuMachine(t, cosplayCPU(t, fmt.Sprintf("cpu.bmo_cycles=%d", bmo)))
	require.NoError(t, w.Setup(m))
	t0 := be.Now()
	require.NoError(t, w.Run(m))
	require.NoError(t, w.Check(m))
	return be.Now() - t0, w.LastRun(), be.LastCPU()
}

// A window of one gains nothing from COSPlay: its CFence exposes every
// persist as Baseline's SFence does, and the coroutine library costs
// cycles on top (COSPlay §6.2).
func TestCPUWindowOneNoFaster(t *testing.T) {
	apps := cpuApps
	if testing.Short() {
		apps = []string{"sps", "tpcc", "cq4"}
	}
	for _, app := range apps {
		for _, bmo := range []int{0, 200, 1000} {
			base, _, _ := runApp(t, app, 48, coro.Config{Mode: coro.Baseline, Window: 1}, bmo)
			cos, _, _ := runApp(t, app, 48, coro.Config{Mode: coro.COSPlay, Window: 1}, bmo)
			require.GreaterOrEqual(t, cos, base, "%s bmo %d", app, bmo)
			free, _, _ := runApp(t, app, 48, coro.Config{Mode: coro.FreeSwitch, Window: 1}, bmo)
			require.GreaterOrEqual(t, free, base-base/50, "%s bmo %d: free switches make window 1 about Baseline", app, bmo)
		}
	}
}

// The same run twice gives the same cycles, statistics and per-task
// latencies, under every configuration.
func TestCPUDeterminism(t *testing.T) {
	for _, run := range []coro.Config{
		{Mode: coro.Baseline, Window: 1}, {Mode: coro.Unordered, Window: 1}, {Mode: coro.COSPlay, Window: 6},
		{Mode: coro.SBatch, Window: 6}, {Mode: coro.StrandWeaver}, {Mode: coro.FreeSwitch, Window: 6},
	} {
		for _, app := range []string{"sps", "tpcc", "cq4"} {
			c1, r1, s1 := runApp(t, app, 40, run, 200)
			c2, r2, s2 := runApp(t, app, 40, run, 200)
			require.Equal(t, c1, c2, "%s %s", app, run.Name())
			require.Equal(t, r1, r2, "%s %s", app, run.Name())
			require.Equal(t, s1, s2, "%s %s", app, run.Name())
			require.Positive(t, c1)
			for i, l := range r1.Latency {
				require.Positive(t, l.Duration(), "%s %s task %d", app, run.Name(), i)
			}
		}
	}
}

// refineConfigs are the crash-consistent configurations with the model
// their runs must refine: Baseline and SBatch order with SFences (X86),
// COSPlay and FreeSwitch with contexts, StrandWeaver with strands (which
// order as contexts of their own under the COSPlay model; the X86 model
// would order every strand at a PersistBarrier, which StrandWeaver does
// not promise).
var refineConfigs = []struct {
	run   coro.Config
	model crash.Model
}{
	{coro.Config{Mode: coro.Baseline, Window: 1}, crash.X86},
	{coro.Config{Mode: coro.SBatch, Window: 4}, crash.X86},
	{coro.Config{Mode: coro.COSPlay, Window: 4}, crash.COSPlay},
	{coro.Config{Mode: coro.COSPlay, Window: 40}, crash.COSPlay}, // contexts share tracker counters
	{coro.Config{Mode: coro.FreeSwitch, Window: 3}, crash.COSPlay},
	{coro.Config{Mode: coro.StrandWeaver, StrandWidth: 2, StrandDepth: 2}, crash.COSPlay},
	{coro.Config{Mode: coro.StrandWeaver}, crash.COSPlay},
}

// Every crash image the CPU timing produces is one the crash checker's
// X86 or COSPlay rules allow (crash.Refiner: each persist durable no
// earlier than everything its model orders before it, every SFence and
// CFence returned only once what it orders was durable, and CrashAt equal
// to the persists reported durable), for every COSPlay benchmark under every
// crash-consistent configuration, at ADR and with a BMO; and a crash at
// any cycle of the run recovers to a state whose invariant holds.
func TestCPURefinesPMO(t *testing.T) {
	apps, bmos := cpuApps, []int{0, 700}
	if testing.Short() {
		apps, bmos = []string{"sps", "tpcc", "cq4"}, []int{700}
	}
	for _, app := range apps {
		for _, rc := range refineConfigs {
			for _, bmo := range bmos {
				t.Run(fmt.Sprintf("%s/%s/%s/bmo=%d", app, rc.run.Name(), rc.model, bmo), func(t *testing.T) {
					w, err := workloads.NewCPU(app, workloads.CPUShape{Tasks: 48, Config: rc.run, Seed: 3, Scale: 1}, workloads.NoBug)
					require.NoError(t, err)
					be, err := hwmodel.New(cosplayCPU(t, fmt.Sprintf("cpu.bmo_cycles=%d", bmo), "cpu.contexts=16"), hwmodel.SBRP)
					require.NoError(t, err)
					ref := crash.NewRefiner(be, rc.model)
					m, err := pm.NewMachine(ref)
					require.NoError(t, err)
					require.NoError(t, w.Setup(m)) // its warm read is a run of its own
					launches, checked := ref.Launches(), ref.ReturnsChecked()
					start := be.Now()
					require.NoError(t, w.Run(m))
					require.NoError(t, ref.Err())
					require.Equal(t, launches+1, ref.Launches())
					require.Equal(t, checked+1, ref.ReturnsChecked(), "the run's SFences' and CFences' return cycles checked")
					require.Positive(t, ref.Images())
					// Crash at every cycle the durable image changes (a
					// sample of them), recover, check.
					var cycles []uint64
					be.Durability(func(_ pm.Addr, _ int, ack uint64) { cycles = append(cycles, ack-1) })
					require.NotEmpty(t, cycles)
					step := max(len(cycles)/24, 1)
					for i := 0; i < len(cycles); i += step {
						c := max(cycles[i], start)
						img, err := be.CrashAt(c)
						require.NoError(t, err)
						m2, err := pm.Reopen(img, functional.New(pm.DefaultGPU()))
						require.NoError(t, err)
						require.NoError(t, w.Recover(m2), "crash at %d", c)
						require.NoError(t, w.Check(m2), "crash at %d", c)
					}
				})
			}
		}
	}
}

// The timed crash checker crashes CPU runs too: every COSPlay benchmark
// recovers at every cycle where its durable image changes.
func TestCPUCheckTimed(t *testing.T) {
	for _, app := range cpuApps {
		w, err := workloads.New("cosplay-"+app, workloads.Tiny)
		require.NoError(t, err)
		cfg := cosplayCPU(t, "cpu.bmo_cycles=200")
		rep, err := crash.CheckTimed(w, func() (crash.TimedBackend, error) { return hwmodel.New(cfg, hwmodel.SBRP) }, cfg.GPULimits(), 0, 1)
		require.NoError(t, err)
		require.Positive(t, rep.Checked, app)
		require.Empty(t, rep.Violations, "%s: %s", app, rep.Summary())
	}
}

// Every CPU verb's return cycle is noted (SetVerbTimes) and every SFence,
// CFence and JoinStrand returns only once what it orders is durable
// (crash.DurableReturns), in hand-made runs that stress the core's queues:
// a line written back twice (same-line order in the WBB), atomics, a store
// across lines, contexts fenced apart, a CLWB issued in another context
// than its line's store (COSPlay tags a clwb with the context register's
// cid, so only a CFence of that context waits for it; the crash checker
// once charged the write-back to the store's context, and the refiner
// flagged the CFence of the store's context), interleaved tasks, and
// strands written back across strands.
func TestCPUVerbReturns(t *testing.T) {
	one := func(f func(c *coro.Ctx, r pm.Addr)) func(r pm.Addr) []coro.Task {
		return func(r pm.Addr) []coro.Task { return []coro.Task{func(c *coro.Ctx) { f(c, r) }} }
	}
	baseline, cosplay := coro.Config{Mode: coro.Baseline, Window: 1}, coro.Config{Mode: coro.COSPlay, Window: 4}
	for _, tc := range []struct {
		name  string
		model crash.Model
		run   coro.Config
		tasks func(r pm.Addr) []coro.Task
	}{
		{"same line twice", crash.X86, baseline, one(func(c *coro.Ctx, r pm.Addr) {
			c.Store64(r, 1)
			c.CLWB(r)
			c.Store64(r.Add(8), 1)
			c.CLWB(r)
			c.SFence()
		})},
		{"atomics", crash.X86, baseline, one(func(c *coro.Ctx, r pm.Addr) {
			c.CAS64(r, 0, 5)
			c.CLWB(r)
			c.SFence()
			c.AtomicAdd64(r.Add(64), 5)
			c.CLWB(r.Add(64))
			c.SFence()
		})},
		{"bytes across lines", crash.X86, baseline, one(func(c *coro.Ctx, r pm.Addr) {
			c.StoreBytes(r.Add(40), make([]byte, 100))
			for i := range 3 {
				c.CLWB(r.Add(uint64(64 * i)))
			}
			c.SFence()
		})},
		{"contexts fenced apart", crash.COSPlay, cosplay, one(func(c *coro.Ctx, r pm.Addr) {
			for cid := range uint64(2) {
				c.SetCtx(cid + 1)
				c.Store64(r.Add(64*cid), 1)
				c.CLWB(r.Add(64 * cid))
			}
			c.CFence(2)
			c.CFence(1)
		})},
		{"clwb in another context, cfence of the store's", crash.COSPlay, cosplay, one(func(c *coro.Ctx, r pm.Addr) {
			c.SetCtx(1)
			c.Store64(r, 1)
			c.SetCtx(2)
			c.CLWB(r)
			c.SetCtx(1)
			c.CFence(1)
			c.Store64(r.Add(64), 2)
		})},
		{"clwb in another context, cfence of the clwb's", crash.COSPlay, cosplay, one(func(c *coro.Ctx, r pm.Addr) {
			c.SetCtx(1)
			c.Store64(r, 1)
			c.SetCtx(2)
			c.CLWB(r)
			c.CFence(2)
			c.Store64(r.Add(64), 2)
		})},
		{"interleaved tasks", crash.COSPlay, cosplay, func(r pm.Addr) []coro.Task {
			var ts []coro.Task
			for i := range 8 {
				ts = append(ts, func(c *coro.Ctx) {
					c.SetCtx(uint64(i))
					a := r.Add(uint64(64 * i))
					c.Store64(a, 1)
					c.Yield()
					c.CLWB(a)
					c.Yield()
					c.CFence(uint64(i))
					c.Store64(a.Add(8), 2)
					c.CLWB(a)
					c.SFence()
				})
			}
			return ts
		}},
		{"strands", crash.COSPlay, coro.Config{Mode: coro.StrandWeaver, StrandWidth: 2, StrandDepth: 2}, one(func(c *coro.Ctx, r pm.Addr) {
			for i := range 6 {
				c.NewStrand()
				a := r.Add(uint64(64 * i))
				c.Store64(a, 1)
				if i > 0 {
					c.CLWB(r.Add(uint64(64 * (i - 1)))) // the previous strand's line
				}
				c.CLWB(a)
				c.PersistBarrier()
				c.Store64(a.Add(8), 1)
				c.CLWB(a)
			}
			c.JoinStrand()
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, err := hwmodel.New(hwmodel.PresetCOSPlay(), hwmodel.SBRP)
			require.NoError(t, err)
			ref := crash.NewRefiner(be, tc.model)
			m, err := pm.NewMachine(ref)
			require.NoError(t, err)
			r, err := m.CreateRegion("r", 4096)
			require.NoError(t, err)
			_, err = coro.Run(m, tc.tasks(r.Base), coro.WithConfig(tc.run))
			require.NoError(t, err)
			require.NoError(t, ref.Err())
			require.Equal(t, 1, ref.ReturnsChecked())
			n := 0
			be.VerbTimes(func(_ int, done uint64) {
				require.NotEqual(t, uint64(math.MaxUint64), done)
				n++
			})
			require.Equal(t, len(ref.Events()), n, "a return cycle per verb")
		})
	}
}

// Cores run their tasks side by side: Baseline tasks that each wait for
// their persists at every SFence scale with the cores until the memory
// controller's shared PM write bandwidth (70.4 cycles a line) bounds them,
// and no number of cores beats that bound; every core's persists are
// durable when the run ends.
func TestCPUCoresShareController(t *testing.T) {
	const tasks, rounds = 32, 16
	lines := uint64(tasks * rounds)
	cfg := cosplayCPU(t)
	bound := float64(lines) * 64 * cfg.CPU.ClockMHz / (cfg.CPU.PM.WriteGBps * 1e3)
	var cycles []uint64
	for _, n := range []int{1, 2, 4, 8, 16} {
		cy, res, st := runCPU(t, cfg, coro.Config{Mode: coro.Baseline, Window: 1, Cores: n}, 64*lines, func(r pm.Range) []coro.Task {
			return independentTasks(r, tasks, rounds)
		})
		require.Equal(t, uint64(lines), res.Stats.Persists)
		require.Equal(t, uint64(lines), st.WriteBacks)
		require.GreaterOrEqual(t, float64(cy), bound, "%d cores beat the write bandwidth", n)
		cycles = append(cycles, cy)
	}
	require.Less(t, float64(cycles[1]), 0.6*float64(cycles[0]), "two cores nearly halve the time: %v", cycles)
	require.Less(t, float64(cycles[4]), 1.2*bound, "sixteen cores reach the bandwidth bound: %v", cycles)
}

// Under Unordered a CLWB never waits: repeated CLWBs of one busy line (a
// log's tail) and more CLWBs than the WBB holds leave the SQ head at
// once, while the same task without Unordered's rule waits at the head
// for each pending write-back of its line (COSPlay §4.3); the last
// write-back is still durable when the run ends.
func TestCPUUnorderedNeverStalls(t *testing.T) {
	const n = 200
	task := func(r pm.Range) []coro.Task {
		return []coro.Task{func(c *coro.Ctx) {
			for i := range n {
				c.Store64(r.Base, uint64(i+1)) // the busy line
				c.CLWB(r.Base)
				a := r.Base.Add(uint64(64 * (1 + i)))
				c.Store64(a, 1)
				c.CLWB(a)
			}
		}}
	}
	cfg := cosplayCPU(t, "cpu.bmo_cycles=700")
	un, _, su := runCPU(t, cfg, coro.Config{Mode: coro.Unordered, Window: 1}, 64*(n+1), task)
	require.Zero(t, su.SameLine+su.WBBFull, "%+v", su)
	cfg.CPU.SameLineInWBB = false
	// The same verbs as a Baseline run (no fence is issued: no Fence call).
	base, _, sb := runCPU(t, cfg, coro.Config{Mode: coro.Baseline, Window: 1}, 64*(n+1), task)
	require.Positive(t, sb.SameLine)
	require.Less(t, un, base)
	t.Logf("unordered %d cycles (%d write-backs), the same task with §4.3's rule %d (%d cycles at the SQ head for a busy line)", un, su.WriteBacks, base, sb.SameLine)
	// Unordered is bound by the PM write bandwidth, not by the line's
	// write-backs one after another.
	perLine := 64 * cfg.CPU.ClockMHz / (cfg.CPU.PM.WriteGBps * 1e3)
	require.Less(t, float64(un), 1.2*perLine*float64(su.WriteBacks)+float64(cfg.CPU.PM.WriteLatencyCycles+cfg.CPU.BMOCycles)+1000)
}
