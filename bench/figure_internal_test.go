package bench

import (
	"encoding/csv"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A linear axis has at least four labelled ticks where its ticks are few
// (sbrp-fig6's 0 to 4.6 was labelled 0, 2, 4 only); a log axis labels
// only ticks on it.
func TestCompactTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		log    bool
		min    int
	}{
		{0, 4.6, false, 4},
		{0, 3.2, false, 4},
		{0, 1.5e6, false, 3},
		{80, 240000, true, 4},
		{1.2, 600, true, 5}, // lin-fig2's overheads: 10 and 100 alone
	} {
		var labels []string
		for _, tk := range (compactTicks{log: tc.log}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
			require.True(t, tk.Value >= tc.lo && tk.Value <= tc.hi || !tc.log, "%v: tick %v off the axis", tc, tk.Value)
		}
		require.GreaterOrEqual(t, len(labels), tc.min, "%v: %v", tc, labels)
	}
}

// Panel titles and axes say metrics in words, not identifiers: no
// metric of an experiment's golden CSV is drawn with an underscore, and
// units and "normalised" are left to the axis.
func TestMetricWords(t *testing.T) {
	for metric, want := range map[string]string{
		"l1_pm_read_misses_norm": "L1 PM read misses",
		"batch_p99_us":           "batch p99",
		"keys_per_s":             "keys per second",
		"x_pebble_keys_per_s":    "keys per second over Pebble's",
		"speedup" + extremes:     "speedup" + extremes,
		"perf_over_unordered":    "performance over Unordered",
		"us_per_iter":            "time per iteration",
		"us":                     "time",
	} {
		require.Equal(t, want, metricWords(metric), metric)
	}
	var noUnit []string
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.csv"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
			r, err := csv.NewReader(strings.NewReader(line)).Read()
			require.NoError(t, err)
			m := r[3]
			require.NotContains(t, metricWords(m), "_", "%s: %s", f, m)
			require.NotContains(t, axisLabel(m, ""), "_", "%s: %s", f, m)
			require.NotEmpty(t, metricWords(m), "%s: %s", f, m)
			if !strings.HasPrefix(m, "cdf_p") && !isRatio(m) && m != "accepted" && m != "crash_before_commit" {
				if unitOf(m) == "" && !slices.Contains(noUnit, m) {
					noUnit = append(noUnit, m)
				}
			}
		}
	}
	require.Empty(t, noUnit, "metrics whose axis has no unit")
}

// A ratio panel names what its ratios are over, on its axis and in the
// legend's line at 1, also where the rows cannot say: sbrp-fig8's gpm and
// epoch-far are both 1 everywhere (the first was taken), sbrp-fig9 has no
// baseline bar, and cosplay-fig12's median_over_cosplay is a ratio (it had
// no line at 1).
func TestRatioBaseline(t *testing.T) {
	for _, tc := range []struct {
		rows []Row
		want []string
	}{
		{[]Row{
			{"sbrp-fig8", "Red", "gpm", "l1_pm_read_misses_norm", 1}, {"sbrp-fig8", "Red", "epoch-far", "l1_pm_read_misses_norm", 1},
			{"sbrp-fig8", "Red", "sbrp-far", "l1_pm_read_misses_norm", 0.3},
		}, []string{">L1 PM read misses over epoch-far (×)<", ">1 = epoch-far<"}},
		{[]Row{{"sbrp-fig9", "Red", "sbrp-far-eadr", "speedup", 1.2}}, []string{">speedup over epoch-far (×)<", ">1 = epoch-far<"}},
		{[]Row{{"kvs-vs-pebble", "set/b1", "disk(ext4)/gpkvs-native-log", "x_pebble_keys_per_s", 0.5}},
			[]string{">keys per second over Pebble&#39;s (×)<", ">1 = Pebble&#39;s, the same file system and workload<"}},
		{[]Row{{"lin-fig3", "lbm", "undo_C+wt", "overhead_pct", 20}, {"lin-fig3", "lbm", "undo_C+clwb", "overhead_pct", 30}},
			[]string{">overhead over nvm (%)<"}},
		{[]Row{{"cosplay-fig12", "SPS", "sbatch-iso", "median_over_cosplay", 1.4}},
			[]string{">median task latency over COSPlay&#39;s (×)<", ">1 = COSPlay&#39;s median<", "stroke-dasharray"}},
	} {
		path := filepath.Join(t.TempDir(), "f.svg")
		require.NoError(t, WriteFigure(path, "title", tc.rows, false))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, w := range tc.want {
			require.Contains(t, string(b), w, tc.rows[0].Experiment)
		}
	}
}

