package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// COSPlay's figures (MICRO 2021): the benchmarks of its Table 3 (package
// workloads' COSPlay workloads: undo-logged tasks under try-locks) run by
// package coro under its six configurations on hwmodel's CPU core (the
// cosplay preset, COSPlay Table 2), with the BMO latencies of §5. A run's
// time is its cycles until its last persist is durable; a speedup is the
// other configuration's cycles over this one's. Baseline, Unordered and
// StrandWeaver run one task at a time (window 1); COSPlay, SBatch and
// FreeSwitch sweep their window and report their best.

func init() {
	for _, e := range []Experiment{
		{Name: "cosplay-fig1", Paper: "COSPlay", Presets: []string{"cosplay"}, Sweeps: []string{"cpu.bmo_cycles"}, Figure: "Fig. 1", Description: "COSPlay Fig. 1: slowdown of Baseline (sfences) over Unordered (no fences) per benchmark as the persist latency added at the memory controller grows from 0 (plain ADR) to 1000 cycles, cosplay preset", Run: runCosplayFig1},
		{Name: "cosplay-fig8", Paper: "COSPlay", Presets: []string{"cosplay"}, Sweeps: []string{"cpu.bmo_cycles"}, Figure: "Fig. 8", Description: "COSPlay Fig. 8: speedup of COSPlay at its best window over Baseline per benchmark and BMO (ADR, Enc, LD, HD, Comb), with the best window; min and max over the benchmarks, cosplay preset", Run: runCosplayFig8},
		{Name: "cosplay-fig9", Paper: "COSPlay", Presets: []string{"cosplay"}, Sweeps: []string{"cpu.bmo_cycles"}, Figure: "Fig. 9", Description: "COSPlay Fig. 9: performance of COSPlay at each window size (1-32), and of Baseline, normalised to Unordered per benchmark for the Enc and HD BMOs, cosplay preset", Run: runCosplayFig9},
		{Name: "cosplay-fig10", Paper: "COSPlay", Presets: []string{"cosplay"}, Sweeps: []string{"cpu.bmo_cycles"}, Figure: "Fig. 10", Description: "COSPlay Fig. 10: TPCC speedup of StrandWeaver(4,4), StrandWeaver(8,8) and COSPlay at its best window over Baseline per BMO, cosplay preset", Run: runCosplayFig10},
		{Name: "cosplay-fig11", Paper: "COSPlay", Presets: []string{"cosplay"}, Sweeps: []string{"cpu.bmo_cycles"}, Figure: "Fig. 11", Description: "COSPlay Fig. 11: speedup of COSPlay over SBatch, (a) at COSPlay's best window for both, (b) each at its best window, with the windows, per benchmark and BMO, cosplay preset", Run: runCosplayFig11},
		{Name: "cosplay-fig12", Paper: "COSPlay", Presets: []string{"cosplay"}, Sweeps: []string{"cpu.bmo_cycles"}, Figure: "Fig. 12", Description: "COSPlay Fig. 12: task-latency CDFs (cycles at percentiles 5..100) with the LD BMO of COSPlay at its best window, SBatch at that window and SBatch at its best window, with median ratios, cosplay preset", Run: runCosplayFig12},
		{Name: "cosplay-fig14", Paper: "COSPlay", Presets: []string{"cosplay"}, Sweeps: []string{"cpu.bmo_cycles"}, Figure: "Fig. 14", Description: "COSPlay Fig. 14: multicore, one thread per core on a shared LLC and memory controller, LD BMO: (a) throughput of Baseline and of COSPlay at its best window over Baseline's on one core, (b) COSPlay's speedup over Baseline at the same thread count, threads 1-8, cosplay preset", Run: runCosplayFig14},
		{Name: "cosplay-fig13", Paper: "COSPlay", Presets: []string{"cosplay"}, Sweeps: []string{"cpu.bmo_cycles"}, Figure: "Fig. 13", Description: "COSPlay Fig. 13: performance of Baseline, COSPlay and FreeSwitch (each at its best window) normalised to Unordered for the Enc and HD BMOs, with slowdowns over Unordered, cosplay preset", Run: runCosplayFig13},
	} {
		Register(e)
	}
}

