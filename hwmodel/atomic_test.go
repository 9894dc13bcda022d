package hwmodel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// A lock handed from warp to warp costs time: more warps contending for one
// spin lock take longer than one, and atomics on one word serialize.
func TestAtomicsSerialize(t *testing.T) {
	run := func(blocks int) uint64 {
		be, err := hwmodel.New(hwmodel.PresetPMNear(), hwmodel.SBRP)
		require.NoError(t, err)
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		lock, err := m.Alloc(pm.DeviceMem, 16)
		require.NoError(t, err)
		res, err := scope.Launch(m, scope.Grid{Blocks: blocks, Threads: 1}, func(t *scope.Thread) {
			for t.AtomicCAS32(lock, 0, 1, pm.Device) != 0 {
			}
			t.Store32(lock.Add(8), t.Load32(lock.Add(8))+1)
			t.Work(100)
			t.AtomicExch32(lock, 0, pm.Device)
		})
		require.NoError(t, err)
		v, err := m.Memory().Load(lock.Add(8), 4)
		require.NoError(t, err)
		require.Equal(t, uint64(blocks), v)
		return res.Stats.Cycles
	}
	one, many := run(1), run(16)
	t.Logf("1 holder: %d cycles, 16 in turn: %d cycles", one, many)
	require.Greater(t, many, 8*one/2, "16 critical sections of 100 cycles cannot overlap")
	require.GreaterOrEqual(t, many, uint64(16*100))
}
