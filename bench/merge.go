package bench

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrMerge is returned when shard CSVs cannot be merged: a file that is
// not a -shard CSV, a shard missing or given twice, shards of different
// sizes, or an experiment whose shards differ and that has no rule to join
// them.
var ErrMerge = errors.New("bench: merge")

// Merged is one experiment's rows as one unsharded run would have
// returned them, joined from its shards, with the format to print them in.
type Merged struct {
	Experiment Experiment
	Rows       []Row
	Format     Format
}

// record is one row of a shard CSV with its columns beyond the long
// format.
type record struct {
	row                   Row
	size, overrides, part string
	paper                 bool
	file                  int
	// empty marks a shard that had no rows of the experiment.
	empty bool
}

// Merge joins the CSVs written by the shards of a pmbench -shard i/n
// -format csv run (or the CSVs -shard -out writes), each reader one file,
// and returns per experiment, in order of first appearance, the rows one
// unsharded run would have returned: the shards' rows in the unsharded
// order, with every aggregate (geomeans, minima and maxima over the
// benchmarks) recomputed from the joined rows at full precision (the
// shards' value_exact column). The papers' values and ratios are
// recomputed by WriteCSV and WriteTable from the merged rows. Every shard
// 0..n-1 of each experiment must be present exactly once.
func Merge(files ...io.Reader) ([]Merged, error) {
	var recs []record
	for i, f := range files {
		r, err := readShardCSV(f, i)
		if err != nil {
			return nil, fmt.Errorf("%w: file %d: %w", ErrMerge, i+1, err)
		}
		recs = append(recs, r...)
	}
	var exps []string
	byExp := map[string][]record{}
	for _, r := range recs {
		if _, ok := byExp[r.row.Experiment]; !ok {
			exps = append(exps, r.row.Experiment)
		}
		byExp[r.row.Experiment] = append(byExp[r.row.Experiment], r)
	}
	var out []Merged
	for _, name := range exps {
		m, err := mergeExperiment(name, byExp[name])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrMerge, name, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// readShardCSV reads one shard CSV (see CSVHeader).
func readShardCSV(r io.Reader, file int) ([]record, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	all, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, errors.New("empty")
	}
	col := map[string]int{}
	for i, h := range all[0] {
		col[h] = i
	}
	for _, h := range append(Header(), "shard", "value_exact") {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("no %s column: not the CSV of a -shard i/n run", h)
		}
	}
	_, paper := col["paper_value"]
	get := func(rec []string, h string) string {
		if i, ok := col[h]; ok && i < len(rec) {
			return rec[i]
		}
		return ""
	}
	var out []record
	for n, rec := range all[1:] {
		if len(rec) != len(all[0]) {
			return nil, fmt.Errorf("line %d: %d fields, the header has %d", n+2, len(rec), len(all[0]))
		}
		if get(rec, "metric") == "" && get(rec, "value_exact") == "" {
			// A shard without rows of the experiment (WriteShardCSV).
			out = append(out, record{row: Row{Experiment: get(rec, "experiment")}, size: get(rec, "size"),
				overrides: get(rec, "overrides"), part: get(rec, "shard"), paper: paper, file: file, empty: true})
			continue
		}
		v, err := strconv.ParseFloat(get(rec, "value_exact"), 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: value_exact: %w", n+2, err)
		}
		out = append(out, record{
			row:  Row{get(rec, "experiment"), get(rec, "workload"), get(rec, "config"), get(rec, "metric"), v},
			size: get(rec, "size"), overrides: get(rec, "overrides"), part: get(rec, "shard"),
			paper: paper, file: file,
		})
	}
	return out, nil
}