// Panels too wide to stand two a row (hw-validate's 24 fence
// measurements) are stacked in one column: the figure is as wide as one
// panel and the legend, not two.
func TestFigureColumns(t *testing.T) {
	var rows []Row
	for i, m := range []string{"cycles", "us", "gbps", "write_gbps"} {
		for w := range 24 {
			for _, c := range []string{"measured", "model"} {
				rows = append(rows, Row{"hw-validate", "lat " + strconv.Itoa(w), c, m, float64((10 + w) * (i + 1))})
			}
		}
	}
	path := filepath.Join(t.TempDir(), "f.svg")
	require.NoError(t, WriteFigure(path, "title", rows, false))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), `width="`)
	require.True(t, ok)
	w, _, _ := strings.Cut(rest, `"`)
	width, err := strconv.ParseFloat(strings.TrimSuffix(w, "pt"), 64)
	require.NoError(t, err, w)
	bars := 24 * 3.5 * 14.0 // 24 groups of two 14-point bars and a gap of one and a half
	require.Less(t, width, 2*bars, "one column")
	require.Contains(t, string(b), ">time (µs)<")
	require.Contains(t, string(b), ">bandwidth (GB/s)<")
}

// A sweep of more than eight values (cosplay-fig1's eleven latencies, 11
// colours) is drawn a group per value and a colour per benchmark, the
// minima and maxima in greys, the paper's marks moved with their bars.
func TestTransposeSweep(t *testing.T) {
	var rows []Row
	for _, w := range []string{"SPS", "PC", "TATP", "TPCC", "CQ4", "CQ16", "CQ64", "min", "max"} {
		for lat := 0; lat <= 1000; lat += 100 {
			rows = append(rows, Row{"cosplay-fig1", w, "bmo=" + strconv.Itoa(lat), "slowdown", 2 + float64(lat)/100})
		}
	}
	path := filepath.Join(t.TempDir(), "f.svg")
	require.NoError(t, WriteFigure(path, "title", rows, true))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, w := range []string{">persist latency added at the memory controller (cycles)<", ">SPS<", ">1000<", ">paper&#39;s value<"} {
		require.Contains(t, string(b), w)
	}
	require.NotContains(t, string(b), ">bmo=0<")
	got, marks, key := transposeSweep(splitExtremes(rows, []Comparison{{PaperValue: PaperValue{Config: "bmo=0", Metric: "slowdown", Value: 1.1}, Workload: "min"}}))
	require.Equal(t, "bmo", key)
	var configs []string
	for _, r := range got {
		if !slices.Contains(configs, r.Config) {
			configs = append(configs, r.Config)
		}
	}
	require.Len(t, configs, 9) // seven benchmarks, min and max: never more than seven in a panel
	require.Equal(t, "0", marks[0].Workload)
	require.Equal(t, "min", marks[0].Config)
	cols := configColors(configs)
	require.Equal(t, color.Color(qualitative[0]), cols[0])
	require.NotEqual(t, cols[7], cols[8])
}

// goldenRows reads the rows of an experiment's golden CSV.
func goldenRows(t *testing.T, name string) []Row {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", name+".csv"))
	require.NoError(t, err)
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	var rows []Row
	for _, r := range recs[1:] {
		v, err := strconv.ParseFloat(r[4], 64)
		require.NoError(t, err)
		rows = append(rows, Row{r[0], r[1], r[2], r[3], v})
	}
	return rows
}

