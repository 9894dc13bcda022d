// Command pmbench runs scopedpm's experiments and prints their results as
// tables or long-format CSV.
//
//	go run ./bench/cmd/pmbench                 # the quick default set, as tables
//	go run ./bench/cmd/pmbench -list           # what experiments there are
//	go run ./bench/cmd/pmbench -exp engine -format csv
//	go run ./bench/cmd/pmbench keys            # the hwmodel parameters -set takes
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pkg/profile"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/scopedpm/scopedpm/bench"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/internal/testkit/speed"
)

func main() {
	bench.ChildMain() // a side of an experiment that runs it in a process of its own
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "pmbench:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode is 0 for success and 2 for anything else: bad flags, a failed
// run, a file that cannot be written, -h.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	return 2
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "keys" {
		if len(args) > 1 {
			return fmt.Errorf("keys takes no arguments, got %q", args[1:])
		}
		return writeKeys(stdout)
	}
	if len(args) > 0 && args[0] == "merge" {
		return runMerge(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("pmbench", flag.ContinueOnError)
	// A bad flag is one line (main prints the error); -h prints the usage.
	fs.SetOutput(io.Discard)
	list := fs.Bool("list", false, "list the experiments and exit")
	exps := fs.String("exp", "", "comma-separated experiments to run (default: the quick default set)")
	quick := fs.Bool("quick", false, "small inputs (seconds, not minutes); the default set always runs quick. Quick numbers can differ from paper scale: every table header and CSV row says which size it is")
	smoke := fs.Bool("smoke", false, "the smallest inputs where an experiment has them (the SBRP and COSPlay figures, the *-vs-pebble comparisons): a check that the harness runs, not a measurement; implies -quick")
	format := fs.String("format", "table", "output format: table or csv")
	paper := fs.Bool("paper", false, "print the papers' reported values beside ours, with the ratio ours/paper (tables, CSV and figures)")
	var sets multiFlag
	fs.Var(&sets, "set", "hwmodel override key=value, repeatable (e.g. -set nvm.write_latency_cycles=500); -set help or pmbench keys lists the keys")
	out := fs.String("out", "", "also write per experiment <experiment>.csv and its figure as <experiment>.svg and <experiment>.png (PNG at 150 dpi) to this directory")
	sweep := fs.String("sweep", "", "run the experiments once per value of one hwmodel key, key=v1,v2,... (e.g. nvm.write_latency_cycles=200,400,800); every row's config ends with the value it ran at")
	shard := fs.String("shard", "", "run only part i of n of each sweep, as i/n (0-based), for a batch scheduler")
	window := fs.String("window", "", "comma-separated window sizes the COSPlay experiments try for COSPlay, SBatch and FreeSwitch (each reports its best; one size pins it); default: their own sweeps")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this directory")
	memprofile := fs.String("memprofile", "", "write a memory profile to this directory")
	usage := func() {
		fmt.Fprint(stderr, `pmbench runs scopedpm's experiments: the papers' figures (SBRP, GPM, the scoped
persist barrier paper) on the simulated machines of hwmodel, and measurements of
scopedpm itself. It prints a table per experiment (or long-format CSV), says on
stderr and in every header at which input size it ran (quick: small inputs, in
seconds; paper: the papers' sizes, minutes), and with -paper prints the values
the papers report beside ours. With no -exp it runs the default set, quick.
Exit status: 0 success, 2 bad usage or a failed run.

Usage: pmbench [flags]
       pmbench keys      list the hwmodel parameters -set takes
       pmbench merge [-format table|csv] [-out DIR] FILES...
                         join the CSVs of -shard i/n runs: every aggregate, paper
                         ratio and figure recomputed as one unsharded run's

`)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
	}
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return err
		}
		return fmt.Errorf("%w (pmbench -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *list {
		return writeList(stdout)
	}
	if slices.Contains(sets, "help") {
		return writeKeys(stdout)
	}
	if *format != "table" && *format != "csv" {
		return fmt.Errorf("unknown -format %q (want table or csv)", *format)
	}
	selected, err := bench.Select(*exps)
	if err != nil {
		return err
	}
	opts := bench.Options{Set: sets}
	if *shard != "" {
		i, n, ok := strings.Cut(*shard, "/")
		var err1, err2 error
		opts.Shard, err1 = strconv.Atoi(i)
		opts.Shards, err2 = strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || opts.Shards < 1 || opts.Shard < 0 || opts.Shard >= opts.Shards {
			return fmt.Errorf("bad -shard %q: want i/n with 0 <= i < n", *shard)
		}
	}
	if *window != "" {
		for _, f := range strings.Split(*window, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 1<<16 {
				return fmt.Errorf("bad -window %q: want window sizes from 1 to 65536, comma-separated", *window)
			}
			opts.Windows = append(opts.Windows, n)
		}
	}
	// A bad key or value, for any preset the experiments use, is found
	// before anything runs.
	if err := bench.CheckSet(selected, sets); err != nil {
		return err
	}
	sweepSets, err := sweepValues(*sweep, sets, selected, *paper)
	if err != nil {
		return err
	}
	if *cpuprofile != "" && *memprofile != "" {
		return fmt.Errorf("-cpuprofile and -memprofile exclude each other: profile one at a time")
	}
	// Every directory is checked before the run, so that nothing computed
	// is lost to a bad path afterwards.
	for _, d := range [][2]string{{"-out", *out}, {"-cpuprofile", *cpuprofile}, {"-memprofile", *memprofile}} {
		if err := checkDir(d[0], d[1]); err != nil {
			return err
		}
	}
	if *exps == "" || *smoke {
		*quick = true
	}
	switch {
	case *cpuprofile != "":
		defer profile.Start(profile.CPUProfile, profile.ProfilePath(*cpuprofile), profile.Quiet).Stop()
	case *memprofile != "":
		defer profile.Start(profile.MemProfile, profile.ProfilePath(*memprofile), profile.Quiet).Stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts.Quick, opts.Smoke = *quick, *smoke
	changed := changedNote(sets, *sweep)
	fmt.Fprintf(stderr, "pmbench: running %s at %s size%s%s\n", names(selected), opts.SizeName(), changed, sizeNote(*exps == "", *quick))
	f := bench.Format{Size: opts.SizeName(), Paper: *paper, Set: sets, Shard: *shard}
	if len(sweepSets) > 0 {
		f.Sweep, _, _ = strings.Cut(sweepSets[0], "=")
	}
	for i, e := range selected {
		bar := newProgress(stderr, e.Name)
		opts.Progress = bar.update
		wall, cpu := time.Now(), speed.CPUTime()+speed.ChildrenCPUTime()
		rows, err := runSwept(ctx, e, opts, sweepSets)
		bar.finish()
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		// What the experiment cost the host: CPU time is the process's
		// user+system time over every thread (parallel sweeps and the
		// garbage collector included) and its sides' processes'
		// (load-vs-pebble), so on a loaded machine it says more than the
		// wall time does.
		fmt.Fprintf(stderr, "%s [%s size]: %.1f s wall, %.1f s CPU\n", e.Name, opts.SizeName(),
			time.Since(wall).Seconds(), (speed.CPUTime() + speed.ChildrenCPUTime() - cpu).Seconds())
		if e.Summary != nil {
			fmt.Fprintf(stderr, "%s: %s\n", e.Name, e.Summary(rows))
		}
		if err := emit(stdout, *format, *out, i == 0, e, rows, f, changed); err != nil {
			return err
		}
	}
	return nil
}

// emit prints one experiment's rows as a table or CSV (first: the first
// experiment printed) and, with out, writes its CSV and figures there.
// Results are printed before files are written: a failed write loses
// nothing that was computed.
func emit(stdout io.Writer, format, out string, first bool, e bench.Experiment, rows []bench.Row, f bench.Format, changed string) error {
	if format == "csv" {
		f.Header = first
		if err := bench.WriteShardCSV(stdout, e.Name, rows, f); err != nil {
			return err
		}
	} else {
		if !first {
			fmt.Fprintln(stdout)
		}
		src := source(e, " (%s)")
		if strings.HasPrefix(e.Description, source(e, "%s")) {
			src = "" // the description says it already
		}
		fmt.Fprintf(stdout, "== %s [%s size%s]%s: %s\n", e.Name, f.Size, changed, src, e.Description)
		if err := bench.WriteTable(stdout, rows, f); err != nil {
			return err
		}
	}
	if out != "" {
		return writeOut(out, e, rows, f, changed)
	}
	return nil
}

// changedNote is what the table header, stderr and figure title say of a
// machine changed by -set or -sweep ("" for none).
func changedNote(sets []string, sweep string) string {
	changed := ""
	if len(sets) > 0 {
		changed = ", on a machine changed by -set " + strings.Join(sets, ", -set ")
	}
	if sweep != "" {
		changed += ", swept over -sweep " + sweep
	}
	return changed
}

// runMerge is pmbench merge: it joins shard CSVs and prints what one
// unsharded run would have.
func runMerge(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pmbench merge", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	format := fs.String("format", "table", "output format: table or csv")
	out := fs.String("out", "", "also write <experiment>.csv and its figure (.svg and .png) per experiment to this directory")
	// Flags may come before or after the files.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stderr, "Usage: pmbench merge [-format table|csv] [-out DIR] FILES...\n\nJoins the CSVs of the shards of a -shard i/n -format csv run (or their -out CSVs) and prints\nwhat one unsharded run would have: every aggregate, the papers' ratios and the figures\nrecomputed from the joined rows.\n\n")
				fs.SetOutput(stderr)
				fs.PrintDefaults()
				return err
			}
			return fmt.Errorf("merge: %w (pmbench merge -h lists the flags)", err)
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) == 0 {
		return errors.New("merge: no files (pmbench merge FILES... [-out DIR])")
	}
	if *format != "table" && *format != "csv" {
		return fmt.Errorf("unknown -format %q (want table or csv)", *format)
	}
	if err := checkDir("-out", *out); err != nil {
		return err
	}
	var readers []io.Reader
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		defer fh.Close()
		readers = append(readers, fh)
	}
	merged, err := bench.Merge(readers...)
	if err != nil {
		return err
	}
	for i, m := range merged {
		sweep := ""
		if m.Format.Sweep != "" {
			var vals []string
			for _, r := range m.Rows {
				if i := strings.LastIndex(r.Config, " "+m.Format.Sweep+"="); i >= 0 && !slices.Contains(vals, r.Config[i+len(m.Format.Sweep)+2:]) {
					vals = append(vals, r.Config[i+len(m.Format.Sweep)+2:])
				}
			}
			sweep = m.Format.Sweep + "=" + strings.Join(vals, ",")
		}
		changed := changedNote(m.Format.Set, sweep)
		fmt.Fprintf(stderr, "pmbench merge: %s at %s size%s, from %d files\n", m.Experiment.Name, m.Format.Size, changed, len(files))
		if err := emit(stdout, *format, *out, i == 0, m.Experiment, m.Rows, m.Format, changed); err != nil {
			return err
		}
	}
	return nil
}

