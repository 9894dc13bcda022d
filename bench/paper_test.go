package bench_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

// Every value of the embedded table belongs to a registered experiment of
// the same paper and says where in the paper it is (the parser checks the
// form of where).
func TestPaperValuesTable(t *testing.T) {
	vals, err := bench.PaperValues()
	require.NoError(t, err)
	require.NotEmpty(t, vals)
	for _, v := range vals {
		e, ok := bench.Lookup(v.Experiment)
		require.True(t, ok, "%+v: no such experiment", v)
		require.Equal(t, e.Paper, v.Paper, "%+v", v)
		require.NotEmpty(t, v.Note, "%+v", v)
		require.False(t, math.IsNaN(v.Value), "%+v", v)
	}
}

func TestCompare(t *testing.T) {
	rows := []bench.Row{
		{"x", "a", "base", "speedup", 1},
		{"x", "a", "fast", "speedup", 1.5},
		{"x", "b", "fast", "speedup", 3},
		{"x", "b", "base", "speedup", 2},
	}
	for _, tc := range []struct {
		name  string
		val   bench.PaperValue
		wls   []string
		ours  []float64
		found bool
	}{
		{"direct", bench.PaperValue{Workload: "a", Config: "fast", Metric: "speedup", Value: 1.2}, []string{"a"}, []float64{1.5}, true},
		{"over", bench.PaperValue{Workload: "b", Config: "fast", Over: "base", Metric: "speedup", Value: 1}, []string{"b"}, []float64{1.5}, true},
		{"every workload", bench.PaperValue{Workload: "*", Config: "fast", Metric: "speedup", Value: 2}, []string{"a", "b"}, []float64{1.5, 3}, true},
		{"missing workload", bench.PaperValue{Workload: "c", Config: "fast", Metric: "speedup", Value: 2}, []string{"c"}, []float64{0}, false},
		{"missing metric", bench.PaperValue{Workload: "a", Config: "fast", Metric: "cycles", Value: 2}, []string{"a"}, []float64{0}, false},
		{"missing over", bench.PaperValue{Workload: "a", Config: "fast", Over: "slow", Metric: "speedup", Value: 2}, []string{"a"}, []float64{0}, false},
	} {
		got := bench.Compare(rows, []bench.PaperValue{tc.val})
		require.Len(t, got, len(tc.wls), tc.name)
		for i, c := range got {
			require.Equal(t, tc.wls[i], c.Workload, tc.name)
			require.Equal(t, tc.found, c.Found, tc.name)
			if tc.found {
				require.InDelta(t, tc.ours[i], c.Ours, 1e-12, tc.name)
				require.InDelta(t, tc.ours[i]/tc.val.Value, c.Ratio(), 1e-12, tc.name)
			} else {
				require.True(t, math.IsNaN(c.Ratio()), tc.name)
			}
		}
	}
}

// A figure has a panel per metric, the legend, the paper's marks and a
// reference line on ratio panels, in each format.
func TestWriteFigure(t *testing.T) {
	rows := []bench.Row{
		{"sbrp-fig6", "Red", "epoch-far", "speedup", 1},
		{"sbrp-fig6", "Red", "sbrp-far", "speedup", 1.4},
		{"sbrp-fig6", "Red", "epoch-far", "cycles", 250000},
		{"sbrp-fig6", "Red", "sbrp-far", "cycles", 180000},
	}
	dir := t.TempDir()
	svg := filepath.Join(dir, "f.svg")
	require.NoError(t, bench.WriteFigure(svg, "title", rows, true))
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	s := string(b)
	for _, want := range []string{">speedup<", ">cycles<", ">paper&#39;s value<", ">250k<", ">sbrp-far<"} {
		require.Contains(t, s, want)
	}
	require.NotContains(t, s, "250000.00")
	require.Contains(t, s, "stroke-dasharray", "the speedup panel has a reference line at 1")

	require.NoError(t, bench.WriteFigure(filepath.Join(dir, "f.png"), "title", rows, false))
	require.NoError(t, bench.WriteFigure(filepath.Join(dir, "f.pdf"), "title", rows, false))
	require.ErrorIs(t, bench.WriteFigure(filepath.Join(dir, "f.gif"), "title", rows, false), bench.ErrFigure)
	require.ErrorIs(t, bench.WriteFigure(filepath.Join(dir, "g.svg"), "title", nil, false), bench.ErrFigure)
}

