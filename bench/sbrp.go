package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// The six applications of SBRP Table 2, by their label in the figures.
var sbrpApps = []struct{ label, workload string }{
	{"gpKVS", "gpkvs-sbrp"}, {"HM", "hm-sbrp"}, {"SRAD", "srad"},
	{"Red", "reduction"}, {"MQ", "multiqueue"}, {"Scan", "scan"},
}

// sysConfig is one bar of a figure: a preset, a model and overrides.
type sysConfig struct {
	name    string
	preset  string
	model   hwmodel.Model
	edit    edit // the configuration's own change to the preset (nil: none)
	promote bool // block-scope PRel/PAcq run at device scope (scope.WithPromotion)
}

var (
	gpmFar    = sysConfig{"gpm", "pm-far", hwmodel.GPM, nil, false}
	epochFar  = sysConfig{"epoch-far", "pm-far", hwmodel.Epoch, nil, false}
	sbrpFar   = sysConfig{"sbrp-far", "pm-far", hwmodel.SBRP, nil, false}
	epochNear = sysConfig{"epoch-near", "pm-near", hwmodel.Epoch, nil, false}
	sbrpNear  = sysConfig{"sbrp-near", "pm-near", hwmodel.SBRP, nil, false}
)

func with(c sysConfig, name string, e edit) sysConfig {
	c.name = name
	c.edit = edits(c.edit, e)
	return c
}

// promoted is c "without scopes": its block-scope PRel and PAcq run at
// device scope (SBRP Figure 7).
func promoted(c sysConfig, name string) sysConfig {
	c.name, c.promote = name, true
	return c
}

func init() {
	for _, e := range []Experiment{
		{Name: "sbrp-fig6", Paper: "SBRP", Presets: []string{"pm-far", "pm-near"}, Figure: "Fig. 6", Description: "SBRP Fig. 6: speedup over epoch-far of gpm, epoch-far, sbrp-far, epoch-near, sbrp-near per app, and the geometric mean", Default: true, Run: runFig6},
		{Name: "sbrp-fig7", Paper: "SBRP", Presets: []string{"pm-far", "pm-near"}, Figure: "Fig. 7", Description: "SBRP Fig. 7: SBRP speedup over epoch with and without scopes (block scope promoted to device) for apps with intra-block PMO", Run: runFig7},
		{Name: "sbrp-fig8", Paper: "SBRP", Presets: []string{"pm-far", "pm-near"}, Figure: "Fig. 8", Description: "SBRP Fig. 8: L1 read misses on PM data, normalised to epoch-far", Run: runFig8},
		{Name: "sbrp-fig9", Paper: "SBRP", Presets: []string{"pm-far-eadr"}, Figure: "Fig. 9", Description: "SBRP Fig. 9: sbrp-far speedup over epoch-far with eADR", Run: runFig9},
		{Name: "sbrp-fig10a", Paper: "SBRP", Presets: []string{"pm-near"}, Figure: "Fig. 10(a)", Sweeps: []string{"persist.buffer_entries"}, Description: "SBRP Fig. 10a: sbrp-near speedup over epoch-near against persist-buffer entries", Run: runFig10a},
		{Name: "sbrp-fig10b", Paper: "SBRP", Presets: []string{"pm-near"}, Figure: "Fig. 10(b)", Sweeps: []string{"nvm.read_gbps", "nvm.write_gbps"}, Description: "SBRP Fig. 10b: sbrp-near speedup over epoch-near with the NVM's read and write bandwidth at 50, 100 and 200%", Run: runFig10b},
		{Name: "sbrp-fig10c", Paper: "SBRP", Presets: []string{"pm-near"}, Figure: "Fig. 10(c)", Sweeps: []string{"persist.window"}, Description: "SBRP Fig. 10c: sbrp-near speedup over epoch-near against the flush window", Run: runFig10c},
		{Name: "sbrp-fig11", Paper: "SBRP", Presets: []string{"pm-near"}, Figure: "Fig. 11", Description: "SBRP Fig. 11: recovery time after a crash just before the transaction completes (gpKVS, HM, Red, MQ: the workload's commit word; the others: just before the run's last persist), normalised to epoch-near", Run: runFig11},
	} {
		Register(e)
	}
}

// workloadSize is the workloads' size for the options.
func (o Options) workloadSize() workloads.Size {
	switch {
	case o.Quick && o.Smoke:
		return workloads.Tiny
	case o.Quick:
		return workloads.Quick
	}
	return workloads.Paper
}

// appRun is what one run of an application on one configuration measured.
type appRun struct {
	cycles     uint64 // the application's kernels until their persists are durable, Setup excluded
	l1PMMisses uint64
	recovery   uint64 // recovery cycles after a crash (when asked)
	atCommit   bool   // the crash was just before the commit word's persist
}