// sweepValues checks -sweep key=v1,v2,... against the -set overrides and
// the selected experiments and returns one override per value (nil
// without -sweep).
func sweepValues(sweep string, sets []string, selected []bench.Experiment, paper bool) ([]string, error) {
	if sweep == "" {
		return nil, nil
	}
	key, vals, ok := strings.Cut(sweep, "=")
	key = hwmodel.CanonicalKey(strings.TrimSpace(key))
	if !ok || key == "" || strings.TrimSpace(vals) == "" {
		return nil, fmt.Errorf("bad -sweep %q: want key=v1,v2,...", sweep)
	}
	if paper {
		return nil, fmt.Errorf("-sweep and -paper exclude each other: the papers' values are for their own machine")
	}
	for _, kv := range sets {
		if k, _, _ := strings.Cut(kv, "="); hwmodel.CanonicalKey(strings.TrimSpace(k)) == key {
			return nil, fmt.Errorf("-sweep %s and -set %s name the same key", key, kv)
		}
	}
	for _, e := range selected {
		if e.NoSet {
			return nil, fmt.Errorf("-sweep does not apply to experiment %s (it runs no hwmodel configuration)", e.Name)
		}
		if slices.Contains(e.Sweeps, key) {
			return nil, fmt.Errorf("-sweep %s: experiment %s sweeps it itself", key, e.Name)
		}
	}
	var out []string
	for _, v := range strings.Split(vals, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return nil, fmt.Errorf("bad -sweep %q: an empty value (a stray comma?)", sweep)
		}
		kv := key + "=" + v
		if err := bench.CheckPresets(selected, append(slices.Clone(sets), kv)); err != nil {
			return nil, fmt.Errorf("-sweep: %w", err)
		}
		out = append(out, kv)
	}
	return out, nil
}

