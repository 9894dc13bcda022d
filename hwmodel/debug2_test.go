package hwmodel

import (
	"testing"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/stretchr/testify/require"
)

func TestDebugTrace(t *testing.T) {
	be, _ := New(PresetPMNear(), SBRP)
	be.SetTrace(func(e Event) { if e.Warp < 2 { t.Logf("%+v", e) } })
	m, _ := pm.NewMachine(be)
	g, k, _ := kernels[3].setup(t, m)
	_, err := scope.Launch(m, g, k)
	require.NoError(t, err)
	for i, e := range be.entries { t.Logf("%d %+v", i, e) }
}
