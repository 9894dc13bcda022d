package workloads_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/workloads"
)

func TestSchemeNames(t *testing.T) {
	var all []workloads.Scheme
	for _, group := range [][]workloads.Scheme{workloads.StrictSchemes(), workloads.KernelSchemes(), workloads.CTASchemes(), workloads.LoopSchemes()} {
		all = append(all, group...)
	}
	var names []string
	for _, s := range all {
		require.True(t, s.Valid(), "%v", s)
		got, err := workloads.ParseScheme(s.String())
		require.NoError(t, err)
		require.Equal(t, s, got)
		names = append(names, s.String())
	}
	require.Equal(t, []string{"SP_wt", "SP_clwb", "SP_clwb_pct", "EP_K", "EP_K_pct", "EP_C_wt", "EP_C_clwb", "EP_C_l2wb", "EP_L_wt", "EP_L_clwb", "EP_L_clwb_pct"}, names)
	require.Equal(t, "nvm", workloads.NVM().String())
	got, err := workloads.ParseScheme("NVM")
	require.NoError(t, err)
	require.Equal(t, workloads.NVM(), got)
	require.False(t, workloads.Scheme{Gran: workloads.Baseline, PCT: true}.Valid())
	require.Equal(t, persistency.WriteBackPCT, workloads.KernelSchemes()[1].Model())
	require.Equal(t, persistency.WriteBackADR, workloads.CTASchemes()[0].Model())
	var undo []string
	for _, s := range workloads.UndoSchemes() {
		require.True(t, s.Valid(), "%+v", s)
		got, err := workloads.ParseScheme(s.String())
		require.NoError(t, err)
		require.Equal(t, s, got)
		undo = append(undo, s.String())
	}
	require.Equal(t, []string{"undo_K", "undo_K+idem", "undo_C+wt", "undo_C+wt+idem", "undo_C+clwb", "undo_C+clwb+idem", "undo_L+clwb", "undo_L+clwb+idem"}, undo)
	require.False(t, workloads.Scheme{Gran: workloads.PerStore, Undo: true}.Valid())
	require.False(t, workloads.Scheme{Gran: workloads.PerCTA, Idem: true}.Valid())
	for _, bad := range []string{"EP_K_wt", "SP_l2wb", "EP_X", "", "undo_SP+wt"} {
		_, err := workloads.ParseScheme(bad)
		require.ErrorIs(t, err, persistency.ErrModel, bad)
	}
}
