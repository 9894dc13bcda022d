package hwmodel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
)

// PM timed as DRAM is a property of the machine that only the None model
// describes: New refuses any other model on it, naming the sentinel,
// rather than time the run as None under the model's name.
func TestPMAsDRAMTakesNoneOnly(t *testing.T) {
	dram := hwmodel.PresetDRAM()
	gope := hwmodel.PresetGOPE()
	require.NoError(t, gope.Set("persist.none=true"))
	for _, cfg := range []hwmodel.Config{dram, gope} {
		require.Equal(t, []hwmodel.Model{hwmodel.None}, cfg.Models(), cfg.Name)
		be, err := hwmodel.New(cfg, hwmodel.None)
		require.NoError(t, err, cfg.Name)
		require.Equal(t, hwmodel.None, be.Model())
		require.Equal(t, "hwmodel/none/"+cfg.Name, be.Name())
		for _, m := range append(hwmodel.Models(), hwmodel.WriteBackADR, hwmodel.WriteBackPCT) {
			if m == hwmodel.None {
				continue
			}
			be, err := hwmodel.New(cfg, m)
			require.ErrorIs(t, err, hwmodel.ErrPMAsDRAM, "%s %s", cfg.Name, m)
			require.ErrorContains(t, err, m.String(), cfg.Name)
			require.Nil(t, be)
		}
	}
	// pmbench keys says so.
	for _, in := range hwmodel.KeyInfos() {
		if in.Key == "persist.none" {
			require.Contains(t, in.Doc, "only the None model")
			require.Contains(t, in.Doc, "New refuses any other model")
		}
	}
	// A machine with PM takes every model.
	near := hwmodel.PresetPMNear()
	require.Equal(t, hwmodel.Models(), near.Models())
	for _, m := range near.Models() {
		_, err := hwmodel.New(near, m)
		require.NoError(t, err, m.String())
	}
}