// mergeExperiment joins one experiment's records.
func mergeExperiment(name string, recs []record) (Merged, error) {
	e, ok := Lookup(name)
	if !ok {
		return Merged{}, fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	f := Format{Size: recs[0].size, Paper: recs[0].paper}
	n := -1
	fileOf := map[int]int{}
	for _, r := range recs {
		if r.size != f.Size {
			return Merged{}, fmt.Errorf("shards of different sizes (%s and %s)", f.Size, r.size)
		}
		if r.paper != f.Paper {
			return Merged{}, errors.New("some shards ran with -paper and some without")
		}
		i, k, err := parseShard(r.part)
		if err != nil {
			return Merged{}, err
		}
		if n >= 0 && k != n {
			return Merged{}, fmt.Errorf("shards of runs split %d and %d ways", n, k)
		}
		n = k
		if file, ok := fileOf[i]; ok && file != r.file {
			return Merged{}, fmt.Errorf("shard %d/%d given twice (files %d and %d)", i, n, file+1, r.file+1)
		}
		fileOf[i] = r.file
	}
	for i := range n {
		if _, ok := fileOf[i]; !ok {
			return Merged{}, fmt.Errorf("shard %d/%d missing", i, n)
		}
	}
	f.Set, f.Sweep = splitOverrides(recs)
	// A -sweep's values ran one after another, each with its own
	// aggregates: merge each value's rows apart, in the order they ran.
	var groups []string
	shards := map[string][][]Row{}
	for _, r := range recs {
		if r.empty {
			continue
		}
		if _, ok := shards[r.overrides]; !ok {
			groups = append(groups, r.overrides)
			shards[r.overrides] = make([][]Row, n)
		}
		i, _, _ := parseShard(r.part)
		shards[r.overrides][i] = append(shards[r.overrides][i], r.row)
	}
	var rows []Row
	for _, g := range groups {
		got, err := joinShards(e, shards[g])
		if err != nil {
			return Merged{}, err
		}
		rows = append(rows, got...)
	}
	return Merged{Experiment: e, Rows: rows, Format: f}, nil
}

func parseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("bad shard %q: want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

// splitOverrides recovers the -set overrides and the -sweep key from the
// overrides column: a sweep's value is the last override of every row and
// ends its config.
func splitOverrides(recs []record) (set []string, sweep string) {
	if recs[0].overrides == "" {
		return nil, ""
	}
	swept := true
	for _, r := range recs {
		o := strings.Fields(r.overrides)
		c := strings.Fields(r.row.Config)
		swept = swept && len(o) > 0 && len(c) > 1 && o[len(o)-1] == c[len(c)-1]
	}
	o := strings.Fields(recs[0].overrides)
	if !swept {
		return o, ""
	}
	sweep, _, _ = strings.Cut(o[len(o)-1], "=")
	return o[:len(o)-1], sweep
}

// joinShards returns the rows one unsharded run of e would, from each
// shard's rows: an experiment that shards by a rule (mergeRules); one
// every shard ran whole (it does not shard) gives its rows once, one that
// only one shard ran gives that shard's.
func joinShards(e Experiment, shards [][]Row) ([]Row, error) {
	if rule, ok := mergeRules()[e.Name]; ok {
		return rule(shards), nil
	}
	same := true
	var nonEmpty [][]Row
	for _, s := range shards {
		same = same && slices.Equal(s, shards[0])
		if len(s) > 0 {
			nonEmpty = append(nonEmpty, s)
		}
	}
	switch {
	case same:
		return shards[0], nil
	case len(nonEmpty) == 1: // an experiment that is one item of a sweep
		return nonEmpty[0], nil
	}
	return nil, fmt.Errorf("its shards differ and pmbench has no rule to join them (merge joins %s)", strings.Join(MergeableExperiments(), ", "))
}

// MergeableExperiments are the experiments whose shards Merge joins,
// besides those that do not shard (every shard runs them whole).
func MergeableExperiments() []string {
	var out []string
	for name := range mergeRules() {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// mergeRules are, per experiment that shards, how its shards' rows (each
// shard's in its order) become the unsharded run's rows.
func mergeRules() map[string]func([][]Row) []Row {
	var sbrpOrder []string
	for _, a := range sbrpApps {
		sbrpOrder = append(sbrpOrder, a.label)
	}
	var cosplayOrder []string
	for _, a := range cosplayApps {
		cosplayOrder = append(cosplayOrder, a.label)
	}
	// The SBRP figures (ratioRows): the apps in order, the ratio metric's
	// geomean per config after them, then the rows of other metrics
	// (sbrp-fig11's raw cycles) per app.
	sbrp := func(metric string) func([][]Row) []Row {
		return func(shards [][]Row) []Row {
			main, rest := splitMetric(slices.Concat(shards...), metric)
			main = byWorkload(main, sbrpOrder)
			return slices.Concat(main, geomeanRows(main), byWorkload(rest, sbrpOrder))
		}
	}
	// The COSPlay figures (minMax): the benchmarks in order, then min and
	// max of metric per config, in the order the configs first appear.
	cosplay := func(metric string) func([][]Row) []Row {
		return func(shards [][]Row) []Row {
			rows := byWorkload(slices.Concat(shards...), cosplayOrder)
			var configs []string
			for _, r := range rows {
				if r.Metric == metric && !slices.Contains(configs, r.Config) {
					configs = append(configs, r.Config)
				}
			}
			for _, c := range configs {
				rows = minMax(Options{}, rows, rows[0].Experiment, c, metric)
			}
			return rows
		}
	}
	// The re-study's figures (linFig): the kernels in order, then the
	// average overhead of the kernels the paper has, per scheme.
	lin := func(cat string) func([][]Row) []Row {
		return func(shards [][]Row) []Row {
			kernels, _ := linKernels(cat)
			var order []string
			inPaper := map[string]bool{}
			for _, k := range kernels {
				order = append(order, k.info.Name)
				inPaper[k.info.Name] = k.info.InPaper()
			}
			rows := byWorkload(slices.Concat(shards...), order)
			var configs []string
			sum := map[string]float64{}
			n := map[string]int{}
			for _, r := range rows {
				if r.Metric != "overhead_pct" || !inPaper[r.Workload] {
					continue
				}
				if _, ok := n[r.Config]; !ok {
					configs = append(configs, r.Config)
				}
				sum[r.Config] += r.Value
				n[r.Config]++
			}
			for _, c := range configs {
				rows = append(rows, Row{rows[0].Experiment, "average", c, "overhead_pct", sum[c] / float64(n[c])})
			}
			return rows
		}
	}
	return map[string]func([][]Row) []Row{
		"lin-fig1":      lin("S"),
		"lin-fig2":      lin("LS"),
		"lin-fig3":      lin("LS"),
		"lin-fig4":      lin("LL"),
		"lin-fig5":      lin("KV"),
		"lin-fig6":      lin("PoW"),
		"gope-fig5":     interleaveShards,
		"gope-fig7":     interleaveShards,
		"sbrp-fig6":     sbrp("speedup"),
		"sbrp-fig7":     sbrp("speedup"),
		"sbrp-fig8":     sbrp("l1_pm_read_misses_norm"),
		"sbrp-fig9":     sbrp("speedup"),
		"sbrp-fig10a":   sbrp("speedup"),
		"sbrp-fig10b":   sbrp("speedup"),
		"sbrp-fig10c":   sbrp("speedup"),
		"sbrp-fig11":    sbrp("recovery_norm"),
		"cosplay-fig1":  cosplay("slowdown"),
		"cosplay-fig8":  cosplay("speedup"),
		"cosplay-fig14": cosplay("speedup"),
		"cosplay-fig12": cosplay("median_over_cosplay"),
		"cosplay-fig9": func(shards [][]Row) []Row {
			return byWorkload(slices.Concat(shards...), cosplayOrder)
		},
		"cosplay-fig11": func(shards [][]Row) []Row {
			return fig11Aggregates(byWorkload(slices.Concat(shards...), cosplayOrder))
		},
		// Fig. 13's gaps are the inverses of its rows' performance over
		// Unordered (Baseline's and COSPlay's, not FreeSwitch's).
		"cosplay-fig13": func(shards [][]Row) []Row {
			rows := byWorkload(slices.Concat(shards...), cosplayOrder)
			var gaps []Row
			for _, r := range rows {
				_, c, _ := strings.Cut(r.Config, " ")
				if r.Metric == "perf_over_unordered" && c != "freeswitch" {
					gaps = append(gaps, Row{r.Experiment, r.Workload, c, "slowdown_vs_unordered", 1 / r.Value})
				}
			}
			return fig13Gaps(Options{}, rows, gaps)
		},
	}
}

// splitMetric splits rows into those of metric and the others, each in
// order.
func splitMetric(rows []Row, metric string) (of, rest []Row) {
	for _, r := range rows {
		if r.Metric == metric {
			of = append(of, r)
		} else {
			rest = append(rest, r)
		}
	}
	return of, rest
}

// byWorkload orders rows by their workload's place in order (stably: a
// workload's rows keep their order), workloads not in order last.
func byWorkload(rows []Row, order []string) []Row {
	rank := func(w string) int {
		if i := slices.Index(order, w); i >= 0 {
			return i
		}
		return len(order)
	}
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b Row) int { return cmp.Compare(rank(a.Workload), rank(b.Workload)) })
	return rows
}

// geomeanRows returns a "geomean" row per config of rows (all of one
// metric), in order of first appearance, computed as ratioRows does.
func geomeanRows(rows []Row) []Row {
	var configs []string
	logs := map[string]float64{}
	count := map[string]int{}
	for _, r := range rows {
		if _, ok := count[r.Config]; !ok {
			configs = append(configs, r.Config)
		}
		logs[r.Config] += math.Log(r.Value)
		count[r.Config]++
	}
	var out []Row
	for _, c := range configs {
		out = append(out, Row{rows[0].Experiment, "geomean", c, rows[0].Metric, math.Exp(logs[c] / float64(count[c]))})
	}
	return out
}

// interleaveShards joins the shards of an experiment without aggregates whose
// sweep items are each a run of rows of one workload: item k is shard
// k%n's (k/n)-th run.
func interleaveShards(shards [][]Row) []Row {
	blocks := make([][][]Row, len(shards))
	for i, s := range shards {
		for j, r := range s {
			if j == 0 || r.Workload != s[j-1].Workload {
				blocks[i] = append(blocks[i], nil)
			}
			blocks[i][len(blocks[i])-1] = append(blocks[i][len(blocks[i])-1], r)
		}
	}
	var out []Row
	for k := 0; ; k++ {
		i, j := k%len(shards), k/len(shards)
		if j >= len(blocks[i]) {
			return out
		}
		out = append(out, blocks[i][j]...)
	}
}