// cosplayApps are COSPlay Table 3's benchmarks, by their label in the
// figures, with their workloads.NewCPU names.
var cosplayApps = []struct{ label, name string }{
	{"SPS", "sps"}, {"PC", "pc"}, {"TATP", "tatp"}, {"TPCC", "tpcc"},
	{"CQ4", "cq4"}, {"CQ16", "cq16"}, {"CQ64", "cq64"},
}

// cosplayWindows are the window sizes the experiments try for COSPlay
// and FreeSwitch (COSPlay Fig. 9 sweeps up to 32); sbatchWindows for
// SBatch, whose best windows reach 12 times COSPlay's (§6.4).
var (
	cosplayWindows = []int{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32}
	sbatchWindows  = append(slices.Clone(cosplayWindows), 40, 48, 64, 96, 128)
)

// windows returns the windows to try: the -window list if given, else def.
func (o Options) windows(def []int) []int {
	if len(o.Windows) > 0 {
		return o.Windows
	}
	return def
}

// cpuShape is a COSPlay benchmark's shape at the options' size: tasks and
// table scale (workloads.CPUShape.Scale multiplies the tables).
func (o Options) cpuShape(run coro.Config) workloads.CPUShape {
	sh := workloads.CPUShape{Config: run, Seed: 1}
	switch {
	case o.Quick && o.Smoke:
		sh.Tasks, sh.Scale = 24, 1
	case o.Quick:
		sh.Tasks, sh.Scale = 256, 8
	default:
		sh.Tasks, sh.Scale = 4096, 64
	}
	return sh
}

// cpuJob is one run: a benchmark under a configuration with a BMO latency.
type cpuJob struct {
	app string
	run coro.Config
	bmo int
}

// cpuResult is what a run measured.
type cpuResult struct {
	cycles  uint64
	latency []uint64 // per task, in cycles (when asked)
}

// cpuRunKey is everything a run of cpuRun depends on: the benchmark, its
// shape at the options' size, the machine's whole configuration and
// whether task latencies are kept.
type cpuRunKey struct {
	app     string
	shape   workloads.CPUShape
	cfg     hwmodel.Config
	latency bool
}

// cpuRuns keeps the runs of this process by key: the COSPlay figures
// share many (benchmark, configuration, BMO) runs.
var cpuRuns memo[cpuRunKey, cpuResult]

// cpuRun sets up and runs job on a fresh cosplay machine and checks the
// benchmark's invariant after it; the result of an earlier run of the same
// key (cpuRunKey) in this process is returned instead of simulating it
// again (a run is deterministic: TestGolden).
func cpuRun(job cpuJob, o Options, latency bool) (cpuResult, error) {
	cfg, err := o.config("cosplay", cpuEdit(job))
	if err != nil {
		return cpuResult{}, err
	}
	r, err := cpuRuns.do(cpuRunKey{job.app, o.cpuShape(job.run), cfg, latency}, func() (cpuResult, error) {
		return simulateCPU(job, o, latency)
	})
	r.latency = slices.Clone(r.latency) // the caller's own
	return r, err
}

// cpuEdit is job's change to the cosplay preset: its BMO latency.
func cpuEdit(job cpuJob) edit { return func(c *hwmodel.Config) { c.CPU.BMOCycles = job.bmo } }