// The papers' figures are drawn in their panels (figureLayouts), and
// every panel lies on the figure: cosplay-fig13's relative values, long
// labels at an angle, pushed its first panel off the top.
func TestPaperLayouts(t *testing.T) {
	panel := regexp.MustCompile(`<path d="M([-\d.]+),([-\d.]+)L([-\d.]+),([-\d.]+)L([-\d.]+),([-\d.]+)L([-\d.]+),([-\d.]+)Z" style="fill:#FFFFFF" />`)
	size := regexp.MustCompile(`<svg width="([\d.]+)pt" height="([\d.]+)pt"`)
	for _, tc := range []struct {
		exp           string
		want, notWant []string
	}{
		{"sbrp-fig11", []string{">recovery time after a crash, normalised to epoch-near<", ">1 = epoch-near<"}, []string{"crash before", ">recovery cycles<"}},
		{"cosplay-fig11", []string{">(a) COSPlay&#39;s speedup over SBatch at COSPlay&#39;s best window<", ">(b) the best windows: SBatch&#39;s over COSPlay&#39;s<"},
			[]string{">COSPlay&#39;s best window<"}},
		{"cosplay-fig13", []string{">(a) Enc: performance normalised to Unordered<", ">(b) HD: performance normalised to Unordered<", ">FreeSwitch<", ">1 = Unordered<"},
			[]string{">Enc baseline<", ">window<"}},
		{"cosplay-fig14", []string{">(b) COSPlay&#39;s speedup over Baseline at the same thread count<", ">throughput over Baseline&#39;s<", ">on one core (×)<"}, []string{">best window<"}},
		{"cosplay-fig10", []string{">TPCC: speedup over Baseline (sfences) per BMO<", ">BMO<", "the paper&#39;s relative values"}, []string{">best window<"}},
		{"gope-table3", []string{">NV writes a crash at each level makes the insertion write again<"}, []string{">levels<", ">0.20MB<"}},
		{"lin-table5", []string{">our pick<", ">the paper&#39;s pick (our run)<", ">the cheapest durable transaction the crash checker accepts<"},
			[]string{">undo_K+idem<", ">accepted by the crash checker (1 = yes, 0 = no)<"}},
		{"gope-fig7", []string{">16/64<", ">workgroup scope<", ">NVW-FIFO entries (L1/L2), the largest tree<"}, []string{">workgroup-scope/16-64<"}},
	} {
		path := filepath.Join(t.TempDir(), "f.svg")
		require.NoError(t, WriteFigure(path, "title", goldenRows(t, tc.exp), true))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		s := string(b)
		for _, w := range tc.want {
			require.Contains(t, s, w, tc.exp)
		}
		for _, w := range tc.notWant {
			require.NotContains(t, s, w, tc.exp)
		}
		wh := size.FindStringSubmatch(s)
		require.NotNil(t, wh)
		w, _ := strconv.ParseFloat(wh[1], 64)
		h, _ := strconv.ParseFloat(wh[2], 64)
		for _, m := range panel.FindAllStringSubmatch(s, -1) {
			for i := 1; i < len(m); i += 2 {
				x, _ := strconv.ParseFloat(m[i], 64)
				y, _ := strconv.ParseFloat(m[i+1], 64)
				require.True(t, x >= -0.5 && x <= w+0.5 && y >= -0.5 && y <= h+0.5, "%s: a panel off the figure: %s", tc.exp, m[0])
			}
		}
	}
}

// A y axis label too long for a panel's height is broken into two lines.
func TestWrapLabel(t *testing.T) {
	require.Equal(t, "speedup (×)", wrapLabel("speedup (×)", maxAxisLabel))
	require.Equal(t, "speedup at the same\nwindow over SBatch (×)", wrapLabel("speedup at the same window over SBatch (×)", maxAxisLabel))
}

// inside tells canvases on the figure from those Align pushed off it.
func TestInside(t *testing.T) {
	area := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: 100, Y: 100}}}
	in := draw.Canvas{Rectangle: vg.Rectangle{Min: vg.Point{X: 10, Y: 10}, Max: vg.Point{X: 50, Y: 90}}}
	off := draw.Canvas{Rectangle: vg.Rectangle{Min: vg.Point{X: 10, Y: 60}, Max: vg.Point{X: 50, Y: 130}}}
	flat := draw.Canvas{Rectangle: vg.Rectangle{Min: vg.Point{X: 10, Y: 60}, Max: vg.Point{X: 50, Y: 40}}}
	require.True(t, inside([][]draw.Canvas{{in, in}}, area))
	require.False(t, inside([][]draw.Canvas{{in, off}}, area))
	require.False(t, inside([][]draw.Canvas{{flat}}, area))
}

