package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
)

// The experiments' typed edits build the machines their key=value
// overrides built before (the golden files depend on it): each edit, then
// the run's -set, gives the configuration the overrides and the -set give.
func TestEditsAreTheOverrides(t *testing.T) {
	near := hwmodel.PresetPMNear()
	fifo := func(l1, l2 int) edit {
		return func(c *hwmodel.Config) { c.Persist.NVWFIFOL1, c.Persist.NVWFIFOL2 = l1, l2 }
	}
	for _, tc := range []struct {
		preset string
		edit   edit
		set    []string
	}{
		{"pm-near", func(c *hwmodel.Config) { c.Persist.BufferEntries = 32 }, []string{"persist.buffer_entries=32"}},
		{"pm-near", func(c *hwmodel.Config) { c.Persist.Window = 12 }, []string{"persist.window=12"}},
		{"pm-near", func(c *hwmodel.Config) { c.NVM.ReadGBps *= 0.5; c.NVM.WriteGBps *= 0.5 },
			[]string{fmt.Sprintf("nvm.read_gbps=%g", near.NVM.ReadGBps*0.5), fmt.Sprintf("nvm.write_gbps=%g", near.NVM.WriteGBps*0.5)}},
		{"pm-near", func(c *hwmodel.Config) { c.NVM.ReadGBps *= 2; c.NVM.WriteGBps *= 2 },
			[]string{fmt.Sprintf("nvm.read_gbps=%g", near.NVM.ReadGBps*2), fmt.Sprintf("nvm.write_gbps=%g", near.NVM.WriteGBps*2)}},
		{"gope", gopeDRAM.edit, []string{"persist.none=true"}},
		{"gope", fifo(256, 1024), []string{"persist.nvw_fifo_l1=256", "persist.nvw_fifo_l2=1024"}},
		{"cosplay", func(c *hwmodel.Config) { c.CPU.BMOCycles = 700 }, []string{"cpu.bmo_cycles=700"}},
		{"pm-far", nil, nil},
	} {
		for _, user := range [][]string{nil, {"nvm.write_latency_cycles=500"}} {
			want, err := hwmodel.Preset(tc.preset)
			require.NoError(t, err)
			require.NoError(t, want.Set(append(append([]string(nil), tc.set...), user...)...))
			got, err := Options{Set: user}.config(tc.preset, tc.edit)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s %v %v", tc.preset, tc.set, user)
		}
	}
	// edits chains in order and skips nil.
	c := near
	edits(nil, func(c *hwmodel.Config) { c.Persist.Window = 3 }, func(c *hwmodel.Config) { c.Persist.Window++ })(&c)
	require.Equal(t, 4, c.Persist.Window)
}

// A registered experiment builds machines only from the presets it
// declares (Experiment.Presets), so that pmbench's check of -set before
// the run covers every machine it builds.
func TestUndeclaredPresetFails(t *testing.T) {
	o := Options{Quick: true, presets: []string{"pm-near"}, declared: true}
	_, err := o.config("pm-near", nil)
	require.NoError(t, err)
	_, err = o.config("volta", nil)
	require.ErrorContains(t, err, `preset "volta", which the experiment does not declare`)
	// Register passes the declaration to the run.
	var seen Options
	e := Experiment{Name: "test-presets", Presets: []string{"gope"}, Run: func(_ context.Context, o Options) ([]Row, error) {
		seen = o
		return nil, nil
	}}
	saved := slices.Clone(registry)
	t.Cleanup(func() { registry = saved })
	Register(e)
	got, ok := Lookup("test-presets")
	require.True(t, ok)
	_, err = got.Run(context.Background(), Options{})
	require.NoError(t, err)
	require.True(t, seen.declared)
	require.Equal(t, []string{"gope"}, seen.presets)
}