// appRunKey is everything a run of runApp depends on: the workload and its
// size, the machine's whole configuration (preset, the experiment's edit
// and -set applied), the model, the scope promotion and whether it crashes
// and recovers. Two bars of different experiments with the same key are
// the same simulation (sbrp-fig8 runs sbrp-fig6's five configurations, the
// sensitivity sweeps of sbrp-fig10 each run epoch-near and sbrp-near at the
// preset's own value), which runs once per process.
type appRunKey struct {
	workload         string
	size             workloads.Size
	cfg              hwmodel.Config
	model            hwmodel.Model
	promote, recover bool
}

// appRuns keeps the runs of this process by key.
var appRuns memo[appRunKey, appRun]

// runApp sets up and runs workload on a fresh machine of configuration c
// and, if recover is set, crashes it just before its last persist became
// durable and times the recovery on a fresh machine of the same
// configuration. A run is deterministic (TestGolden): the result of an
// earlier run of the same key (appRunKey) in this process is returned
// instead of simulating it again; a failed run is not kept.
func runApp(workload string, c sysConfig, o Options, recover bool) (appRun, error) {
	cfg, err := o.config(c.preset, c.edit)
	if err != nil {
		return appRun{}, err
	}
	k := appRunKey{workload, o.workloadSize(), cfg, c.model, c.promote, recover}
	return appRuns.do(k, func() (appRun, error) { return simulateApp(workload, c, o, recover) })
}

// simulateApp is runApp without the kept runs.
func simulateApp(workload string, c sysConfig, o Options, recover bool) (appRun, error) {
	w, err := workloads.New(workload, o.workloadSize())
	if err != nil {
		return appRun{}, err
	}
	be, err := o.backend(c.preset, c.model, c.edit)
	if err != nil {
		return appRun{}, err
	}
	if !recover {
		// Nothing crashes this run: no durable image to keep.
		if err := be.KeepNoImage(); err != nil {
			return appRun{}, err
		}
	}
	probe := &commitProbe{Backend: be}
	m, err := pm.NewMachine(probe)
	if err != nil {
		return appRun{}, err
	}
	if c.promote {
		m.SetLaunchDefaults(pm.LaunchDefaults{Promote: []pm.ScopeChange{{From: pm.Block, To: pm.Device}}})
	}
	if err := w.Setup(m); err != nil {
		return appRun{}, fmt.Errorf("%s setup: %w", workload, err)
	}
	if cp, ok := w.(crash.CommitPointer); ok && recover {
		if probe.addr, err = cp.CommitPoint(m); err != nil {
			return appRun{}, err
		}
		probe.watch = true
	}
	// The run lasts until its last persist is durable: a model must not
	// look fast by leaving its persists to drain after the kernel ends.
	before, t0 := be.Stats(), be.Now()
	if err := w.Run(m); err != nil {
		return appRun{}, fmt.Errorf("%s on %s: %w", workload, c.name, err)
	}
	after := be.Stats()
	r := appRun{cycles: be.Now() - t0, l1PMMisses: after.L1PMMisses - before.L1PMMisses}
	if !recover {
		return r, w.Check(m)
	}
	// The crash point: just before the transaction completes (the last
	// persist to the workload's commit word became durable), else just
	// before the run's last persist did.
	img := probe.img
	r.atCommit = img != nil
	if img == nil {
		if img, err = be.CrashAt(be.Now() - 1); err != nil {
			return r, err
		}
	}
	be2, err := o.backend(c.preset, c.model, c.edit)
	if err != nil {
		return r, err
	}
	m2, err := pm.Reopen(img, be2)
	if err != nil {
		return r, err
	}
	t1 := be2.Now()
	if err := w.Recover(m2); err != nil {
		return r, fmt.Errorf("%s recovery on %s: %w", workload, c.name, err)
	}
	r.recovery = be2.Now() - t1
	return r, w.Check(m2)
}

// commitProbe wraps hwmodel and, when watching, keeps the durable image
// of the cycle before the latest durable persist to the commit word addr,
// looking at each launch when it ends.
type commitProbe struct {
	*hwmodel.Backend
	watch bool
	addr  pm.Addr
	img   *pm.Image
}

// Unwrap returns the wrapped backend (pm.Wrapper).
func (p *commitProbe) Unwrap() pm.Backend { return p.Backend }

// End ends the launch and looks for a persist to the commit word in it.
func (p *commitProbe) End() (pm.Stats, error) {
	st, err := p.Backend.End()
	if err != nil || !p.watch {
		return st, err
	}
	var ack uint64
	found := false
	p.Durability(func(a pm.Addr, size int, at uint64) {
		if a < p.addr+8 && p.addr < a+pm.Addr(size) {
			ack, found = at, true
		}
	})
	if found && ack > p.LastStart() {
		img, cerr := p.CrashAt(ack - 1)
		if cerr != nil {
			return st, cerr
		}
		p.img = img
	}
	return st, nil
}

