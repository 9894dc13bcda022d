package bench_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
)

// gope-fig5's invariants, not its numbers: four sizes, growing; each
// algorithm's time normalised to the DRAM-only baseline of the same trees
// is its cycles over the baseline's (both means over the batches), above 1
// (persisting costs time) and within the batches' range;
// -set reaches the model; shards split the sizes.
func TestGopeFig5(t *testing.T) {
	e, ok := bench.Lookup("gope-fig5")
	require.True(t, ok)
	rows := quickRows(t, e.Name)
	v := rowsBy(rows)
	var sizes []string
	for _, r := range rows {
		if r.Metric == "time_norm" && r.Config == "kernel-scope" {
			sizes = append(sizes, r.Workload)
		}
	}
	require.Len(t, sizes, 4)
	for _, s := range sizes {
		base := v[[3]string{s, "dram-only", "cycles"}]
		require.Positive(t, base)
		for _, c := range []string{"kernel-scope", "workgroup-scope"} {
			n := v[[3]string{s, c, "time_norm"}]
			require.InDelta(t, v[[3]string{s, c, "cycles"}]/base, n, 1e-9)
			require.Greater(t, n, 1.0, "%s %s", s, c)
			// The batches' total over the baseline's lies between the
			// least and the greatest batch's ratio, and the batches differ.
			lo, hi := v[[3]string{s, c, "min_time_norm"}], v[[3]string{s, c, "max_time_norm"}]
			require.LessOrEqual(t, lo, n, "%s %s", s, c)
			require.GreaterOrEqual(t, hi, n, "%s %s", s, c)
			require.Less(t, lo, hi, "%s %s: the batches of a size are not different", s, c)
		}
		require.Greater(t, v[[3]string{s, "workgroup-scope", "workgroups"}], v[[3]string{s, "kernel-scope", "workgroups"}])
	}
	if testing.Short() {
		return // the runs below repeat the sweep
	}
	slow, err := e.Run(context.Background(), bench.Options{Quick: true, Set: []string{"nvm.write_latency_cycles=1000"}})
	require.NoError(t, err)
	vs := rowsBy(slow)
	require.Greater(t, vs[[3]string{sizes[3], "workgroup-scope", "cycles"}], v[[3]string{sizes[3], "workgroup-scope", "cycles"}])
	half, err := e.Run(context.Background(), bench.Options{Quick: true, Shard: 1, Shards: 2})
	require.NoError(t, err)
	for _, r := range half {
		require.Contains(t, []string{sizes[1], sizes[3]}, r.Workload)
	}
}

// gope-table3's invariants: the kernel scope repeats at least as many NV
// writes as the workgroup scope at every level, strictly more at the
// leaves; fig7 has a row per FIFO size and scope.
func TestGopeTable3AndFig7(t *testing.T) {
	e, _ := bench.Lookup("gope-table3")
	rows := quickRows(t, e.Name)
	v := rowsBy(rows)
	leaf := v[[3]string{"leaf", "kernel-scope", "nv_writes"}]
	require.Greater(t, leaf, v[[3]string{"leaf", "workgroup-scope-max", "nv_writes"}])
	for _, r := range rows {
		if r.Config == "workgroup-scope-max" {
			require.LessOrEqual(t, r.Value, v[[3]string{r.Workload, "kernel-scope", "nv_writes"}], r.Workload)
		}
	}
	// Measured by crashing: kernel scope rewrites its whole level, the
	// workgroup scope less at the leaves.
	require.InDelta(t, leaf, v[[3]string{"leaf", "kernel-scope/crash", "nv_writes"}], 0)
	require.Less(t, v[[3]string{"leaf", "workgroup-scope/crash", "nv_writes"}], leaf)
	require.Positive(t, v[[3]string{"leaf", "workgroup-scope/crash", "nv_writes"}])
	rows = quickRows(t, "gope-fig7")
	n := 0
	for _, r := range rows {
		if r.Metric == "time_norm" {
			n++
			require.Positive(t, r.Value)
		}
	}
	require.Equal(t, 6, n)
}
