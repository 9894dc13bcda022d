package persistency_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
)

func TestSchemeNames(t *testing.T) {
	var all []persistency.Scheme
	for _, group := range [][]persistency.Scheme{persistency.StrictSchemes(), persistency.KernelSchemes(), persistency.CTASchemes(), persistency.LoopSchemes()} {
		all = append(all, group...)
	}
	var names []string
	for _, s := range all {
		require.True(t, s.Valid(), "%v", s)
		got, err := persistency.ParseScheme(s.String())
		require.NoError(t, err)
		require.Equal(t, s, got)
		names = append(names, s.String())
	}
	require.Equal(t, []string{"SP_wt", "SP_clwb", "SP_clwb_pct", "EP_K", "EP_K_pct", "EP_C_wt", "EP_C_clwb", "EP_C_l2wb", "EP_L_wt", "EP_L_clwb", "EP_L_clwb_pct"}, names)
	require.Equal(t, "nvm", persistency.NVM.String())
	got, err := persistency.ParseScheme("NVM")
	require.NoError(t, err)
	require.Equal(t, persistency.NVM, got)
	require.False(t, persistency.Scheme{Gran: persistency.Baseline, PCT: true}.Valid())
	require.Equal(t, persistency.WriteBackPCT, persistency.KernelSchemes()[1].Model())
	require.Equal(t, persistency.WriteBackADR, persistency.CTASchemes()[0].Model())
	var undo []string
	for _, s := range persistency.UndoSchemes() {
		require.True(t, s.Valid(), "%+v", s)
		got, err := persistency.ParseScheme(s.String())
		require.NoError(t, err)
		require.Equal(t, s, got)
		undo = append(undo, s.String())
	}
	require.Equal(t, []string{"undo_K", "undo_K+idem", "undo_C+wt", "undo_C+wt+idem", "undo_C+clwb", "undo_C+clwb+idem", "undo_L+clwb", "undo_L+clwb+idem"}, undo)
	require.False(t, persistency.Scheme{Gran: persistency.PerStore, Undo: true}.Valid())
	require.False(t, persistency.Scheme{Gran: persistency.PerCTA, Idem: true}.Valid())
	for _, bad := range []string{"EP_K_wt", "SP_l2wb", "EP_X", "", "undo_SP+wt"} {
		_, err := persistency.ParseScheme(bad)
		require.ErrorIs(t, err, persistency.ErrModel, bad)
	}
}

func TestWriteBackVerbRules(t *testing.T) {
	const (
		o  = persistency.Orders
		d  = persistency.Durable
		j  = persistency.Joins
		wb = persistency.WritesBack
		c  = persistency.Commits
	)
	for _, tc := range []struct {
		m    persistency.Model
		k    pm.OpKind
		want persistency.Effect
	}{
		{persistency.WriteBackADR, pm.OpCLWB, wb},
		{persistency.WriteBackADR, pm.OpL2WB, wb},
		{persistency.WriteBackADR, pm.OpPCommit, 0},
		{persistency.WriteBackPCT, pm.OpPCommit, c},
		{persistency.WriteBackADR, pm.OpMemBar, o | d},
		{persistency.WriteBackADR, pm.OpDFence, o | d | wb | c},
		{persistency.WriteBackADR, pm.OpSyncThreads, o | j},
		{persistency.SBRP, pm.OpMemBar, o | d},
		{persistency.SBRP, pm.OpCLWB, 0},
		{persistency.Epoch, pm.OpL2WB, 0},
		{persistency.None, pm.OpMemBar, 0},
	} {
		require.Equal(t, tc.want, tc.m.Verb(tc.k, pm.Thread), "%v %v", tc.m, tc.k)
	}
	require.True(t, persistency.WriteBackPCT.WriteBack())
	require.False(t, persistency.Epoch.WriteBack())
	require.Equal(t, "writes-back+commits", (wb | c).String())
}