// runSwept runs e once, or once per -sweep override with every row's
// config ending in the override it ran at.
func runSwept(ctx context.Context, e bench.Experiment, o bench.Options, sweep []string) ([]bench.Row, error) {
	if len(sweep) == 0 {
		return e.Run(ctx, o)
	}
	var rows []bench.Row
	base := o.Set
	for _, kv := range sweep {
		o.Set = append(slices.Clone(base), kv)
		got, err := e.Run(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("at %s: %w", kv, err)
		}
		for i := range got {
			got[i].Config += " " + kv
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

// names lists the experiments' names.
func names(es []bench.Experiment) string {
	var n []string
	for _, e := range es {
		n = append(n, e.Name)
	}
	return strings.Join(n, ", ")
}

// sizeNote explains the size on stderr when the user did not pick it.
func sizeNote(defaultSet, quick bool) string {
	switch {
	case defaultSet:
		return " (the default set runs quick, small inputs; quick numbers can differ from paper scale: run -exp NAME without -quick for paper scale, add -paper for the papers' values)"
	case !quick:
		return " (paper-scale inputs; -quick runs small ones in seconds)"
	}
	return " (small inputs; quick numbers can differ from paper scale)"
}

// source is "SBRP Fig. 6" for an experiment that reproduces a paper's
// figure, put into layout, or "" for one that measures scopedpm itself.
func source(e bench.Experiment, layout string) string {
	if e.Paper == "" {
		return ""
	}
	return fmt.Sprintf(layout, strings.TrimSpace(e.Paper+" "+e.Figure))
}

// writeList prints every experiment with the paper and figure it
// reproduces.
func writeList(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "experiment\treproduces\tdefault\tdescription")
	for _, e := range bench.All() {
		def := ""
		if e.Default {
			def = "yes"
		}
		src := source(e, "%s")
		if src == "" {
			src = "(scopedpm itself)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, src, def, e.Description)
	}
	return tw.Flush()
}

// writeKeys lists every hwmodel parameter -set takes: its unit, its value
// in pm-near (and in the presets where it differs), what it is and where
// the value comes from.
func writeKeys(w io.Writer) error {
	base, err := hwmodel.Preset("pm-near")
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "key\tunit\tpm-near\tother presets\tpaths\tmeaning (source of pm-near's value)")
	for _, k := range hwmodel.KeyInfos() {
		def, err := base.Value(k.Key)
		if err != nil {
			return err
		}
		var others []string
		for _, name := range hwmodel.Presets() {
			c, err := hwmodel.Preset(name)
			if err != nil {
				return err
			}
			if v, err := c.Value(k.Key); err == nil && v != def && k.Key != "name" {
				others = append(others, name+"="+v)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s (%s)\n", k.Key, k.Unit, def, strings.Join(others, " "), k.Paths, k.Doc, k.Source)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, "\nSet any of them with -set key=value (repeatable); experiments apply the overrides to every configuration they build.")
	return err
}

// checkDir makes sure files can be written to dir ("" is not used).
func checkDir(flagName, dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", flagName, err)
	}
	f, err := os.CreateTemp(dir, ".pmbench-*")
	if err != nil {
		return fmt.Errorf("%s: %w", flagName, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (f *multiFlag) String() string { return strings.Join(*f, ",") }

func (f *multiFlag) Set(v string) error {
	*f = append(*f, v)
	return nil
}

// writeOut writes the experiment's CSV and its figure, as SVG and PNG,
// into dir; changed (", on a machine changed by -set ...") goes into the
// figure's title.
func writeOut(dir string, e bench.Experiment, rows []bench.Row, f bench.Format, changed string) error {
	file, err := os.Create(filepath.Join(dir, e.Name+".csv"))
	if err != nil {
		return err
	}
	f.Header = true
	if err := bench.WriteShardCSV(file, e.Name, rows, f); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	title := fmt.Sprintf("%s%s, %s size", e.Name, source(e, " (%s)"), f.Size)
	if changed != "" {
		title += "\n" + strings.TrimPrefix(changed, ", ")
		if f.Paper {
			title += "\n(the papers' marks are for their own machine, not this one)"
		}
	}
	for _, ext := range []string{".svg", ".png"} {
		if err := bench.WriteFigure(filepath.Join(dir, e.Name+ext), title, rows, f.Paper); err != nil {
			return err
		}
	}
	return nil
}

// progress is a progress bar on stderr, shown only when stderr is a
// terminal.
type progress struct {
	bar *progressbar.ProgressBar
	max int
}

func newProgress(w io.Writer, name string) *progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(name),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())}
}

// update is called from the sweep's goroutines.
func (p *progress) update(total, done int) {
	if p.bar == nil {
		return
	}
	if total > 0 {
		p.max += total
		p.bar.ChangeMax(p.max)
	}
	if done > 0 {
		_ = p.bar.Add(done)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