// simulateCPU is cpuRun without the kept runs.
func simulateCPU(job cpuJob, o Options, latency bool) (cpuResult, error) {
	w, err := workloads.NewCPU(job.app, o.cpuShape(job.run), workloads.NoBug)
	if err != nil {
		return cpuResult{}, err
	}
	// The GPU model (SBRP) does not time CPU runs.
	be, err := o.timingBackend("cosplay", hwmodel.SBRP, cpuEdit(job)) // nothing crashes this run
	if err != nil {
		return cpuResult{}, err
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		return cpuResult{}, err
	}
	if err := w.Setup(m); err != nil {
		return cpuResult{}, fmt.Errorf("%s setup: %w", job.app, err)
	}
	t0 := be.Now()
	if err := w.Run(m); err != nil {
		return cpuResult{}, fmt.Errorf("%s: %w", w.Name(), err)
	}
	r := cpuResult{cycles: be.Now() - t0}
	if err := w.Check(m); err != nil {
		return cpuResult{}, fmt.Errorf("%s: %w", w.Name(), err)
	}
	if latency {
		for _, l := range w.LastRun().Latency {
			r.latency = append(r.latency, l.Duration())
		}
	}
	return r, nil
}

// cpuSweep runs every job once, in parallel (at most GOMAXPROCS at a
// time), announcing them all before any runs.
func cpuSweep(ctx context.Context, o Options, jobs []cpuJob, latency bool) (map[cpuJob]cpuResult, error) {
	var uniq []cpuJob
	seen := map[cpuJob]bool{}
	for _, j := range jobs {
		if !seen[j] {
			seen[j] = true
			uniq = append(uniq, j)
		}
	}
	res := make([]cpuResult, len(uniq))
	o.progress(len(uniq), 0)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, j := range uniq {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			r, err := cpuRun(j, o, latency)
			res[i] = r
			o.progress(0, 1)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[cpuJob]cpuResult, len(uniq))
	for i, j := range uniq {
		out[j] = res[i]
	}
	return out, nil
}

// Single-task configurations.
var (
	cpuBaseline  = coro.Config{Mode: coro.Baseline, Window: 1}
	cpuUnordered = coro.Config{Mode: coro.Unordered, Window: 1}
)

// windowed returns mode at each window.
func windowed(mode coro.Mode, windows []int) []coro.Config {
	out := make([]coro.Config, len(windows))
	for i, w := range windows {
		out[i] = coro.Config{Mode: mode, Window: w}
	}
	return out
}

// best returns the fastest of runs of app at bmo under configs (the
// smallest window among equals) and its cycles.
func best(res map[cpuJob]cpuResult, app string, bmo int, configs []coro.Config) (coro.Config, uint64) {
	var b coro.Config
	cy := uint64(math.MaxUint64)
	for _, c := range configs {
		if r := res[cpuJob{app, c, bmo}]; r.cycles < cy {
			b, cy = c, r.cycles
		}
	}
	return b, cy
}

// myApps returns the benchmarks of this shard.
func (o Options) myApps() (labels, names []string) {
	for i, a := range cosplayApps {
		if o.mine(i) {
			labels, names = append(labels, a.label), append(names, a.name)
		}
	}
	return labels, names
}

// minMax appends rows "min" and "max" of metric over the rows of config
// (unsharded runs only).
func minMax(o Options, rows []Row, exp, config, metric string) []Row {
	if o.Shards > 1 {
		return rows
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if r.Config == config && r.Metric == metric && r.Workload != "min" && r.Workload != "max" {
			lo, hi = min(lo, r.Value), max(hi, r.Value)
		}
	}
	if math.IsInf(lo, 1) {
		return rows
	}
	return append(rows, Row{exp, "min", config, metric, lo}, Row{exp, "max", config, metric, hi})
}

func runCosplayFig8(ctx context.Context, o Options) ([]Row, error) {
	labels, apps := o.myApps()
	cos := windowed(coro.COSPlay, o.windows(cosplayWindows))
	res, err := cpuSweep(ctx, o, jobsOf(apps, hwmodel.BMOs(), []coro.Config{cpuBaseline}, cos), false)
	if err != nil {
		return nil, err
	}
	const exp = "cosplay-fig8"
	var rows []Row
	for k, app := range apps {
		for _, bmo := range hwmodel.BMOs() {
			base := res[cpuJob{app, cpuBaseline, bmo.Cycles}].cycles
			bc, cy := best(res, app, bmo.Cycles, cos)
			rows = append(rows,
				Row{exp, labels[k], bmo.Name, "speedup", float64(base) / float64(cy)},
				Row{exp, labels[k], bmo.Name, "best_window", float64(bc.Window)})
		}
	}
	for _, bmo := range hwmodel.BMOs() {
		rows = minMax(o, rows, exp, bmo.Name, "speedup")
	}
	return rows, nil
}

