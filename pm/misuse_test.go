package pm_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// Misuse is an error, never a panic or a silently wrong answer.
func TestMisuseIsAnError(t *testing.T) {
	_, err := pm.NewMachine(nil)
	require.ErrorIs(t, err, pm.ErrBackend)
	_, err = pm.Reopen(nil, functional.New(pm.GPULimits{}))
	require.ErrorIs(t, err, pm.ErrCorrupt)
	_, err = pm.Reopen(&pm.Image{}, nil)
	require.ErrorIs(t, err, pm.ErrBackend)

	// One backend serves one machine: a second attach would silently
	// rebind it, and the first machine's Crash would return the second's
	// regions.
	be := functional.New(pm.GPULimits{})
	m1, err := pm.NewMachine(be)
	require.NoError(t, err)
	_, err = m1.CreateRegion("one", 64)
	require.NoError(t, err)
	_, err = pm.NewMachine(be)
	require.ErrorIs(t, err, pm.ErrBackend)
	img, err := m1.Crash()
	require.NoError(t, err)
	_, ok := img.Region("one")
	require.True(t, ok)
}

// After ClosePM every access of a PM region's addresses fails with the
// given error, the regions are no longer listed, and volatile memory is
// untouched.
func TestClosePM(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	r, err := m.CreateRegion("a", 64)
	require.NoError(t, err)
	v, err := m.Alloc(pm.HostMem, 64)
	require.NoError(t, err)
	closed := errors.New("closed")
	m.Memory().ClosePM(closed)
	buf := make([]byte, 8)
	require.ErrorIs(t, m.Memory().Read(r.Base, buf), closed)
	_, err = m.Memory().Load(r.Base.Add(8), 8)
	require.ErrorIs(t, err, closed)
	require.Empty(t, m.Regions())
	require.Len(t, m.Memory().Ranges(), 1, "the volatile range only")
	_, err = m.OpenRegion("a")
	require.ErrorIs(t, err, pm.ErrNoRegion)
	require.NoError(t, m.Memory().Read(v, buf))
}