// sweep runs every (app, config) pair in parallel, at most GOMAXPROCS at a
// time, and returns the results indexed [app][config]. Apps not yet in the
// workloads registry are left out.
func sweep(ctx context.Context, apps []string, configs []sysConfig, o Options, recover bool) (map[string][]appRun, error) {
	out := map[string][]appRun{}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	// The whole sweep is announced before any of it runs (g.Go blocks at
	// the limit), so that a progress bar never moves backwards.
	var mine []string
	for k, app := range apps {
		if _, err := workloads.New(app, workloads.Tiny); errors.Is(err, workloads.ErrUnknown) || !o.mine(k) {
			continue
		}
		mine = append(mine, app)
	}
	o.progress(len(mine)*len(configs), 0)
	for _, app := range mine {
		runs := make([]appRun, len(configs))
		out[app] = runs
		for i, c := range configs {
			g.Go(func() error {
				if err := ctx.Err(); err != nil {
					return err
				}
				r, err := runApp(app, c, o, recover)
				runs[i] = r
				o.progress(0, 1)
				return err
			})
		}
	}
	return out, g.Wait()
}

func appNames(filter func(label string) bool) (labels, names []string) {
	for _, a := range sbrpApps {
		if filter == nil || filter(a.label) {
			labels = append(labels, a.label)
			names = append(names, a.workload)
		}
	}
	return labels, names
}

// ratioRows emits, per app and config, metric = f(run of config, run of
// base config) and a geomean row per config.
func ratioRows(o Options, exp, metric string, labels, names []string, configs []sysConfig, res map[string][]appRun, f func(r, base appRun) float64, base func(runs []appRun, i int) appRun) []Row {
	var rows []Row
	logs := make([]float64, len(configs))
	n := 0
	for k, app := range names {
		runs, ok := res[app]
		if !ok {
			continue
		}
		n++
		for i, c := range configs {
			v := f(runs[i], base(runs, i))
			rows = append(rows, Row{exp, labels[k], c.name, metric, v})
			logs[i] += math.Log(v)
		}
	}
	if n > 0 && o.Shards <= 1 {
		for i, c := range configs {
			rows = append(rows, Row{exp, "geomean", c.name, metric, math.Exp(logs[i] / float64(n))})
		}
	}
	return rows
}

func speedup(r, base appRun) float64 { return float64(base.cycles) / float64(r.cycles) }

func runFig6(ctx context.Context, o Options) ([]Row, error) {
	configs := []sysConfig{gpmFar, epochFar, sbrpFar, epochNear, sbrpNear}
	labels, names := appNames(nil)
	res, err := sweep(ctx, names, configs, o, false)
	if err != nil {
		return nil, err
	}
	return ratioRows(o, "sbrp-fig6", "speedup", labels, names, configs, res, speedup,
		func(runs []appRun, _ int) appRun { return runs[1] }), nil
}

func runFig7(ctx context.Context, o Options) ([]Row, error) {
	// Pairs (epoch, sbrp, sbrp without scopes) per placement; the speedup
	// is over epoch of the same placement.
	configs := []sysConfig{
		epochFar, sbrpFar, promoted(sbrpFar, "sbrp-far-noscope"),
		epochNear, sbrpNear, promoted(sbrpNear, "sbrp-near-noscope"),
	}
	labels, names := appNames(func(l string) bool { return l == "Red" || l == "MQ" || l == "Scan" })
	res, err := sweep(ctx, names, configs, o, false)
	if err != nil {
		return nil, err
	}
	rows := ratioRows(o, "sbrp-fig7", "speedup", labels, names, configs, res, speedup,
		func(runs []appRun, i int) appRun { return runs[i/3*3] })
	return dropConfigs(rows, "epoch-far", "epoch-near"), nil
}

func dropConfigs(rows []Row, names ...string) []Row {
	var out []Row
	for _, r := range rows {
		keep := true
		for _, n := range names {
			keep = keep && r.Config != n
		}
		if keep {
			out = append(out, r)
		}
	}
	return out
}

func runFig8(ctx context.Context, o Options) ([]Row, error) {
	configs := []sysConfig{gpmFar, epochFar, sbrpFar, epochNear, sbrpNear}
	labels, names := appNames(nil)
	res, err := sweep(ctx, names, configs, o, false)
	if err != nil {
		return nil, err
	}
	return ratioRows(o, "sbrp-fig8", "l1_pm_read_misses_norm", labels, names, configs, res,
		func(r, base appRun) float64 { return float64(max(r.l1PMMisses, 1)) / float64(max(base.l1PMMisses, 1)) },
		func(runs []appRun, _ int) appRun { return runs[1] }), nil
}