// jobsOf returns a job per benchmark, BMO and configuration of configs.
func jobsOf(apps []string, bmos []hwmodel.BMO, configs ...[]coro.Config) []cpuJob {
	var jobs []cpuJob
	for _, app := range apps {
		for _, bmo := range bmos {
			for _, cs := range configs {
				for _, c := range cs {
					jobs = append(jobs, cpuJob{app, c, bmo.Cycles})
				}
			}
		}
	}
	return jobs
}

// encHD are the BMOs of COSPlay Figs. 9 and 13: Enc and HD.
func encHD() []hwmodel.BMO { return []hwmodel.BMO{hwmodel.BMOs()[1], hwmodel.BMOs()[3]} }

// runCosplayFig9 is COSPlay's window sensitivity (§6.2): COSPlay's
// performance over Unordered's at every window, beside Baseline's. At
// window 1 a cfence waits as an sfence does and the coroutine library's
// switches are pure cost, so COSPlay runs below Baseline; the paper's
// knee is at windows 2-5 for Enc and 5-10 for HD.
func runCosplayFig9(ctx context.Context, o Options) ([]Row, error) {
	labels, apps := o.myApps()
	cos := windowed(coro.COSPlay, o.windows(cosplayWindows))
	res, err := cpuSweep(ctx, o, jobsOf(apps, encHD(), []coro.Config{cpuUnordered, cpuBaseline}, cos), false)
	if err != nil {
		return nil, err
	}
	const exp = "cosplay-fig9"
	var rows []Row
	for k, app := range apps {
		for _, bmo := range encHD() {
			un := float64(res[cpuJob{app, cpuUnordered, bmo.Cycles}].cycles)
			perf := func(c coro.Config) float64 { return un / float64(res[cpuJob{app, c, bmo.Cycles}].cycles) }
			rows = append(rows, Row{exp, labels[k], bmo.Name + " baseline", "perf_over_unordered", perf(cpuBaseline)})
			for _, c := range cos {
				rows = append(rows, Row{exp, labels[k], fmt.Sprintf("%s window=%d", bmo.Name, c.Window), "perf_over_unordered", perf(c)})
			}
		}
	}
	return rows, nil
}

func runCosplayFig10(ctx context.Context, o Options) ([]Row, error) {
	const exp, app = "cosplay-fig10", "tpcc"
	if !o.mine(0) {
		return nil, nil
	}
	sw44 := coro.Config{Mode: coro.StrandWeaver, Window: 1, StrandWidth: 4, StrandDepth: 4}
	sw88 := coro.Config{Mode: coro.StrandWeaver, Window: 1, StrandWidth: 8, StrandDepth: 8}
	cos := windowed(coro.COSPlay, o.windows(cosplayWindows))
	var jobs []cpuJob
	for _, bmo := range hwmodel.BMOs() {
		jobs = append(jobs, cpuJob{app, cpuBaseline, bmo.Cycles}, cpuJob{app, sw44, bmo.Cycles}, cpuJob{app, sw88, bmo.Cycles})
		for _, c := range cos {
			jobs = append(jobs, cpuJob{app, c, bmo.Cycles})
		}
	}
	res, err := cpuSweep(ctx, o, jobs, false)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, bmo := range hwmodel.BMOs() {
		base := float64(res[cpuJob{app, cpuBaseline, bmo.Cycles}].cycles)
		bc, cy := best(res, app, bmo.Cycles, cos)
		rows = append(rows,
			Row{exp, bmo.Name, "strandweaver(4,4)", "speedup", base / float64(res[cpuJob{app, sw44, bmo.Cycles}].cycles)},
			Row{exp, bmo.Name, "strandweaver(8,8)", "speedup", base / float64(res[cpuJob{app, sw88, bmo.Cycles}].cycles)},
			Row{exp, bmo.Name, "cosplay", "speedup", base / float64(cy)},
			Row{exp, bmo.Name, "cosplay", "best_window", float64(bc.Window)})
	}
	return rows, nil
}

