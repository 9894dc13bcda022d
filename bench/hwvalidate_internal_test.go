package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHWValidateSummary(t *testing.T) {
	ratio := func(w string, v float64) []Row {
		return []Row{
			{"hw-validate", w, "h100 measured", "cycles", 100},
			{"hw-validate", w, "h100 model", "cycles", 100 * v},
			{"hw-validate", w, "model/measured", "cycles", v},
		}
	}
	for _, tc := range []struct {
		name   string
		ratios map[string]float64
		want   string
	}{
		{"none", nil, "no points"},
		{"all in", map[string]float64{"a": 1, "b": 1.5, "c": 1 / 1.5},
			"3 of 3 points within 1.5x of the measurement; furthest below: c cycles 0.667; above: b cycles 1.5"},
		{"ends out", map[string]float64{"a": 1.01, "low": 0.3, "high": 7.6},
			"1 of 3 points within 1.5x of the measurement; furthest below: low cycles 0.3; above: high cycles 7.6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rows []Row
			for _, w := range []string{"a", "b", "c", "low", "high"} {
				if v, ok := tc.ratios[w]; ok {
					rows = append(rows, ratio(w, v)...)
				}
			}
			require.Equal(t, tc.want, hwValidateSummary(rows))
		})
	}
}
