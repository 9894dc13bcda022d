package hwmodel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// After a divergent branch (each lane runs its own number of loads), the
// common code issues as full-warp instructions once the lanes meet at a
// SyncWarp; without it the lanes stay out of step and every later
// instruction is split.
func TestSyncWarpReconverges(t *testing.T) {
	for _, sync := range []bool{true, false} {
		be, err := hwmodel.New(hwmodel.PresetPMNear(), hwmodel.SBRP)
		require.NoError(t, err)
		var storeLanes []int
		be.SetTrace(func(e hwmodel.Event) {
			if e.Kind == pm.OpStore {
				storeLanes = append(storeLanes, e.Lanes)
			}
		})
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		in, err := m.Alloc(pm.DeviceMem, 8*32)
		require.NoError(t, err)
		out, err := m.CreateRegion("out", 8*32*4)
		require.NoError(t, err)
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			var sum uint64
			for i := range t.Lane() % 5 { // divergent: 0..4 loads per lane
				sum += t.Load64(in.Add(uint64(8 * i)))
			}
			if sync {
				t.SyncWarp()
			}
			for k := range 4 {
				t.Store64(out.Base.Add(uint64(8*32*k+8*t.Lane())), sum+uint64(k))
			}
		})
		require.NoError(t, err)
		st := be.LastLaunch()
		t.Logf("sync=%v: store instructions %v, %.1f lanes per instruction", sync, storeLanes, st.LanesPerInstruction())
		if sync {
			require.Equal(t, []int{32, 32, 32, 32}, storeLanes)
		} else {
			require.Greater(t, len(storeLanes), 4, "without reconvergence the stores split")
		}
	}
}
