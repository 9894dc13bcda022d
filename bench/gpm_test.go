package bench_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

// gpm-fig11's invariants, not its numbers: both parts report every row;
// HCL beats conventional logging on gpKVS; HCL's logging latency stays
// nearly flat as threads are added while the conventional log's grows with
// the contention on its locks; -set reaches the model.
func TestGPMFig11(t *testing.T) {
	e, ok := bench.Lookup("gpm-fig11")
	require.True(t, ok)
	rows := quickRows(t, e.Name)
	v := rowsBy(rows)
	for _, r := range rows {
		require.Equal(t, "gpm-fig11", r.Experiment)
		require.Positive(t, r.Value, "%+v", r)
	}

	// (a) gpKVS.
	hcl := v[[3]string{"gpKVS", "pm-far/gpm/hcl", "batch_cycles"}]
	conv := v[[3]string{"gpKVS", "pm-far/gpm/conv", "batch_cycles"}]
	require.Positive(t, hcl)
	require.Less(t, hcl, conv)
	require.Less(t, hcl, v[[3]string{"gpKVS", "pm-far/gpm/conv-per-warp", "batch_cycles"}])
	require.LessOrEqual(t, v[[3]string{"gpKVS", "pm-far/gpm/hcl", "kernel_cycles"}], hcl)
	require.InEpsilon(t, conv/hcl, v[[3]string{"gpKVS", "pm-far/gpm", "hcl_speedup"}], 1e-3) // batch_cycles are rounded

	// (b) logging latency against threads.
	counts := []int{32, 64, 128, 256, 512, 1024, 2048}
	var prevConv float64
	for _, n := range counts {
		w := fmt.Sprintf("log-%d", n)
		h := v[[3]string{w, "pm-far/gpm/hcl", "latency_cycles"}]
		c := v[[3]string{w, "pm-far/gpm/conv", "latency_cycles"}]
		require.Positive(t, h, w)
		require.GreaterOrEqual(t, c, prevConv, "conventional latency grows with threads (%s)", w)
		require.Less(t, h, c, w)
		prevConv = c
	}
	first, last := "log-32", fmt.Sprintf("log-%d", counts[len(counts)-1])
	require.Less(t, v[[3]string{last, "pm-far/gpm/hcl", "latency_cycles"}], 4*v[[3]string{first, "pm-far/gpm/hcl", "latency_cycles"}],
		"HCL latency nearly flat over a 64x range of threads")
	require.Greater(t, v[[3]string{last, "pm-far/gpm/conv", "latency_cycles"}], 16*v[[3]string{first, "pm-far/gpm/conv", "latency_cycles"}],
		"conventional latency grows with the threads per lock")
	require.Greater(t, v[[3]string{"logging", "pm-far/gpm", "mean_hcl_speedup"}], 1.0)
	require.LessOrEqual(t, v[[3]string{"logging", "pm-far/gpm", "geomean_hcl_speedup"}], v[[3]string{"logging", "pm-far/gpm", "mean_hcl_speedup"}])

	// A cancelled context stops it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Run(ctx, bench.Options{Quick: true})
	require.ErrorIs(t, err, context.Canceled)

	if testing.Short() {
		return // the runs below repeat the experiment
	}
	// -set reaches every configuration: a slower link slows HCL logging.
	rows, err = e.Run(context.Background(), bench.Options{Quick: true, Set: []string{"pcie.latency_cycles=1800"}})
	require.NoError(t, err)
	slow := rowsBy(rows)
	require.Greater(t, slow[[3]string{"log-32", "pm-far/gpm/hcl", "latency_cycles"}], v[[3]string{"log-32", "pm-far/gpm/hcl", "latency_cycles"}])
	require.Greater(t, slow[[3]string{"gpKVS", "pm-far/gpm/hcl", "batch_cycles"}], hcl)
	_, err = e.Run(context.Background(), bench.Options{Quick: true, Set: []string{"no.such_key=1"}})
	require.Error(t, err)
}
