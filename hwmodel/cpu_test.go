package hwmodel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
)

// CPU tasks run on a hwmodel machine: not timed yet, their persists are
// durable as they are stored, and a kernel after them still works.
func TestCPURun(t *testing.T) {
	be, err := hwmodel.New(hwmodel.PresetPMNear(), hwmodel.SBRP)
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	r, err := m.CreateRegion("r", 64)
	require.NoError(t, err)
	res, err := coro.Run(m, []coro.Task{func(c *coro.Ctx) {
		c.Store64(r.Base, 7)
		c.CLWB(r.Base)
		c.SFence()
	}})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Stats.Persists)
	img, err := be.CrashAt(be.Now())
	require.NoError(t, err)
	ri, _ := img.Region("r")
	require.Equal(t, byte(7), ri.Data[0])
}
