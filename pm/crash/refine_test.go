package crash_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
	"github.com/scopedpm/scopedpm/scope"
)

// recordKernel records one thread storing a, OFence, b, then a again.
func recordKernel(t *testing.T) []record.Event {
	rec := record.New(functional.New(pm.GPULimits{}), false)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	r, err := m.CreateRegion("r", 256)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		t.Store64(r.Base, 1)
		t.OFence()
		t.Store64(r.Base.Add(128), 2)
		t.Store64(r.Base, 3)
	})
	require.NoError(t, err)
	return rec.Events()
}

// Refines accepts durable cycles that follow the PMO and rejects ones
// that let an ordered-after persist into the image first, unless a later
// write to the same bytes hides the lost one.
func TestRefines(t *testing.T) {
	g := crash.Build(recordKernel(t), crash.SBRP)
	require.Len(t, g.Persists, 3)
	never := uint64(math.MaxUint64)
	for _, tc := range []struct {
		name string
		acks []uint64
		ok   bool
	}{
		{"in order", []uint64{10, 20, 30}, true},
		{"same cycle", []uint64{10, 10, 10}, true},
		{"second before first", []uint64{20, 10, 30}, false},
		// No fence lies between the second and third stores.
		{"third before second", []uint64{10, 30, 20}, true},
		// The first store is never durable itself, but the third, to the
		// same word, hides it from cycle 20: {first, third} at 20.
		{"hidden by a later write", []uint64{never, 30, 20}, true},
		{"lost and not hidden", []uint64{never, 10, never}, false},
		{"hidden too late", []uint64{never, 10, 20}, false},
		{"never durable", []uint64{never, never, never}, true},
	} {
		err := crash.Refines(g, tc.acks)
		if tc.ok {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorIs(t, err, crash.ErrRefinement, tc.name)
		}
	}
	// Under None nothing but same-bytes order holds.
	require.NoError(t, crash.Refines(crash.Build(recordKernel(t), crash.None), []uint64{20, 10, 30}))
	require.Error(t, crash.Refines(g, []uint64{1}))
}

// A wrapped hwmodel (recorder, refiner, crash probe) times a kernel exactly
// like a bare one: the wrappers pass residency through.
func TestWrappedBackendSameCycles(t *testing.T) {
	run := func(wrap func(*hwmodel.Backend) pm.Backend) uint64 {
		be, err := hwmodel.New(hwmodel.PresetPMFar(), hwmodel.SBRP)
		require.NoError(t, err)
		m, err := pm.NewMachine(wrap(be))
		require.NoError(t, err)
		w := newReduction(8, 256, pm.Device)
		require.NoError(t, w.Setup(m))
		require.NoError(t, w.Run(m))
		return be.Stats().Cycles
	}
	bare := run(func(b *hwmodel.Backend) pm.Backend { return b })
	require.Equal(t, bare, run(func(b *hwmodel.Backend) pm.Backend { return record.New(b, true) }))
	require.Equal(t, bare, run(func(b *hwmodel.Backend) pm.Backend { return crash.NewRefiner(b, hwmodel.SBRP) }))
	be, err := hwmodel.New(hwmodel.PresetPMFar(), hwmodel.SBRP)
	require.NoError(t, err)
	found, ok := pm.As[*hwmodel.Backend](record.New(crash.NewRefiner(be, hwmodel.SBRP), false))
	require.True(t, ok)
	require.Same(t, be, found)
	_, ok = pm.As[pm.Storage](record.New(be, false))
	require.False(t, ok)
}