// A config that is one config over another (hw-validate's model/measured
// beside h100 model and h100 measured) is drawn on an axis of its own, not
// on the cycles of the values it divides, with the line at 1 named.
func TestSplitDerived(t *testing.T) {
	rows := []Row{
		{"hw-validate", "load l1", "h100 measured", "cycles", 40}, {"hw-validate", "load l1", "h100 model", "cycles", 44},
		{"hw-validate", "load l1", "model/measured", "cycles", 1.1},
		{"hw-validate", "bw host", "h100 measured", "write_gbps", 50}, {"hw-validate", "bw host", "h100 model", "write_gbps", 25},
		{"hw-validate", "bw host", "model/measured", "write_gbps", 0.5},
	}
	got := splitDerived(rows)
	require.Equal(t, Row{"hw-validate", "load l1 (cycles)", "model/measured", derivedPrefix + "model/measured", 1.1}, got[4])
	require.Equal(t, rows[3], got[2])
	path := filepath.Join(t.TempDir(), "f.svg")
	require.NoError(t, WriteFigure(path, "title", rows, false))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, w := range []string{">model over measured, each measurement<", ">1 = measured<", ">bw host (write bandwidth)<"} {
		require.Contains(t, string(b), w)
	}
	// A config named a/b that is not a over b stays.
	rows[2].Value = 3
	require.Equal(t, rows, splitDerived(rows))
}

// A sweep's configs are named in words in the legend (sbrp-fig10b's
// nvm_bandwidth_pct=50), the paper's marks with them.
func TestNameSweep(t *testing.T) {
	rows := []Row{
		{"sbrp-fig10b", "geomean", "nvm_bandwidth_pct=50", "speedup", 1.1},
		{"sbrp-fig10b", "geomean", "nvm_bandwidth_pct=200", "speedup", 1.2},
	}
	got, marks := nameSweep(rows, []Comparison{{PaperValue: PaperValue{Config: "nvm_bandwidth_pct=50", Metric: "speedup", Value: 1.15}, Workload: "geomean"}})
	require.Equal(t, "NVM bandwidth 50%", got[0].Config)
	require.Equal(t, "NVM bandwidth 200%", got[1].Config)
	require.Equal(t, "NVM bandwidth 50%", marks[0].Config)
	path := filepath.Join(t.TempDir(), "f.svg")
	require.NoError(t, WriteFigure(path, "title", rows, true))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), ">NVM bandwidth 50%<")
	require.NotContains(t, string(b), ">nvm_bandwidth_pct=50<")
	// Configs of other kinds stay.
	other := []Row{{"x", "w", "a=1", "m", 1}, {"x", "w", "b", "m", 1}}
	got, _ = nameSweep(other, nil)
	require.Equal(t, other, got)
}

// A log panel's data reaches up to its title: gonum made room for its y
// label as if at the middle of the data range, near the top of a log axis,
// and pushed the data an inch down (gpm-fig11's latencies).
func TestLogPanelHeight(t *testing.T) {
	rows := []Row{
		{"gpm-fig11", "log-32", "pm-far/gpm/hcl", "latency_us", 6.7}, {"gpm-fig11", "log-32", "pm-far/gpm/conv", "latency_us", 7.3},
		{"gpm-fig11", "log-2048", "pm-far/gpm/hcl", "latency_us", 9.2}, {"gpm-fig11", "log-2048", "pm-far/gpm/conv", "latency_us", 1680},
	}
	path := filepath.Join(t.TempDir(), "f.svg")
	require.NoError(t, WriteFigure(path, "title", rows, false))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(b)
	require.Contains(t, s, ">logging latency (µs), log scale<")
	title := regexp.MustCompile(`<text x="[\d.]+" y="-([\d.]+)"[^>]*\n[^>]*>\(b\) logging latency`).FindStringSubmatch(s)
	require.NotNil(t, title)
	titleY, _ := strconv.ParseFloat(title[1], 64)
	// The bars (not the legend's swatches): the paths of the lowest base.
	base, top := math.Inf(1), 0.0
	bars := regexp.MustCompile(`<path d="M[\d.]+,([\d.]+)L[\d.]+,([\d.]+)L[^"]*Z" style="fill:#(?:1F77B4|FF7F0E)"`).FindAllStringSubmatch(s, -1)
	for _, m := range bars {
		y0, _ := strconv.ParseFloat(m[1], 64)
		base = min(base, y0)
	}
	for _, m := range bars {
		y0, _ := strconv.ParseFloat(m[1], 64)
		y1, _ := strconv.ParseFloat(m[2], 64)
		if y0 == base {
			top = max(top, y1)
		}
	}
	require.Less(t, titleY-top, 50.0, "the tallest bar's top %v, the title's %v", top, titleY)
}
