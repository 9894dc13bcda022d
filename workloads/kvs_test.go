package workloads_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// gpKVS with its OFence recovers from every explored crash state under
// SBRP and Epoch (10,000 states, or all of them if fewer are allowed), with
// either log.
func TestKVSCrashConsistent(t *testing.T) {
	for _, tc := range []struct {
		workload string
		model    crash.Model
		states   int
	}{
		{"gpkvs", crash.SBRP, 10000},
		{"gpkvs", crash.Epoch, 10000},
		{"gpkvs-conv", crash.SBRP, 2000},
		{"gpkvs-conv", crash.Epoch, 2000},
	} {
		t.Run(tc.workload+"/"+tc.model.String(), func(t *testing.T) {
			if testing.Short() && tc.workload == "gpkvs-conv" {
				t.Skip("-short: the conventional log's states are checked without -short")
			}
			const seed = 20240611
			t.Logf("seed = %d", seed)
			w, err := workloads.New(tc.workload, workloads.Tiny)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: tc.model, States: tc.states, Seed: seed})
			require.NoError(t, err)
			t.Log(rep.Summary(), "persists:", rep.Persists, "complete:", rep.Complete)
			require.Empty(t, rep.Violations, "%v", rep.Violations)
			require.True(t, rep.Complete || rep.Checked == tc.states, "checked %d", rep.Checked)
		})
	}
}

// With the OFence between logging and the in-place update removed, the
// checker finds a crash state that recovery cannot repair, and its report
// names the missing ordering.
func TestKVSNoOFenceCaught(t *testing.T) {
	for _, model := range []crash.Model{crash.SBRP, crash.Epoch} {
		t.Run(model.String(), func(t *testing.T) {
			const seed = 7
			t.Logf("seed = %d", seed)
			w, err := workloads.New("gpkvs-no-ofence", workloads.Tiny)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: model, States: 10000, Seed: seed, Shrink: true})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations, rep.Summary())
			v := rep.Violations[0]
			t.Log(v.Explanation)
			require.ErrorIs(t, v.Err, workloads.ErrInconsistent)
			require.Contains(t, v.Explanation, "not ordered after it")
			require.Contains(t, v.Explanation, "no ordering verb")
			require.Contains(t, v.Explanation, "kernels.go") // the update's call site in kvs
		})
	}
}

// A larger instance than Tiny (two batches of eight requests over two
// blocks, both logs): 10,000 sampled crash states each under SBRP.
func TestKVSCrashSampled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 20,000 sampled crash states")
	}
	shape := workloads.KVSShape{Buckets: 16, BlockThreads: 4, Preload: 8, Batch: 8, Batches: 2, Updates: 4}
	for _, lk := range []kvs.LogKind{kvs.LogHCL, kvs.LogConv} {
		t.Run(lk.String(), func(t *testing.T) {
			const seed = 99
			t.Logf("seed = %d", seed)
			w := workloads.NewKVS(shape, lk, true)
			rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: crash.SBRP, States: 10000, Seed: seed})
			require.NoError(t, err)
			t.Log(rep.Summary(), "persists:", rep.Persists, "complete:", rep.Complete)
			require.Empty(t, rep.Violations)
		})
	}
}

func TestKVSSizes(t *testing.T) {
	for _, s := range []workloads.Size{workloads.Tiny, workloads.Quick, workloads.Paper} {
		w := workloads.KVSShapeFor(s)
		require.Positive(t, w.Batch)
		require.LessOrEqual(t, w.Updates, w.Preload)
	}
	p := workloads.KVSShapeFor(workloads.Paper)
	require.Equal(t, 65536, p.Batch*p.Batches, "the SBRP artifact's 65,536 inserts")
	require.Equal(t, 16384, p.Batch, "by 16,384 threads")
	require.Equal(t, 128<<20, p.Buckets*128, "into a 128 MB table")

	// The quick workload runs and checks without a crash.
	w, err := workloads.New("gpkvs", workloads.Quick)
	require.NoError(t, err)
	_, err = crash.Record(w, pm.GPULimits{})
	require.NoError(t, err)
}
