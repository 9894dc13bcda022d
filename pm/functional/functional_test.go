package functional_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

func TestShapeAndName(t *testing.T) {
	small := pm.GPULimits{SMs: 2, WarpSize: 32, MaxThreadsPerSM: 256, MaxBlocksPerSM: 4, MaxThreadsPerBlock: 128}
	for _, tc := range []struct {
		name string
		gpu  pm.GPULimits
		want pm.GPULimits
	}{
		{"zero value is the default GPU", pm.GPULimits{}, pm.DefaultGPU()},
		{"a given shape is reported", small, small},
	} {
		b := functional.New(tc.gpu)
		require.Equal(t, "functional", b.Name(), tc.name)
		m, err := pm.NewMachine(b)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, m.Caps().GPU, tc.name)
	}
}

// A backend serves one machine.
func TestAttachTwice(t *testing.T) {
	b := functional.New(pm.GPULimits{})
	_, err := pm.NewMachine(b)
	require.NoError(t, err)
	_, err = pm.NewMachine(b)
	require.ErrorIs(t, err, pm.ErrBackend)
}

// fill launches a kernel in which every thread stores its id, doubled, to
// its word of region and to its word of a volatile buffer.
func fill(t *testing.T, m *pm.Machine, region pm.Range, vol pm.Addr, threads int) {
	t.Helper()
	_, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: threads / 2}, func(th *scope.Thread) {
		th.Store64(region.Base.Add(uint64(8*th.ID())), uint64(2*th.ID()+1))
		th.Store64(vol.Add(uint64(8*th.ID())), 7)
	})
	require.NoError(t, err)
}

// Every persist is durable the moment it is stored: the crash image holds
// every PM store and no volatile memory, and is a snapshot that later
// stores do not change.
func TestCrashKeepsEveryPersist(t *testing.T) {
	const threads = 64
	be := functional.New(pm.GPULimits{})
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	region, err := m.CreateRegion("data", 8*threads)
	require.NoError(t, err)
	vol, err := m.Alloc(pm.DeviceMem, 8*threads)
	require.NoError(t, err)
	fill(t, m, region, vol, threads)

	img, err := be.Crash()
	require.NoError(t, err)
	require.NoError(t, m.CopyIn(region.Base, make([]byte, 8))) // after the image was taken: not in it

	m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	r2, err := m2.OpenRegion("data")
	require.NoError(t, err)
	require.Equal(t, region.Base, r2.Base, "regions reopen at the same address")
	buf := make([]byte, 8*threads)
	require.NoError(t, m2.CopyOut(r2.Base, buf))
	for i := range threads {
		require.Equal(t, uint64(2*i+1), pm.GetLE(buf[8*i:8*i+8]), "word %d", i)
	}
	require.Error(t, m2.CopyOut(vol, make([]byte, 8)), "volatile memory does not survive a crash")
}

// Metamorphic: the same kernel ends with the same PM contents on the
// functional backend and on hwmodel under every model.
func TestSameMemoryAsHWModel(t *testing.T) {
	const threads = 64
	run := func(be pm.Backend) []byte {
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		region, err := m.CreateRegion("data", 8*threads)
		require.NoError(t, err)
		vol, err := m.Alloc(pm.DeviceMem, 8*threads)
		require.NoError(t, err)
		fill(t, m, region, vol, threads)
		buf := make([]byte, 8*threads)
		require.NoError(t, m.CopyOut(region.Base, buf))
		return buf
	}
	want := run(functional.New(pm.GPULimits{}))
	for _, model := range hwmodel.Models() {
		be, err := hwmodel.New(hwmodel.PresetPMNear(), model)
		require.NoError(t, err)
		require.Equal(t, want, run(be), "hwmodel %s", model)
	}
}
