package bench

import (
	"strings"
)

// metricPhrases are the words for metrics that their tokens (metricWords)
// would not say well.
var metricPhrases = map[string]string{
	"over_alg1_dram":               "kernel scope over Algorithm 1 without persistence",
	"perf_over_unordered":          "performance over Unordered",
	"slowdown_vs_unordered":        "slowdown over Unordered",
	"median_over_cosplay":          "median task latency over COSPlay's",
	"sbatch_over_cosplay_window":   "SBatch's best window over COSPlay's",
	"speedup_iso_window":           "speedup at the same window",
	"speedup_best_windows":         "speedup, each at its best window",
	"cosplay_window":               "COSPlay's best window",
	"sbatch_window":                "SBatch's best window",
	"crash_before_commit":          "crash before the commit (1 = yes, 0 = no)",
	"hcl_speedup_vs_conv_per_warp": "HCL's speedup over a log per warp",
	"depth_d":                      "depth d",
	"accepted":                     "accepted by the crash checker (1 = yes, 0 = no)",
	"states":                       "crash states checked",
	"levels":                       "levels",
	"recovery_norm":                "recovery time",
	"time_norm":                    "insertion time",
	"min_time_norm":                "insertion time, least batch",
	"max_time_norm":                "insertion time, greatest batch",
	"normalized_time":              "execution time",
	"cycles":                       "cycles",
	"verbs":                        "thread-verbs",
	"cpu_per_wall":                 "CPU time per wall-clock time",
}

// metricTokens are the words for tokens of metric names.
var metricTokens = map[string]string{
	"l1": "L1", "l2": "L2", "pm": "PM", "nvm": "NVM", "nv": "NV", "nvw": "NVW-FIFO", "hcl": "HCL",
	"dram": "DRAM", "conv": "conventional", "sbatch": "SBatch", "cosplay": "COSPlay", "rss": "RSS",
	"lsm": "LSM", "dev": "device", "pbarrier": "persist-barrier", "iter": "iteration", "rep": "repetition",
	"gbps": "bandwidth", "vs": "over", "mib": "", "us": "", "ns": "", "ms": "", "pct": "", "percent": "",
	"norm": "", "normalized": "", "normalised": "", "p50": "median (p50)", "p99": "p99",
	"pebble": "Pebble", "bbolt": "bbolt",
}

// metricWords says a metric in words for a panel's title and axis: its
// phrase (metricPhrases), or its tokens in words, units (named on the
// axis) and "normalised" (the axis names the baseline) left out.
func metricWords(metric string) string {
	m, extreme := strings.CutSuffix(metric, extremes)
	if c, ok := strings.CutPrefix(m, derivedPrefix); ok {
		return strings.ReplaceAll(c, "/", " over ") + ", each measurement"
	}
	over := ""
	if rest, ok := strings.CutPrefix(m, "x_"); ok {
		// x_pebble_keys_per_s: our rate over Pebble's.
		if other, rate, ok := strings.Cut(rest, "_"); ok {
			m, over = rate, other
		}
	}
	if p, ok := metricPhrases[m]; ok {
		m = p
	} else {
		if s, ok := strings.CutSuffix(m, "_per_s"); ok {
			m = s + "_per_second"
		}
		var words []string
		for _, t := range strings.Split(m, "_") {
			if w, ok := metricTokens[t]; ok {
				t = w
			}
			if t != "" {
				words = append(words, t)
			}
		}
		m = strings.Join(words, " ")
		if m == "" || strings.HasPrefix(m, "per ") {
			m = strings.TrimSpace("time " + m) // us, us_per_iter
		}
	}
	if over != "" {
		m += " over " + metricTokens[over] + "'s"
	}
	if extreme {
		m += extremes
	}
	return m
}

// figureBaselines name, per experiment and ratio metric ("": any), what
// the ratios are over where the rows do not show it: no config is 1
// everywhere (the baseline is not a bar), or several are (baselineOf
// cannot tell which).
var figureBaselines = map[string]map[string]string{
	"sbrp-fig7":     {"": "epoch at the same distance"},
	"sbrp-fig8":     {"": "epoch-far"},
	"sbrp-fig9":     {"": "epoch-far"},
	"sbrp-fig10a":   {"": "epoch-near"},
	"sbrp-fig10b":   {"": "epoch-near"},
	"sbrp-fig10c":   {"": "epoch-near"},
	"sbrp-fig11":    {"": "epoch-near"},
	"cosplay-fig1":  {"": "Unordered (no fences)"},
	"cosplay-fig8":  {"": "Baseline (sfences)"},
	"cosplay-fig9":  {"": "Unordered"},
	"cosplay-fig10": {"": "Baseline (sfences)"},
	"cosplay-fig11": {"": "SBatch", "sbatch_over_cosplay_window": "COSPlay's window"},
	"cosplay-fig12": {"": "COSPlay's median"},
	"cosplay-fig13": {"": "Unordered"},
	"cosplay-fig14": {"": "Baseline on one core", "speedup": "Baseline at the same thread count"},
	"gope-fig5":     {"": "the DRAM-only baseline", "over_alg1_dram": "Algorithm 1 without persistence"},
	"gope-fig7":     {"": "the DRAM-only baseline"},
	"gpm-fig11":     {"": "conventional logging", "hcl_speedup_vs_conv_per_warp": "a log per warp"},
	"hw-validate":   {"hcl_speedup": "conventional logging"},
	// The re-study's overheads (not ratios: no line at 1).
	"lin-fig1":   {"overhead_pct": "nvm"},
	"lin-fig2":   {"overhead_pct": "nvm"},
	"lin-fig3":   {"overhead_pct": "nvm"},
	"lin-fig4":   {"overhead_pct": "nvm"},
	"lin-fig5":   {"overhead_pct": "nvm"},
	"lin-fig6":   {"overhead_pct": "nvm"},
	"lin-table5": {"overhead_pct": "nvm"},
}

// namedBaseline is what metric's ratios are over in exp (figureBaselines),
// or "".
func namedBaseline(exp, metric string) string {
	b := figureBaselines[exp]
	metric = strings.TrimSuffix(metric, extremes)
	if s, ok := b[metric]; ok {
		return s
	}
	return b[""]
}
