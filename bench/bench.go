// Package bench is scopedpm's experiment registry: each experiment
// reproduces a measurement (a paper's figure or a property of the runtime)
// and returns long-format rows, printed by bench/cmd/pmbench as tables or
// CSV with the header experiment,workload,config,metric,value.
package bench

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// ErrUnknown is returned for an experiment name that is not registered.
var ErrUnknown = errors.New("bench: unknown experiment")

// Row is one measurement.
type Row struct {
	Experiment string
	Workload   string
	Config     string
	Metric     string
	Value      float64
}

// Options are the settings every experiment receives.
type Options struct {
	// Quick asks for small inputs (seconds, not minutes).
	Quick bool
	// Smoke, with Quick, asks the experiments that support it for their
	// smallest inputs (workloads.Tiny): a test that the harness runs and
	// its rows are well formed, not a measurement (the figures' numbers
	// mean nothing at that size). The SBRP and COSPlay experiments support
	// it, and the wall-clock comparisons with Pebble (1,024 keys, 10 ms
	// slices).
	Smoke bool
	// Set holds hwmodel overrides ("nvm.write_latency_cycles=500") that
	// experiments on hwmodel apply to every configuration they build.
	Set []string
	// Windows, if set, are the window sizes the COSPlay experiments try
	// for COSPlay, SBatch and FreeSwitch (each reports its best among
	// them), instead of their own sweeps; one window pins it.
	Windows []int
	// Shard, Shards run only the part of a sweep with index%Shards ==
	// Shard (Shards 0 or 1: all of it), so any batch scheduler can run the
	// parts. Sweeps shard by application; summary rows (geomean) are left
	// to the unsharded run, or to Merge, which joins the shards' CSVs.
	Shard, Shards int
	// Progress, if set, is told of work to do (total > 0) and work done
	// (done > 0) as a sweep runs.
	Progress func(total, done int)

	// presets, when declared, are the presets the running experiment says
	// it builds machines from (Experiment.Presets); Register sets them, and
	// Options.config refuses any other.
	presets  []string
	declared bool
}

// SizeName is the input size the options ask for: "smoke", "quick" or
// "paper".
func (o Options) SizeName() string {
	switch {
	case o.Quick && o.Smoke:
		return "smoke"
	case o.Quick:
		return "quick"
	}
	return "paper"
}

// mine reports whether sweep item i belongs to this shard.
func (o Options) mine(i int) bool { return o.Shards <= 1 || i%o.Shards == o.Shard }

func (o Options) progress(total, done int) {
	if o.Progress != nil {
		o.Progress(total, done)
	}
}

// Experiment is a registered experiment.
type Experiment struct {
	Name        string
	Description string
	// Default experiments run when pmbench is given no -exp.
	Default bool
	// NoSet marks an experiment that runs no hwmodel configuration, so
	// that -set would be silently ignored: pmbench refuses the pair.
	NoSet bool
	// Sweeps are the hwmodel keys the experiment varies itself: a -set of
	// one would replace its sweep (every row would show the -set value),
	// so pmbench refuses the pair.
	Sweeps []string
	// Presets are the hwmodel presets the experiment builds its machines
	// from: pmbench checks a -set against each before anything runs
	// (CheckSet), and a registered experiment that builds a machine from
	// another preset fails.
	Presets []string
	// Paper is the short name of the paper the experiment reproduces (see
	// REFERENCES.md), empty for a measurement of scopedpm itself; Figure
	// names the figure or table ("Fig. 6").
	Paper, Figure string
	Run           func(ctx context.Context, o Options) ([]Row, error)
	// Summary, where set, says in one line what the rows of a run add up
	// to (hw-validate: how many of its points lie within 1.5x of the
	// measurement); pmbench prints it on stderr after the run.
	Summary func(rows []Row) string
}

var registry []Experiment

// Register adds an experiment; it panics on a duplicate name, which is a
// programming error caught at init.
func Register(e Experiment) {
	if _, ok := Lookup(e.Name); ok {
		panic("bench: duplicate experiment " + e.Name)
	}
	if run := e.Run; run != nil {
		presets := slices.Clone(e.Presets)
		e.Run = func(ctx context.Context, o Options) ([]Row, error) {
			o.presets, o.declared = presets, true
			return run(ctx, o)
		}
	}
	registry = append(registry, e)
	slices.SortFunc(registry, func(a, b Experiment) int { return strings.Compare(a.Name, b.Name) })
}

// All returns the registered experiments in name order.
func All() []Experiment { return slices.Clone(registry) }

// Lookup returns the experiment named name.
func Lookup(name string) (Experiment, bool) {
	for _, e := range registry {
		if e.Name == name {
			return e, true
		}
	}
	return Experiment{}, false
}

// Select returns the experiments named in a comma-separated list, or the
// default ones if the list is empty.
func Select(list string) ([]Experiment, error) {
	if strings.TrimSpace(list) == "" {
		var out []Experiment
		for _, e := range registry {
			if e.Default {
				out = append(out, e)
			}
		}
		return out, nil
	}
	var out []Experiment
	for _, n := range strings.Split(list, ",") {
		if strings.TrimSpace(n) == "" {
			return nil, fmt.Errorf("%w: an empty name in %q (a stray comma?)", ErrUnknown, list)
		}
		e, ok := Lookup(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("%w: %q (see -list)", ErrUnknown, n)
		}
		out = append(out, e)
	}
	return out, nil
}

