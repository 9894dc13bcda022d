package bench_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

// sbrp-fig10b sweeps the NVM bandwidth at three points for every app and
// the geomean, each a positive speedup of sbrp-near over epoch-near.
func TestSBRPFig10b(t *testing.T) {
	e, ok := bench.Lookup("sbrp-fig10b")
	require.True(t, ok)
	rows, err := e.Run(context.Background(), bench.Options{Quick: true})
	require.NoError(t, err)
	v := rowsBy(rows)
	for _, app := range []string{"gpKVS", "HM", "SRAD", "Red", "MQ", "Scan", "geomean"} {
		for _, pct := range []string{"50", "100", "200"} {
			s, ok := v[[3]string{app, "nvm_bandwidth_pct=" + pct, "speedup"}]
			require.True(t, ok, "%s at %s%%", app, pct)
			require.Positive(t, s)
		}
	}
	require.Len(t, rows, 7*3)
}
