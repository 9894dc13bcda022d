package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// The CPU refinement check can fail, and caught this once: TPC-C stores a
// stock row in one strand and writes it back (CLWB) at the next log
// insert, in the next strand. With the write-back ordered only after the
// PersistBarriers of the strand that issues the CLWB (brokenStrands), the
// row becomes durable before the log tail that a PersistBarrier of its
// own strand orders before it: an image StrandWeaver's rules (the COSPlay
// model, strands as contexts) forbid.
func TestCPURefinementCatchesBrokenStrands(t *testing.T) {
	run := func() error {
		w, err := workloads.NewCPU("tpcc", workloads.CPUShape{Tasks: 24, Config: coro.Config{Mode: coro.StrandWeaver}, Seed: 3, Scale: 1}, workloads.NoBug)
		require.NoError(t, err)
		be, err := New(PresetCOSPlay(), SBRP)
		require.NoError(t, err)
		ref := crash.NewRefiner(be, crash.COSPlay)
		m, err := pm.NewMachine(ref)
		require.NoError(t, err)
		require.NoError(t, w.Setup(m))
		require.NoError(t, w.Run(m))
		require.Equal(t, 1, ref.Launches())
		return ref.Err()
	}
	require.NoError(t, run())
	brokenStrands = true
	defer func() { brokenStrands = false }()
	require.ErrorIs(t, run(), crash.ErrRefinement)
}
