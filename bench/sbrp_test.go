package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

// sbrp-fig10b sweeps the NVM bandwidth at three points for every app and
// the geomean, each a positive speedup of sbrp-near over epoch-near.
func TestSBRPFig10b(t *testing.T) {
	e, ok := bench.Lookup("sbrp-fig10b")
	require.True(t, ok)
	rows := quickRows(t, e.Name)
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

// sbrp-fig11 crashes gpKVS, HM, Red and MQ just before their commit word's
// persist (so recovery has a batch to roll back or a launch to redo) and
// says where each crash was.
func TestSBRPFig11CrashPoint(t *testing.T) {
	e, ok := bench.Lookup("sbrp-fig11")
	require.True(t, ok)
	rows := quickRows(t, e.Name)
	v := rowsBy(rows)
	for _, app := range []string{"gpKVS", "HM", "Red", "MQ"} {
		for _, cfg := range []string{"epoch-near", "sbrp-near"} {
			require.Equal(t, 1.0, v[[3]string{app, cfg, "crash_before_commit"}], "%s %s", app, cfg)
			require.Positive(t, v[[3]string{app, cfg, "recovery_cycles"}], "%s %s", app, cfg)
		}
	}
	require.Equal(t, 0.0, v[[3]string{"SRAD", "sbrp-near", "crash_before_commit"}])
}
