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
	// Set holds hwmodel overrides ("nvm.write_latency_cycles=500") that
	// experiments on hwmodel apply to every configuration they build.
	Set []string
	// Shard, Shards run only the part of a sweep with index%Shards ==
	// Shard (Shards 0 or 1: all of it), so any batch scheduler can run the
	// parts. Sweeps shard by application; summary rows (geomean) are left
	// to the unsharded run.
	Shard, Shards int
	// Progress, if set, is told of work to do (total > 0) and work done
	// (done > 0) as a sweep runs.
	Progress func(total, done int)
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
	Run   func(ctx context.Context, o Options) ([]Row, error)
}

var registry []Experiment

// Register adds an experiment; it panics on a duplicate name, which is a
// programming error caught at init.
func Register(e Experiment) {
	if _, ok := Lookup(e.Name); ok {
		panic("bench: duplicate experiment " + e.Name)
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
		e, ok := Lookup(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("%w: %q (see -list)", ErrUnknown, n)
		}
		out = append(out, e)
	}
	return out, nil
}

// Header is the CSV header of WriteCSV.
var Header = []string{"experiment", "workload", "config", "metric", "value"}

// formatValue prints integral values (counts, cycles) in full and others
// with six significant digits.
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// WriteCSV writes rows as long-format CSV with Header.
func WriteCSV(w io.Writer, rows []Row, header bool) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(Header); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if err := cw.Write([]string{r.Experiment, r.Workload, r.Config, r.Metric, formatValue(r.Value)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable writes the rows of one experiment as a table: one line per
// workload and config, one column per metric in first-seen order.
func WriteTable(w io.Writer, rows []Row) error {
	type key struct{ workload, config string }
	var keys []key
	var metrics []string
	vals := map[key]map[string]float64{}
	for _, r := range rows {
		k := key{r.Workload, r.Config}
		if vals[k] == nil {
			vals[k] = map[string]float64{}
			keys = append(keys, k)
		}
		vals[k][r.Metric] = r.Value
		if !slices.Contains(metrics, r.Metric) {
			metrics = append(metrics, r.Metric)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "workload\tconfig\t%s\t\n", strings.Join(metrics, "\t"))
	for _, k := range keys {
		cells := make([]string, len(metrics))
		for i, m := range metrics {
			if v, ok := vals[k][m]; ok {
				cells[i] = formatValue(v)
			} else {
				cells[i] = "-"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", k.workload, k.config, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