func runCosplayFig11(ctx context.Context, o Options) ([]Row, error) {
	labels, apps := o.myApps()
	cos := windowed(coro.COSPlay, o.windows(cosplayWindows))
	sb := windowed(coro.SBatch, o.windows(sbatchWindows))
	var jobs []cpuJob
	for _, app := range apps {
		for _, bmo := range hwmodel.BMOs() {
			for _, c := range append(slices.Clone(cos), sb...) {
				jobs = append(jobs, cpuJob{app, c, bmo.Cycles})
			}
		}
	}
	res, err := cpuSweep(ctx, o, jobs, false)
	if err != nil {
		return nil, err
	}
	const exp = "cosplay-fig11"
	var rows []Row
	for k, app := range apps {
		for _, bmo := range hwmodel.BMOs() {
			bc, cy := best(res, app, bmo.Cycles, cos)
			iso := res[cpuJob{app, coro.Config{Mode: coro.SBatch, Window: bc.Window}, bmo.Cycles}].cycles
			bs, sy := best(res, app, bmo.Cycles, sb)
			rows = append(rows,
				Row{exp, labels[k], bmo.Name, "speedup_iso_window", float64(iso) / float64(cy)},
				Row{exp, labels[k], bmo.Name, "speedup_best_windows", float64(sy) / float64(cy)},
				Row{exp, labels[k], bmo.Name, "cosplay_window", float64(bc.Window)},
				Row{exp, labels[k], bmo.Name, "sbatch_window", float64(bs.Window)},
				Row{exp, labels[k], bmo.Name, "sbatch_over_cosplay_window", float64(bs.Window) / float64(bc.Window)})
		}
	}
	if o.Shards > 1 {
		return rows, nil // the aggregates are the unsharded run's (or Merge's)
	}
	return fig11Aggregates(rows), nil
}

// fig11Aggregates appends to cosplay-fig11's benchmark rows their minima
// and maxima per BMO, and over every BMO.
func fig11Aggregates(rows []Row) []Row {
	const exp = "cosplay-fig11"
	o := Options{}
	for _, bmo := range hwmodel.BMOs() {
		for _, m := range []string{"speedup_iso_window", "speedup_best_windows", "sbatch_over_cosplay_window"} {
			rows = minMax(o, rows, exp, bmo.Name, m)
		}
	}
	// Over every BMO (§6.4 states these across them): the largest ratio
	// of best windows, and the best-window gap of the benchmarks not
	// bound by their locks (all but CQ4 and CQ16).
	var all, free []Row
	for _, r := range rows {
		if r.Workload == "min" || r.Workload == "max" {
			continue
		}
		switch {
		case r.Metric == "sbatch_over_cosplay_window":
			all = append(all, Row{exp, r.Workload, "all", r.Metric, r.Value})
		case r.Metric == "speedup_best_windows" && r.Workload != "CQ4" && r.Workload != "CQ16":
			free = append(free, Row{exp, r.Workload, "all-but-CQ4-CQ16", r.Metric, r.Value})
		}
	}
	g := minMax(o, all, exp, "all", "sbatch_over_cosplay_window")
	rows = append(rows, g[len(all):]...)
	g = minMax(o, free, exp, "all-but-CQ4-CQ16", "speedup_best_windows")
	return append(rows, g[len(free):]...)
}

// cdfPoints are the percentiles of the task-latency CDFs.
var cdfPoints = []int{5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 100}

// percentile returns the p-th percentile of sorted xs (nearest rank).
func percentile(xs []uint64, p int) uint64 {
	k := (p*len(xs) + 99) / 100
	return xs[max(k, 1)-1]
}

// fig12Apps are the benchmarks of COSPlay Fig. 12's CDFs (the paper shows
// four without saying which here; these are one of each kind).
var fig12Apps = []string{"sps", "tatp", "tpcc", "cq16"}

