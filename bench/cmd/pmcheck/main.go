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

	"github.com/scopedpm/scopedpm/examples"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
)

// errViolations makes the command exit 1.
var errViolations = errors.New("violations found")

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errViolations):
		os.Exit(1)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "pmcheck:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pmcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.Bool("list", false, "list the workloads and exit")
	name := fs.String("workload", "", "workload to check (see -list)")
	modelName := fs.String("model", "sbrp", "persistency model: strict, epoch, gpm, sbrp, scoped-barrier, x86, cosplay, none")
	states := fs.Int("states", 10000, "crash states to check at most")
	seed := fs.Uint64("seed", 1, "seed for random crash states; a failure replays with the same seed")
	strategy := fs.String("strategy", "mixed", "mixed (prefixes, then exhaustive if it fits, else random), prefix, random or exhaustive")
	size := fs.String("size", "tiny", "input size: tiny, quick or paper")
	mutate := fs.Bool("mutate", false, "mutation analysis: narrow each scoped verb, drop each OFence, report which mutants the exploration kills")
	advise := fs.Bool("advise", false, "scope advisor: the narrowest scope at each site under which every explored state recovers")
	preset := fs.String("preset", "pm-near", "hwmodel preset for -advise speedups (the model is SBRP)")
	timed := fs.String("timed", "", "instead of exploring the model's crash states, crash the hwmodel preset named here (pm-near, pm-far, ...) at -states cycles of the run")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *list {
		for _, n := range examples.Names() {
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
	strat, ok := map[string]crash.Strategy{"mixed": crash.Mixed, "prefix": crash.Prefixes, "random": crash.RandomStates, "exhaustive": crash.Exhaustive}[*strategy]
	if !ok {
		return fmt.Errorf("unknown -strategy %q", *strategy)
	}
	sz, ok := map[string]examples.Size{"tiny": examples.Tiny, "quick": examples.Quick, "paper": examples.Paper}[*size]
	if !ok {
		return fmt.Errorf("unknown -size %q", *size)
	}
	if *cpuprofile != "" {
		defer profile.Start(profile.CPUProfile, profile.ProfilePath(*cpuprofile), profile.Quiet).Stop()
	}
	w, err := examples.New(*name, sz)
	if err != nil {
		return err
	}
	gpu := pm.DefaultGPU
	if *timed != "" {
		return runTimed(stdout, w, *timed, *modelName, *states, *seed)
	}
	rec, err := crash.Record(w, gpu)
	if err != nil {
		return err
	}
	cfg := crash.Config{Model: model, States: *states, Seed: *seed, Strategy: strat, Shrink: true}
	switch {
	case *mutate:
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
		adv, err := rec.Advise(w, cfg)
		if err != nil {
			return err
		}
		hw, err := hwmodel.Preset(*preset)
		if err != nil {
			return err
		}
		newBE := func() (pm.Backend, error) { return hwmodel.New(hw, hwmodel.SBRP) }
		if err := crash.Speedups(w, adv, newBE); err != nil {
			return err
		}
		for _, a := range adv {
			note := "keep"
			if a.Recommended() < a.Current {
				note = "narrow"
			}
			fmt.Fprintf(stdout, "%-6s at %-20s %-6s -> %-6s %-6s speedup %.3f on %s/sbrp (persistence needs %s, visibility %s; %d states)\n",
				a.Kind, a.Site, a.Current, a.Recommended(), note, a.Speedup, *preset, a.Narrowest, a.Floor, a.Checked)
		}
		return nil
	}
	g := crash.Build(rec.Events, model)
	rep, err := rec.Explore(w, g, cfg)
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
