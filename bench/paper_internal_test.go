package bench

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The values table takes numbered sections and, for a paper without
// section numbers (the re-study), the headings as printed; values may be
// negative (an overhead below zero) but must be numbers; every column but
// over is required. Ratios to a value that is not positive are NaN.
func TestParsePaper(t *testing.T) {
	const head = "experiment,workload,config,over,metric,value,paper,where,note\n"
	for _, tc := range []struct {
		name, line string
		ok         bool
	}{
		{"numbered", `e,w,c,,m,1.5,P,"§7.2, Fig. 6",n`, true},
		{"numbered, sub-figure", `e,w,c,,m,1.5,P,"§7.3, Fig. 10(b)",n`, true},
		{"numbered, roman table", `e,w,c,,m,1.5,P,"§4, Table V",n`, true},
		{"headings", `e,w,c,,m,49.2,P,"Experimental Results for Parboil Benchmark, A. Short-Running Kernels, Fig. 1",n`, true},
		{"one heading", `e,w,c,,m,3.4,P,"Experimental Results for Mega-KV Benchmark, Fig. 5",n`, true},
		{"negative", `e,w,c,,m,-0.1,P,"Experimental Results for ProgPOW Benchmark, Fig. 6",n`, true},
		{"zero", `e,w,c,,m,0,P,"§1, Table 2",n`, true},
		{"not a number", `e,w,c,,m,NaN,P,"§1, Table 2",n`, false},
		{"infinite", `e,w,c,,m,-Inf,P,"§1, Table 2",n`, false},
		{"no section", `e,w,c,,m,1,P,Fig. 1,n`, false},
		{"no figure or table", `e,w,c,,m,1,P,"§7.2, text",n`, false},
		{"section after a number", `e,w,c,,m,1,P,"§7, Results, Fig. 1",n`, false},
		{"lower-case heading", `e,w,c,,m,1,P,"results for parboil, Fig. 1",n`, false},
		{"figure as the section", `e,w,c,,m,1,P,"Fig. 2, Fig. 1",n`, false},
		{"no note", `e,w,c,,m,1,P,"§7.2, Fig. 6",`, false},
		{"no where", `e,w,c,,m,1,P,,n`, false},
	} {
		vals, err := parsePaper([]byte(head + tc.line + "\n"))
		if !tc.ok {
			require.ErrorIs(t, err, ErrPaperData, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Len(t, vals, 1, tc.name)
	}
	for _, tc := range []struct {
		paper, ours float64
		ratio       float64
	}{
		{2, 3, 1.5}, {-0.1, 0.4, math.NaN()}, {0, 0.4, math.NaN()},
	} {
		c := Comparison{PaperValue: PaperValue{Value: tc.paper}, Ours: tc.ours, Found: true}
		if math.IsNaN(tc.ratio) {
			require.True(t, math.IsNaN(c.Ratio()), "%v", tc)
		} else {
			require.InDelta(t, tc.ratio, c.Ratio(), 1e-12)
		}
	}
}