func runCosplayFig12(ctx context.Context, o Options) ([]Row, error) {
	const exp = "cosplay-fig12"
	ld := hwmodel.BMOs()[2].Cycles // LD, 200 cycles
	cos := windowed(coro.COSPlay, o.windows(cosplayWindows))
	sb := windowed(coro.SBatch, o.windows(sbatchWindows))
	var labels, apps []string
	for i, a := range fig12Apps {
		if o.mine(i) {
			apps = append(apps, a)
			labels = append(labels, cosplayLabel(a))
		}
	}
	var jobs []cpuJob
	for _, app := range apps {
		for _, c := range append(slices.Clone(cos), sb...) {
			jobs = append(jobs, cpuJob{app, c, ld})
		}
	}
	res, err := cpuSweep(ctx, o, jobs, true)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for k, app := range apps {
		bc, _ := best(res, app, ld, cos)
		bs, _ := best(res, app, ld, sb)
		configs := []struct {
			name string
			run  coro.Config
		}{
			{"cosplay", bc},
			{"sbatch-iso", coro.Config{Mode: coro.SBatch, Window: bc.Window}},
			{"sbatch-best", bs},
		}
		medians := map[string]float64{}
		for _, c := range configs {
			lat := slices.Clone(res[cpuJob{app, c.run, ld}].latency)
			slices.Sort(lat)
			for _, p := range cdfPoints {
				rows = append(rows, Row{exp, labels[k], c.name, fmt.Sprintf("cdf_p%03d", p), float64(percentile(lat, p))})
			}
			rows = append(rows, Row{exp, labels[k], c.name, "window", float64(c.run.Window)})
			medians[c.name] = float64(percentile(lat, 50))
		}
		rows = append(rows,
			Row{exp, labels[k], "sbatch-iso", "median_over_cosplay", medians["sbatch-iso"] / medians["cosplay"]},
			Row{exp, labels[k], "sbatch-best", "median_over_cosplay", medians["sbatch-best"] / medians["cosplay"]})
	}
	rows = minMax(o, rows, exp, "sbatch-iso", "median_over_cosplay")
	rows = minMax(o, rows, exp, "sbatch-best", "median_over_cosplay")
	return rows, nil
}

// cosplayLabel returns the figure label of benchmark name.
func cosplayLabel(name string) string {
	for _, a := range cosplayApps {
		if a.name == name {
			return a.label
		}
	}
	return strings.ToUpper(name)
}

func runCosplayFig13(ctx context.Context, o Options) ([]Row, error) {
	labels, apps := o.myApps()
	bmos := encHD()
	cos := windowed(coro.COSPlay, o.windows(cosplayWindows))
	free := windowed(coro.FreeSwitch, o.windows(cosplayWindows))
	res, err := cpuSweep(ctx, o, jobsOf(apps, bmos, []coro.Config{cpuUnordered, cpuBaseline}, cos, free), false)
	if err != nil {
		return nil, err
	}
	const exp = "cosplay-fig13"
	var rows, gaps []Row
	for k, app := range apps {
		for _, bmo := range bmos {
			un := float64(res[cpuJob{app, cpuUnordered, bmo.Cycles}].cycles)
			base := res[cpuJob{app, cpuBaseline, bmo.Cycles}].cycles
			bc, cy := best(res, app, bmo.Cycles, cos)
			bf, fy := best(res, app, bmo.Cycles, free)
			for _, c := range []struct {
				name   string
				cycles uint64
				window int
			}{{"baseline", base, 1}, {"cosplay", cy, bc.Window}, {"freeswitch", fy, bf.Window}} {
				cfg := bmo.Name + " " + c.name
				perf := un / float64(c.cycles)
				rows = append(rows,
					Row{exp, labels[k], cfg, "perf_over_unordered", perf},
					Row{exp, labels[k], cfg, "window", float64(c.window)})
				if c.name != "freeswitch" {
					// §6.2's gaps, over the benchmarks and both BMOs:
					// the inverse of the row's performance, so that
					// merge recomputes them from the rows (fig13Gaps).
					gaps = append(gaps, Row{exp, labels[k], c.name, "slowdown_vs_unordered", 1 / perf})
				}
			}
		}
	}
	return fig13Gaps(o, rows, gaps), nil
}

