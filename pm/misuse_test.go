package pm_test

import (
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