// Header returns the CSV header of WriteCSV: the long format plus the input
// size every row was measured at. Each call returns a fresh slice.
func Header() []string {
	return []string{"experiment", "workload", "config", "metric", "value", "size"}
}

// PaperHeader returns what WriteCSV adds to Header when asked for the
// papers' values: the value the paper reports for the row, ours over it,
// and where in the paper it is. Each call returns a fresh slice.
func PaperHeader() []string { return []string{"paper_value", "ratio", "paper_source"} }

// Format says how WriteCSV and WriteTable print rows.
type Format struct {
	// Header asks WriteCSV for the header line.
	Header bool
	// Size labels every CSV row ("quick" or "paper", Options.SizeName).
	Size string
	// Paper adds the papers' values (PaperValues) beside ours: CSV gets the
	// PaperHeader columns, and a value the paper states relative to another
	// config ("sbrp-near over epoch-near") gets a row of its own with our
	// value computed the same way; a table gets a comparison block.
	Paper bool
	// Set are the -set overrides the rows were measured with: the table's
	// comparison with the papers says its ratios are not against the
	// papers' machine, and the CSV gets an overrides column (see
	// CSVHeader) whose ratio column is named ratio_changed_machine.
	Set []string
	// Sweep is the key of a -sweep, whose value ends every row's config:
	// the CSV's overrides column names it too.
	Sweep string
	// Shard ("i/n") marks the rows as one shard's of a -shard run: the CSV
	// gets the columns shard and value_exact (the value at full precision),
	// so that pmbench merge can join the shards and recompute the
	// aggregates exactly, and leaves out the papers' relative values (merge
	// recomputes them).
	Shard string
}

// Overridden reports whether the rows ran on a machine changed by -set or
// -sweep.
func (f Format) Overridden() bool { return len(f.Set) > 0 || f.Sweep != "" }

// CSVHeader returns the header WriteCSV writes for f: Header; then
// "overrides" if the machine was changed by -set or -sweep (the default
// CSV has no such column); then PaperHeader if f.Paper, its ratio named
// "ratio_changed_machine" on a machine changed by -set (a ratio to the
// papers' machine, not a like-for-like comparison); then "shard" and
// "value_exact" for a shard's rows.
func CSVHeader(f Format) []string {
	h := Header()
	if f.Overridden() {
		h = append(h, "overrides")
	}
	if f.Paper {
		p := PaperHeader()
		if len(f.Set) > 0 {
			p[1] = "ratio_changed_machine"
		}
		h = append(h, p...)
	}
	if f.Shard != "" {
		h = append(h, "shard", "value_exact")
	}
	return h
}

// overrides is the overrides column of a row of config: the -set
// overrides, then the -sweep value the row ran at.
func (f Format) overrides(config string) string {
	o := slices.Clone(f.Set)
	if f.Sweep != "" {
		if i := strings.LastIndex(config, " "+f.Sweep+"="); i >= 0 {
			o = append(o, config[i+1:])
		}
	}
	return strings.Join(o, " ")
}

var nan = math.NaN()