// fig13Gaps appends to Fig. 13's rows §6.2's gaps (min and max over the
// benchmarks and both BMOs of gaps, slowdown_vs_unordered per config:
// Baseline's and COSPlay's).
func fig13Gaps(o Options, rows, gaps []Row) []Row {
	for _, c := range []string{"baseline", "cosplay"} {
		g := minMax(o, gaps, "cosplay-fig13", c, "slowdown_vs_unordered")
		rows = append(rows, g[len(gaps):]...)
	}
	return rows
}

// fig1Latencies are the persist latencies Fig. 1 adds at the memory
// controller: 0 (plain ADR) to 1000 cycles.
var fig1Latencies = []int{0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}

func runCosplayFig1(ctx context.Context, o Options) ([]Row, error) {
	labels, apps := o.myApps()
	var jobs []cpuJob
	for _, app := range apps {
		for _, lat := range fig1Latencies {
			jobs = append(jobs, cpuJob{app, cpuUnordered, lat}, cpuJob{app, cpuBaseline, lat})
		}
	}
	res, err := cpuSweep(ctx, o, jobs, false)
	if err != nil {
		return nil, err
	}
	const exp = "cosplay-fig1"
	var rows []Row
	for k, app := range apps {
		for _, lat := range fig1Latencies {
			un := float64(res[cpuJob{app, cpuUnordered, lat}].cycles)
			base := float64(res[cpuJob{app, cpuBaseline, lat}].cycles)
			rows = append(rows, Row{exp, labels[k], "bmo=" + strconv.Itoa(lat), "slowdown", base / un})
		}
	}
	for _, lat := range fig1Latencies {
		rows = minMax(o, rows, exp, "bmo="+strconv.Itoa(lat), "slowdown")
	}
	return rows, nil
}

// fig14Threads are Fig. 14's thread counts, one thread per core.
var fig14Threads = []int{1, 2, 3, 4, 5, 6, 7, 8}

func runCosplayFig14(ctx context.Context, o Options) ([]Row, error) {
	labels, apps := o.myApps()
	ld := hwmodel.BMOs()[2].Cycles // LD, 200 cycles
	base := func(n int) coro.Config { return coro.Config{Mode: coro.Baseline, Window: 1, Cores: n} }
	cos := func(n int) []coro.Config {
		cs := windowed(coro.COSPlay, o.windows(cosplayWindows))
		for i := range cs {
			cs[i].Cores = n
		}
		return cs
	}
	var jobs []cpuJob
	for _, app := range apps {
		for _, n := range fig14Threads {
			jobs = append(jobs, cpuJob{app, base(n), ld})
			for _, c := range cos(n) {
				jobs = append(jobs, cpuJob{app, c, ld})
			}
		}
	}
	res, err := cpuSweep(ctx, o, jobs, false)
	if err != nil {
		return nil, err
	}
	const exp = "cosplay-fig14"
	var rows []Row
	for k, app := range apps {
		one := float64(res[cpuJob{app, base(1), ld}].cycles)
		for _, n := range fig14Threads {
			cfg := "threads=" + strconv.Itoa(n)
			b := float64(res[cpuJob{app, base(n), ld}].cycles)
			bc, cy := best(res, app, ld, cos(n))
			rows = append(rows,
				Row{exp, labels[k], cfg, "baseline_throughput", one / b},
				Row{exp, labels[k], cfg, "cosplay_throughput", one / float64(cy)},
				Row{exp, labels[k], cfg, "speedup", b / float64(cy)},
				Row{exp, labels[k], cfg, "best_window", float64(bc.Window)})
		}
	}
	for _, n := range fig14Threads {
		rows = minMax(o, rows, exp, "threads="+strconv.Itoa(n), "speedup")
	}
	return rows, nil
}
