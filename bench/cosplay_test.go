package bench_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

var (
	cosplayLabels = []string{"SPS", "PC", "TATP", "TPCC", "CQ4", "CQ16", "CQ64"}
	cosplayBMOs   = []string{"ADR", "Enc", "LD", "HD", "Comb"}
)

// cosplay-fig8: a speedup and a best window per benchmark and BMO; the
// benchmarks that fence most (SPS, PC, TATP) gain more as the BMO grows,
// and need a wider window to hide it.
func TestCosplayFig8(t *testing.T) {
	v := rowsBy(quickRows(t, "cosplay-fig8"))
	for _, app := range cosplayLabels {
		for _, bmo := range cosplayBMOs {
			s, ok := v[[3]string{app, bmo, "speedup"}]
			require.True(t, ok, "%s %s", app, bmo)
			require.Positive(t, s)
			w := v[[3]string{app, bmo, "best_window"}]
			require.GreaterOrEqual(t, w, 1.0)
		}
	}
	for _, app := range []string{"SPS", "PC", "TATP"} {
		require.Greater(t, v[[3]string{app, "Comb", "speedup"}], v[[3]string{app, "ADR", "speedup"}], app)
		require.GreaterOrEqual(t, v[[3]string{app, "Comb", "best_window"}], v[[3]string{app, "ADR", "best_window"}], app)
	}
	for _, bmo := range cosplayBMOs {
		require.LessOrEqual(t, v[[3]string{"min", bmo, "speedup"}], v[[3]string{"max", bmo, "speedup"}])
	}
}

// cosplay-fig9: COSPlay is below Unordered at every window; at window 1,
// where its cfence waits as an sfence does and its switches are pure cost,
// below Baseline (§6.2); and a wider window beats window 1.
func TestCosplayFig9(t *testing.T) {
	v := rowsBy(quickRows(t, "cosplay-fig9"))
	for _, app := range cosplayLabels {
		for _, bmo := range []string{"Enc", "HD"} {
			base := v[[3]string{app, bmo + " baseline", "perf_over_unordered"}]
			one := v[[3]string{app, bmo + " window=1", "perf_over_unordered"}]
			require.Positive(t, one, "%s %s", app, bmo)
			require.Less(t, one, base, "%s %s: window 1 below Baseline", app, bmo)
			most := 0.0
			for _, w := range []int{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32} {
				p := v[[3]string{app, fmt.Sprintf("%s window=%d", bmo, w), "perf_over_unordered"}]
				require.Positive(t, p, "%s %s window %d", app, bmo, w)
				require.LessOrEqual(t, p, 1.0, "%s %s window %d: above Unordered", app, bmo, w)
				most = max(most, p)
			}
			require.Greater(t, most, one, "%s %s: no window beats window 1", app, bmo)
		}
	}
}

// cosplay-fig10: StrandWeaver(4,4), (8,8) and COSPlay per BMO on TPCC.
func TestCosplayFig10(t *testing.T) {
	v := rowsBy(quickRows(t, "cosplay-fig10"))
	for _, bmo := range cosplayBMOs {
		for _, c := range []string{"strandweaver(4,4)", "strandweaver(8,8)", "cosplay"} {
			require.Positive(t, v[[3]string{bmo, c, "speedup"}], "%s %s", bmo, c)
		}
	}
}

// cosplay-fig11: at the same window COSPlay is never slower than SBatch
// (SBatch fences the whole window where COSPlay fences one context),
// except by a tie at the PM's write bandwidth: where both run at the write
// floor (TPC-C at ADR: Baseline already runs there, and each is best at
// window 1, where a context's fence and the window's are one) they differ
// by a few cycles in a million (0.002% at paper size); each at its best
// window, the ratio of windows is reported.
func TestCosplayFig11(t *testing.T) {
	v := rowsBy(quickRows(t, "cosplay-fig11"))
	for _, app := range cosplayLabels {
		for _, bmo := range cosplayBMOs {
			require.GreaterOrEqual(t, v[[3]string{app, bmo, "speedup_iso_window"}], 1-1e-4, "%s %s", app, bmo)
			require.Positive(t, v[[3]string{app, bmo, "speedup_best_windows"}], "%s %s", app, bmo)
			require.Positive(t, v[[3]string{app, bmo, "sbatch_window"}], "%s %s", app, bmo)
		}
	}
	require.Positive(t, v[[3]string{"max", "all", "sbatch_over_cosplay_window"}])
}

