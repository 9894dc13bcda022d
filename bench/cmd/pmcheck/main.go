// Command pmcheck explores the crash states of a workload under a
// persistency model and reports the violations it finds.
//
//	go run ./bench/cmd/pmcheck -workload reduction-narrow -model sbrp -states 10000 -seed 1
//	go run ./bench/cmd/pmcheck -workload reduction -mutate
//	go run ./bench/cmd/pmcheck -workload reduction -advise
//
// It prints "checked N crash states, M violations" and exits 1 if there are
// violations (or, with -mutate, surviving mutants are only reported).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/pkg/profile"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// errViolations makes the command exit 1.
var errViolations = errors.New("violations found")

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, errViolations) && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "pmcheck:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode is 0 for success, 1 for violations found and 2 for anything
// else (bad flags, a workload that cannot run, -h).
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errViolations):
		return 1
	}
	return 2
}

// errUsage is a bad combination of flags or arguments.
var errUsage = errors.New("usage")

// checkProfileDir makes sure a profile can be written to dir before the
// run starts (pkg/profile would exit 1, which means "violations" here).
func checkProfileDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: -cpuprofile: %w", errUsage, err)
	}
	f, err := os.CreateTemp(dir, ".pmcheck-*")
	if err != nil {
		return fmt.Errorf("%w: -cpuprofile: %w", errUsage, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pmcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.Bool("list", false, "list the workloads and exit")
	name := fs.String("workload", "", "workload to check (see -list)")
	modelName := fs.String("model", "sbrp", "persistency model: strict, epoch, gpm, sbrp, scoped-barrier, x86, cosplay, none, writeback-adr, writeback-pct (restudy, restudy-pct: their former names)")
	states := fs.Int("states", 10000, "crash states to check at most (with -timed: cycles per launch; 0 there means every cycle where the durable image changes)")
	seed := fs.Uint64("seed", 1, "seed for random crash states; a failure replays with the same seed")
	strategy := fs.String("strategy", "mixed", "mixed (prefixes, then exhaustive if it fits, else single drops and random), prefix, random, exhaustive or single (each persist lost alone)")
	size := fs.String("size", "tiny", "input size: tiny, quick or paper")
	mutate := fs.Bool("mutate", false, "mutation analysis: narrow each scoped verb, drop each OFence, report which mutants the exploration kills")
	advise := fs.Bool("advise", false, "scope advisor: the narrowest scope at each site under which every explored state recovers")
	preset := fs.String("preset", "pm-near", "hwmodel preset for -advise speedups (timed under -model, or SBRP for a CPU model)")
	timed := fs.String("timed", "", "instead of exploring the model's crash states, crash the hwmodel preset named here (pm-near, pm-far, ...) at -states cycles of each launch of the run")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this directory")
	fs.Usage = func() {
		fmt.Fprint(stderr, `pmcheck checks that a PM workload recovers from crashes. It records one run,
builds the persist memory order a persistency model allows, crashes the run in
states that order allows (or, with -timed, at cycles of a hwmodel timing run),
recovers each crash image and checks the workload's invariant. A violation is
shrunk to the fewest lost persists and explained: the lost persist, the durable
one that got ahead of it, and the verb or scope that should have ordered them.
Exit status: 0 no violation, 1 violations found, 2 bad usage or a failed run.

Usage: pmcheck -workload NAME [flags]

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	modes := 0
	for _, on := range []bool{*mutate, *advise, *timed != ""} {
		if on {
			modes++
		}
	}
	switch {
	case modes > 1:
		return fmt.Errorf("%w: -mutate, -advise and -timed exclude each other", errUsage)
	case *states < 0 || *states == 0 && *timed == "":
		return fmt.Errorf("%w: -states %d: want at least 1 (0 only with -timed: every cycle where the durable image changes)", errUsage, *states)
	}
	if *cpuprofile != "" {
		if err := checkProfileDir(*cpuprofile); err != nil {
			return err
		}
	}
	if *list {
		for _, n := range workloads.Names() {
			fmt.Fprintf(stdout, "%-18s %s\n", n[0], n[1])
		}
		return nil
	}
	if *name == "" {
		return fmt.Errorf("-workload is required (see -list)")
	}
	model, err := crash.ParseModel(*modelName)
	if err != nil {
		return err
	}
	strat, err := crash.ParseStrategy(*strategy)
	if err != nil {
		return fmt.Errorf("unknown -strategy %q: %w", *strategy, err)
	}
	sz, ok := map[string]workloads.Size{"tiny": workloads.Tiny, "quick": workloads.Quick, "paper": workloads.Paper}[*size]
	if !ok {
		return fmt.Errorf("unknown -size %q", *size)
	}
	if *cpuprofile != "" {
		defer profile.Start(profile.CPUProfile, profile.ProfilePath(*cpuprofile), profile.Quiet).Stop()
	}
	w, err := workloads.New(*name, sz)
	if err != nil {
		return err
	}
	gpu := pm.DefaultGPU()
	// Long runs say what they are doing: a line per phase on stderr, and a
	// count of checked states when stderr is a terminal.
	status := func(format string, args ...any) { fmt.Fprintf(stderr, "pmcheck: "+format+"\n", args...) }
	if *timed != "" {
		status("crashing %s (%s size) on hwmodel %s at up to %d cycles per launch", w.Name(), *size, *timed, *states)
		return runTimed(stdout, w, *timed, *modelName, *states, *seed)
	}
	status("recording one run of %s (%s size)", w.Name(), *size)
	rec, err := crash.Record(w, gpu)
	if err != nil {
		return err
	}
	bar := newCounter(stderr)
	defer bar.finish()
	cfg := crash.Config{Model: model, States: *states, Seed: *seed, Strategy: strat, Shrink: true, Progress: bar.add}
	switch {
	case *mutate:
		// Mutation analysis asks which broken variants the exploration
		// catches: the unmutated program must pass first, or every mutant
		// would count as killed.
		status("%d events recorded; checking the unmutated program under %s, then %d mutants, up to %d crash states each", len(rec.Events), model, len(crash.Mutants(rec.Events)), *states)
		base, err := rec.Explore(w, crash.Build(rec.Events, model), cfg)
		if err != nil {
			return err
		}
		if len(base.Violations) > 0 {
			return fmt.Errorf("%w: %s already fails under %s (%d violations) before any mutation: run pmcheck -workload %s without -mutate to see why", errUsage, w.Name(), model, len(base.Violations), *name)
		}
		res, err := rec.Mutate(w, cfg)
		if err != nil {
			return err
		}
		killed := 0
		for _, r := range res {
			verdict := "survived"
			if r.Killed {
				verdict = "killed"
				killed++
			}
			fmt.Fprintf(stdout, "%-8s %v (%d states)\n", verdict, r.Mutant, r.Checked)
		}
		fmt.Fprintf(stdout, "%d of %d mutants killed\n", killed, len(res))
		return nil
	case *advise:
		status("%d events recorded; trying narrower scopes at each scoped site under %s, up to %d crash states each", len(rec.Events), model, *states)
		adv, err := rec.Advise(w, cfg)
		if err != nil {
			return err
		}
		status("timing the recommended scopes on hwmodel %s", *preset)
		hw, err := hwmodel.Preset(*preset)
		if err != nil {
			return err
		}
		// Speedups are timed under the model checked, where hwmodel times
		// it (a CPU model falls back to SBRP).
		hm, err := hwmodel.ParseModel(model.String())
		if err != nil {
			hm = hwmodel.SBRP
		}
		newBE := func() (pm.Backend, error) { return hwmodel.New(hw, hm) }
		if err := crash.Speedups(w, adv, newBE); err != nil {
			return err
		}
		for _, a := range adv {
			note := "keep"
			switch {
			case a.Recommended() < a.Current:
				note = "narrow"
			case a.Recommended() > a.Current:
				note = "widen"
			}
			fmt.Fprintf(stdout, "%-6s at %-20s %-6s -> %-6s %-6s speedup %.3f on %s/%s (persistence needs %s, visibility %s; %d states)\n",
				a.Kind, a.Site, a.Current, a.Recommended(), note, a.Speedup, *preset, hm, a.Narrowest, a.Floor, a.Checked)
		}
		return nil
	}
	status("%d events recorded; exploring up to %d crash states under %s", len(rec.Events), *states, model)
	g := crash.Build(rec.Events, model)
	rep, err := rec.Explore(w, g, cfg)
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s under %s, seed %d: %d persists; %s", w.Name(), model, *seed, rep.Persists, rep.Summary())
	if rep.Complete {
		fmt.Fprint(stdout, " (every allowed state)")
	}
	fmt.Fprintln(stdout)
	for _, v := range rep.Violations {
		fmt.Fprint(stdout, v.Explanation)
		fmt.Fprintf(stdout, "  replay: pmcheck -workload %s -size %s -model %s -strategy %s -states %d -seed %d\n", *name, *size, model, *strategy, *states, v.Seed)
	}
	if len(rep.Violations) > 0 {
		return errViolations
	}
	return nil
}

// runTimed crashes the workload on hwmodel at many cycles.
func runTimed(stdout io.Writer, w crash.Workload, preset, modelName string, states int, seed uint64) error {
	cfg, err := hwmodel.Preset(preset)
	if err != nil {
		return err
	}
	model, err := hwmodel.ParseModel(modelName)
	if err != nil {
		return err
	}
	newBE := func() (crash.TimedBackend, error) { return hwmodel.New(cfg, model) }
	rep, err := crash.CheckTimed(w, newBE, cfg.GPULimits(), states, seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s on hwmodel %s/%s, seed %d: %s\n", w.Name(), preset, model, seed, rep.Summary())
	for _, v := range rep.Violations {
		fmt.Fprint(stdout, v.Explanation)
	}
	if len(rep.Violations) > 0 {
		return errViolations
	}
	return nil
}

// counter counts checked crash states on stderr, shown only when stderr is
// a terminal; it only ever goes up.
type counter struct {
	bar *progressbar.ProgressBar
}

func newCounter(w io.Writer) *counter {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &counter{}
	}
	return &counter{bar: progressbar.NewOptions(-1, progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("crash states checked"), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())}
}

func (c *counter) add() {
	if c.bar != nil {
		_ = c.bar.Add(1)
	}
}

func (c *counter) finish() {
	if c.bar != nil {
		_ = c.bar.Finish()
		c.bar = nil
	}
}