func runFig9(ctx context.Context, o Options) ([]Row, error) {
	configs := []sysConfig{
		{"epoch-far-eadr", "pm-far-eadr", hwmodel.Epoch, nil, false},
		{"sbrp-far-eadr", "pm-far-eadr", hwmodel.SBRP, nil, false},
	}
	labels, names := appNames(nil)
	res, err := sweep(ctx, names, configs, o, false)
	if err != nil {
		return nil, err
	}
	rows := ratioRows(o, "sbrp-fig9", "speedup", labels, names, configs, res, speedup,
		func(runs []appRun, _ int) appRun { return runs[0] })
	return dropConfigs(rows, "epoch-far-eadr"), nil
}

// sensitivity runs epoch-near and sbrp-near at each value of key and emits
// the speedup of sbrp over epoch at that value.
func sensitivity(ctx context.Context, o Options, exp, key string, field func(*hwmodel.Config) *int, values []int) ([]Row, error) {
	var points []sensPoint
	for _, v := range values {
		points = append(points, sensPoint{fmt.Sprint(v), func(c *hwmodel.Config) { *field(c) = v }})
	}
	return sensitivityOf(ctx, o, exp, key, points)
}

// sensPoint is one point of a sensitivity sweep: its label and its change
// to the preset.
type sensPoint struct {
	label string
	edit  edit
}

// sensitivityOf runs epoch-near and sbrp-near at each point and returns
// sbrp-near's speedup over epoch-near at the same point, configs named
// "<key>=<label>".
func sensitivityOf(ctx context.Context, o Options, exp, key string, points []sensPoint) ([]Row, error) {
	var configs []sysConfig
	for _, p := range points {
		configs = append(configs,
			with(epochNear, "epoch-near/"+p.label, p.edit),
			with(sbrpNear, p.label, p.edit))
	}
	labels, names := appNames(nil)
	res, err := sweep(ctx, names, configs, o, false)
	if err != nil {
		return nil, err
	}
	rows := ratioRows(o, exp, "speedup", labels, names, configs, res, speedup,
		func(runs []appRun, i int) appRun { return runs[i/2*2] })
	var out []Row
	for _, r := range rows {
		if len(r.Config) < 6 || r.Config[:6] != "epoch-" {
			r.Config = key + "=" + r.Config
			out = append(out, r)
		}
	}
	return out, nil
}

// runFig10b scales the NVM's read and write bandwidth of pm-near together
// to 50, 100 and 200% (the SBRP artifact's bw_half and bw_double models
// halve or double both ratios to device memory).
func runFig10b(ctx context.Context, o Options) ([]Row, error) {
	var points []sensPoint
	for _, pct := range []int{50, 100, 200} {
		f := float64(pct) / 100
		points = append(points, sensPoint{fmt.Sprint(pct), func(c *hwmodel.Config) {
			c.NVM.ReadGBps *= f
			c.NVM.WriteGBps *= f
		}})
	}
	return sensitivityOf(ctx, o, "sbrp-fig10b", "nvm_bandwidth_pct", points)
}

func runFig10a(ctx context.Context, o Options) ([]Row, error) {
	return sensitivity(ctx, o, "sbrp-fig10a", "persist.buffer_entries",
		func(c *hwmodel.Config) *int { return &c.Persist.BufferEntries }, []int{32, 64, 128, 256})
}

func runFig10c(ctx context.Context, o Options) ([]Row, error) {
	return sensitivity(ctx, o, "sbrp-fig10c", "persist.window",
		func(c *hwmodel.Config) *int { return &c.Persist.Window }, []int{2, 4, 6, 8, 10, 12})
}

func runFig11(ctx context.Context, o Options) ([]Row, error) {
	configs := []sysConfig{epochNear, sbrpNear}
	labels, names := appNames(nil)
	res, err := sweep(ctx, names, configs, o, true)
	if err != nil {
		return nil, err
	}
	rows := ratioRows(o, "sbrp-fig11", "recovery_norm", labels, names, configs, res,
		func(r, base appRun) float64 { return float64(max(r.recovery, 1)) / float64(max(base.recovery, 1)) },
		func(runs []appRun, _ int) appRun { return runs[0] })
	// The raw cycles too: a ratio of two tiny recoveries says little.
	for k, app := range names {
		if runs, ok := res[app]; ok {
			for i, c := range configs {
				at := 0.0
				if runs[i].atCommit {
					at = 1
				}
				rows = append(rows, Row{"sbrp-fig11", labels[k], c.name, "recovery_cycles", float64(runs[i].recovery)},
					Row{"sbrp-fig11", labels[k], c.name, "crash_before_commit", at})
			}
		}
	}
	return rows, nil
}