// cosplay-fig12: each CDF rises with the percentile, and the windows it
// was measured at are reported.
func TestCosplayFig12(t *testing.T) {
	rows := quickRows(t, "cosplay-fig12")
	v := rowsBy(rows)
	for _, app := range []string{"SPS", "TATP", "TPCC", "CQ16"} {
		for _, c := range []string{"cosplay", "sbatch-iso", "sbatch-best"} {
			var cdf []float64
			for _, r := range rows {
				if r.Workload == app && r.Config == c && len(r.Metric) > 5 && r.Metric[:5] == "cdf_p" {
					cdf = append(cdf, r.Value)
				}
			}
			require.Len(t, cdf, 13, "%s %s", app, c)
			require.True(t, slices.IsSorted(cdf), "%s %s: %v", app, c, cdf)
			require.Positive(t, cdf[0])
		}
		require.Equal(t, v[[3]string{app, "cosplay", "window"}], v[[3]string{app, "sbatch-iso", "window"}])
	}
}

// cosplay-fig13: Baseline, COSPlay and FreeSwitch over Unordered for Enc
// and HD; FreeSwitch, the same tasks without switch costs, is at least as
// fast as COSPlay.
func TestCosplayFig13(t *testing.T) {
	v := rowsBy(quickRows(t, "cosplay-fig13"))
	for _, app := range cosplayLabels {
		for _, bmo := range []string{"Enc", "HD"} {
			cos := v[[3]string{app, bmo + " cosplay", "perf_over_unordered"}]
			free := v[[3]string{app, bmo + " freeswitch", "perf_over_unordered"}]
			base := v[[3]string{app, bmo + " baseline", "perf_over_unordered"}]
			require.Positive(t, base, "%s %s", app, bmo)
			require.GreaterOrEqual(t, free, cos, "%s %s", app, bmo)
		}
	}
}

// cosplay-fig1: a slowdown per benchmark at each added persist latency.
func TestCosplayFig1(t *testing.T) {
	v := rowsBy(quickRows(t, "cosplay-fig1"))
	for _, app := range cosplayLabels {
		for lat := 0; lat <= 1000; lat += 100 {
			require.Positive(t, v[[3]string{app, fmt.Sprintf("bmo=%d", lat), "slowdown"}], "%s %d", app, lat)
		}
	}
}

// Options.Windows pins the windows the COSPlay experiments try: with one
// window every best window is it.
func TestCosplayWindowsOption(t *testing.T) {
	skipSlow(t, "cosplay-fig10")
	e, ok := bench.Lookup("cosplay-fig10")
	require.True(t, ok)
	rows, err := e.Run(context.Background(), bench.Options{Quick: true, Smoke: true, Windows: []int{3}})
	require.NoError(t, err)
	n := 0
	for _, r := range rows {
		if r.Metric == "best_window" {
			require.Equal(t, 3.0, r.Value)
			n++
		}
	}
	require.Equal(t, 5, n)
}

// cosplay-fig14: one thread per core on a shared LLC and memory
// controller, LD BMO: Baseline's throughput rises from one thread to two,
// no thread count is slower than one thread, and COSPlay's speedup over
// Baseline falls from one thread to eight (the shared PM bandwidth caps
// both).
func TestCosplayFig14(t *testing.T) {
	v := rowsBy(quickRows(t, "cosplay-fig14"))
	for _, app := range cosplayLabels {
		require.Equal(t, 1.0, v[[3]string{app, "threads=1", "baseline_throughput"}], app)
		require.Greater(t, v[[3]string{app, "threads=2", "baseline_throughput"}], 1.0, app)
		for n := 1; n <= 8; n++ {
			cfg := fmt.Sprintf("threads=%d", n)
			require.GreaterOrEqual(t, v[[3]string{app, cfg, "baseline_throughput"}], 1.0, "%s %s", app, cfg)
			require.Positive(t, v[[3]string{app, cfg, "speedup"}], "%s %s", app, cfg)
			require.GreaterOrEqual(t, v[[3]string{app, cfg, "best_window"}], 1.0, "%s %s", app, cfg)
		}
		require.Greater(t, v[[3]string{app, "threads=1", "speedup"}], v[[3]string{app, "threads=8", "speedup"}], app)
	}
}
