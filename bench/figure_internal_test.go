package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
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