// CSV rows carry the size; -paper adds the paper's value and the ratio.
func TestWriteCSVSize(t *testing.T) {
	rows := []bench.Row{{"sbrp-fig9", "geomean", "sbrp-far-eadr", "speedup", 1.2}}
	var b strings.Builder
	require.NoError(t, bench.WriteCSV(&b, rows, bench.Format{Header: true, Size: "paper"}))
	require.Equal(t, "experiment,workload,config,metric,value,size\nsbrp-fig9,geomean,sbrp-far-eadr,speedup,1.2,paper\n", b.String())
	b.Reset()
	require.NoError(t, bench.WriteCSV(&b, rows, bench.Format{Size: "quick", Paper: true}))
	require.Equal(t, "sbrp-fig9,geomean,sbrp-far-eadr,speedup,1.2,quick,1.14,1.05263,\"SBRP §7.3, Fig. 9\"\n", b.String())
}

// The CSV's columns: the default is Header's alone; -set and -sweep add
// overrides, -paper on a changed machine names its ratio so, a shard adds
// its name and the exact value.
func TestCSVHeader(t *testing.T) {
	for _, tc := range []struct {
		f    bench.Format
		want string
	}{
		{bench.Format{}, "experiment,workload,config,metric,value,size"},
		{bench.Format{Paper: true}, "experiment,workload,config,metric,value,size,paper_value,ratio,paper_source"},
		{bench.Format{Set: []string{"a=1"}}, "experiment,workload,config,metric,value,size,overrides"},
		{bench.Format{Sweep: "a"}, "experiment,workload,config,metric,value,size,overrides"},
		{bench.Format{Set: []string{"a=1"}, Paper: true}, "experiment,workload,config,metric,value,size,overrides,paper_value,ratio_changed_machine,paper_source"},
		{bench.Format{Shard: "0/2"}, "experiment,workload,config,metric,value,size,shard,value_exact"},
	} {
		require.Equal(t, tc.want, strings.Join(bench.CSVHeader(tc.f), ","), "%+v", tc.f)
	}
	rows := []bench.Row{{"e", "w", "c a=2", "m", 1.0 / 3}}
	var b strings.Builder
	require.NoError(t, bench.WriteCSV(&b, rows, bench.Format{Set: []string{"b=1"}, Sweep: "a", Shard: "1/2", Size: "quick"}))
	require.Equal(t, "e,w,c a=2,m,0.333333,quick,b=1 a=2,1/2,0.3333333333333333\n", b.String())
}