// formatValue prints integral values (counts, cycles) in full and others
// with six significant digits.
func formatValue(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// comparisons returns the papers' values beside ours for rows (all of one
// experiment), or nil if f does not ask for them.
func comparisons(rows []Row, f Format) ([]Comparison, error) {
	if !f.Paper || len(rows) == 0 {
		return nil, nil
	}
	vals, err := PaperValuesFor(rows[0].Experiment)
	if err != nil {
		return nil, err
	}
	return Compare(rows, vals), nil
}

// Source is where the value is in its paper: "SBRP §7.2, Fig. 6".
func (p PaperValue) Source() string { return p.Paper + " " + p.Where }

// WriteCSV writes the rows of one experiment as long-format CSV with the
// columns of CSVHeader(f); the default (no -set, -sweep, -paper or shard)
// is exactly Header's.
func WriteCSV(w io.Writer, rows []Row, f Format) error {
	cmp, err := comparisons(rows, f)
	if err != nil {
		return err
	}
	type key struct{ workload, config, metric string }
	direct := map[key]Comparison{}
	for _, c := range cmp {
		if c.Over == "" && c.Found {
			direct[key{c.Workload, c.Config, c.Metric}] = c
		}
	}
	cw := csv.NewWriter(w)
	if f.Header {
		if err := cw.Write(CSVHeader(f)); err != nil {
			return err
		}
	}
	for _, r := range rows {
		rec := []string{r.Experiment, r.Workload, r.Config, r.Metric, formatValue(r.Value), f.Size}
		if f.Overridden() {
			rec = append(rec, f.overrides(r.Config))
		}
		if f.Paper {
			if c, ok := direct[key{r.Workload, r.Config, r.Metric}]; ok {
				rec = append(rec, formatValue(c.Value), formatValue(c.Ratio()), c.Source())
			} else {
				rec = append(rec, "", "", "")
			}
		}
		if f.Shard != "" {
			rec = append(rec, f.Shard, strconv.FormatFloat(r.Value, 'g', -1, 64))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	for _, c := range cmp {
		if c.Over == "" || !c.Found || f.Shard != "" {
			continue
		}
		rec := []string{c.Experiment, c.Workload, c.Label(), c.Metric, formatValue(c.Ours), f.Size}
		if f.Overridden() {
			rec = append(rec, f.overrides(c.Config))
		}
		rec = append(rec, formatValue(c.Value), formatValue(c.Ratio()), c.Source())
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteShardCSV is WriteCSV for one shard's rows of experiment exp (with
// f.Shard set): a shard with no rows of exp (its part of the sweep is
// empty) writes one row with only the experiment, size and shard, so that
// Merge knows the shard ran.
func WriteShardCSV(w io.Writer, exp string, rows []Row, f Format) error {
	if len(rows) > 0 || f.Shard == "" {
		return WriteCSV(w, rows, f)
	}
	h := CSVHeader(f)
	rec := make([]string, len(h))
	rec[0], rec[5], rec[len(h)-2] = exp, f.Size, f.Shard
	cw := csv.NewWriter(w)
	if f.Header {
		if err := cw.Write(h); err != nil {
			return err
		}
	}
	if err := cw.Write(rec); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable writes the rows of one experiment as a table: one line per
// workload and config, one column per metric in first-seen order; with
// f.Paper a second table puts each of the papers' values beside ours.
func WriteTable(w io.Writer, rows []Row, f Format) error {
	cmp, err := comparisons(rows, f)
	if err != nil {
		return err
	}
	if err := writeTable(w, rows); err != nil {
		return err
	}
	if !f.Paper {
		return nil
	}
	if len(cmp) == 0 {
		_, err := fmt.Fprintln(w, "-- the papers report no value for this experiment (see bench/paper/values.csv)")
		return err
	}
	fmt.Fprintf(w, "-- the papers' values beside ours (%s size; ratio = ours/paper)\n", f.Size)
	if len(f.Set) > 0 {
		fmt.Fprintf(w, "-- ours ran on a machine changed by -set %s: the ratios are not against the papers' machine\n", strings.Join(f.Set, ", -set "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tconfig\tmetric\tours\tpaper\tratio\tsource\t")
	for _, c := range cmp {
		ours := nan
		if c.Found {
			ours = c.Ours
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.Workload, c.Label(), c.Metric,
			formatValue(ours), formatValue(c.Value), formatRatio(c.Ratio()), c.Source())
	}
	return tw.Flush()
}

func formatRatio(r float64) string {
	if math.IsNaN(r) {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

func writeTable(w io.Writer, rows []Row) error {
	type key struct{ workload, config string }
	var keys []key
	vals := map[key]map[string]float64{}
	has := map[key][]string{} // the key's metrics, in order
	for _, r := range rows {
		k := key{r.Workload, r.Config}
		if vals[k] == nil {
			vals[k] = map[string]float64{}
			keys = append(keys, k)
		}
		vals[k][r.Metric] = r.Value
		if !slices.Contains(has[k], r.Metric) {
			has[k] = append(has[k], r.Metric)
		}
	}
	// One table per set of metrics that rows share, in order of first
	// appearance, so no table is mostly empty cells.
	var groups [][]key
	var sets [][]string
	for _, k := range keys {
		i := slices.IndexFunc(sets, func(m []string) bool { return slices.Equal(m, has[k]) })
		if i < 0 {
			i = len(sets)
			sets, groups = append(sets, has[k]), append(groups, nil)
		}
		groups[i] = append(groups[i], k)
	}
	for g, ks := range groups {
		// Columns as wide as their widest cell; metrics past tableWidth
		// characters go to a further table with the same rows.
		first := 0
		wide := len("workload") + len("config")
		for _, k := range ks {
			wide = max(wide, len(k.workload)+len(k.config))
		}
		for first < len(sets[g]) {
			last, width := first, wide+4
			for last < len(sets[g]) {
				col := len(sets[g][last])
				for _, k := range ks {
					col = max(col, len(formatValue(vals[k][sets[g][last]])))
				}
				if last > first && width+col+2 > tableWidth {
					break
				}
				width += col + 2
				last++
			}
			if g > 0 || first > 0 {
				if _, err := fmt.Fprintln(w); err != nil {
					return err
				}
			}
			metrics := sets[g][first:last]
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "workload\tconfig\t%s\t\n", strings.Join(metrics, "\t"))
			for _, k := range ks {
				cells := make([]string, len(metrics))
				for i, m := range metrics {
					cells[i] = formatValue(vals[k][m])
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t\n", k.workload, k.config, strings.Join(cells, "\t"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			first = last
		}
	}
	return nil
}

// tableWidth is the widest a table printed by WriteTable gets, in
// characters, unless one metric's column alone is wider.
const tableWidth = 100
