package hwmodel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/internal/testkit/kerneltest"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// Every foundation kernel ends with the same memory under the functional
// backend and under hwmodel with every preset and model.
func TestFoundationKernelsMetamorphic(t *testing.T) {
	for _, c := range kerneltest.Cases() {
		want, _, err := kerneltest.Final(c, functional.New(pm.GPULimits{}))
		require.NoError(t, err)
		for _, preset := range hwmodel.Presets() {
			if preset == "h100" && testing.Short() {
				continue // a 50 MB L2 per backend: minutes under the race detector; runs without -short
			}
			cfg, err := hwmodel.Preset(preset)
			require.NoError(t, err)
			for _, model := range cfg.Models() {
				be, err := hwmodel.New(cfg, model)
				require.NoError(t, err)
				got, res, err := kerneltest.Final(c, be)
				require.NoError(t, err, "%s %s %s", c.Name, preset, model)
				require.Empty(t, kerneltest.Diff(want, got), "%s %s %s", c.Name, preset, model)
				require.NotZero(t, res.Stats.Cycles, "%s %s %s", c.Name, preset, model)
			}
		}
	}
}