// What a figure's panels say: a ratio's baseline on its axis and in the
// legend, units, a log scale where values span more than 100x, the
// paper's relative values in a panel of their own, and the paper's layout
// for gpm-fig11 (two panels, not one per metric).
func TestFigureLabels(t *testing.T) {
	fig6 := []bench.Row{
		{"sbrp-fig6", "geomean", "gpm", "speedup", 0.9},
		{"sbrp-fig6", "geomean", "epoch-far", "speedup", 1},
		{"sbrp-fig6", "geomean", "sbrp-far", "speedup", 1.2},
		{"sbrp-fig6", "geomean", "epoch-near", "speedup", 1.4},
		{"sbrp-fig6", "geomean", "sbrp-near", "speedup", 1.7},
	}
	micro := []bench.Row{
		{"micro-persist", "persist-dfence", "pm-near/strict", "cycles", 160},
		{"micro-persist", "stream", "pm-near/strict", "cycles", 61000},
	}
	gpm := []bench.Row{
		{"gpm-fig11", "gpKVS", "pm-far/gpm/hcl", "batch_cycles", 62490},
		{"gpm-fig11", "gpKVS", "pm-far/gpm", "hcl_speedup", 22},
		{"gpm-fig11", "gpKVS", "pm-far/gpm", "hcl_speedup_vs_conv_per_warp", 5},
		{"gpm-fig11", "log-32", "pm-far/gpm/hcl", "latency_us", 6.7},
		{"gpm-fig11", "log-32", "pm-far/gpm/conv", "latency_us", 7.3},
		{"gpm-fig11", "log-2048", "pm-far/gpm/hcl", "latency_us", 9.2},
		{"gpm-fig11", "log-2048", "pm-far/gpm/conv", "latency_us", 168},
		{"gpm-fig11", "log-32", "pm-far/gpm", "hcl_speedup", 1.1},
	}
	for _, tc := range []struct {
		name    string
		rows    []bench.Row
		paper   bool
		want    []string
		notWant []string
	}{
		{"normalised", []bench.Row{
			{"lin-fig1", "histo1", "nvm", "normalized_time", 1}, {"lin-fig1", "histo1", "SP_wt", "normalized_time", 1.07},
			{"gope-fig5", "0.03MB", "kernel-scope", "over_alg1_dram", 1.1}, {"gope-fig5", "0.03MB", "kernel-scope", "barrier_stall", 20000},
		}, false, []string{">execution time over nvm (×)<", ">kernel scope over Algorithm 1 without persistence<", ">1 without persistence (×)<", ">barrier stall (cycles)<"}, nil},
		{"baseline", fig6, false, []string{">speedup over epoch-far (×)<", ">1 = epoch-far<"}, []string{"log scale"}},
		{"relative", fig6, true, []string{"the paper&#39;s relative values", ">geomean: sbrp-near over epoch-near<"}, nil},
		{"log", micro, false, []string{">cycles, log scale<"}, nil},
		{"repeats", append(slices.Clone(micro), bench.Row{"micro-persist", "stream", "pm-near/strict", "durable_cycles", 61000},
			bench.Row{"micro-persist", "ofence", "pm-near/strict", "cycles_per_op", 144}),
			false, []string{">cycles (durable cycles: the same)<", ">cycles per op<"}, []string{">durable_cycles<"}},
		{"machines", func() []bench.Row {
			var rows []bench.Row
			for _, m := range []string{"pm-near", "pm-far"} {
				for _, model := range []string{"strict", "epoch", "gpm", "sbrp", "none"} {
					rows = append(rows, bench.Row{"micro-persist", "stream", m + "/" + model, "write_gbps", 40})
				}
			}
			return rows
		}(), false, []string{">strict<", ">none<", ">pm-far<"}, []string{">pm-near/strict<"}},
		{"extremes", []bench.Row{
			{"cosplay-fig8", "SPS", "ADR", "speedup", 1.7}, {"cosplay-fig8", "PC", "ADR", "speedup", 2},
			{"cosplay-fig8", "min", "ADR", "speedup", 1.7}, {"cosplay-fig8", "max", "ADR", "speedup", 2},
		}, false, []string{">speedup<", ">speedup: min and max over the benchmarks<"}, []string{"benchmarks (×)"}},
		{"cdf", []bench.Row{{"cosplay-fig12", "SPS", "cosplay", "cdf_p050", 2000}, {"cosplay-fig12", "SPS", "cosplay", "cdf_p100", 5000}},
			false, []string{">latency (cycles)<", ">SPS: CDF of the latency<"}, []string{">value<"}},
		{"gpm layout", gpm, true, []string{">(a) speedup due to HCL<", ">(b) logging latency against concurrent logging threads<",
			">concurrent logging threads<", ">logging latency (µs), log scale<", ">2048<", ">HCL over conventional logging<", ">paper&#39;s value<"},
			[]string{"batch_cycles", ">log-32<"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.svg")
			require.NoError(t, bench.WriteFigure(path, "title", tc.rows, tc.paper))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			for _, w := range tc.want {
				require.Contains(t, string(b), w)
			}
			for _, w := range tc.notWant {
				require.NotContains(t, string(b), w)
			}
		})
	}
}
