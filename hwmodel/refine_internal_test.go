package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/scope"
)

// The refinement check can fail: with SBRP's merge rule broken (a store
// joins a buffered line across an OFence of its warp), a kernel that
// stores a, c, OFence, b, a again yields an image with the second a durable
// before c, stored before the OFence, which SBRP's PMO forbids.
func TestRefinementCatchesBrokenMerge(t *testing.T) {
	run := func() error {
		be, err := New(PresetPMNear(), SBRP)
		require.NoError(t, err)
		ref := crash.NewRefiner(be, SBRP)
		m, err := pm.NewMachine(ref)
		require.NoError(t, err)
		r, err := m.CreateRegion("r", 16384)
		require.NoError(t, err)
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			t.Store64(r.Base.Add(uint64(128*t.Lane())), 1)
			t.Store64(r.Base.Add(uint64(8192+128*t.Lane())), 1)
			t.OFence()
			t.Store64(r.Base.Add(uint64(4096+128*t.Lane())), 2)
			t.Store64(r.Base.Add(uint64(128*t.Lane())), 3)
		})
		require.NoError(t, err)
		return ref.Err()
	}
	require.NoError(t, run())
	brokenMerge = true
	defer func() { brokenMerge = false }()
	require.ErrorIs(t, run(), crash.ErrRefinement)
}
