package persistency_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
)

func TestParse(t *testing.T) {
	for _, m := range persistency.Models() {
		got, err := persistency.Parse(m.String())
		require.NoError(t, err)
		require.Equal(t, m, got)
		require.True(t, m.Valid())
	}
	got, err := persistency.Parse("SBRP")
	require.NoError(t, err)
	require.Equal(t, persistency.SBRP, got)
	// The write-back models' names, and their former ones.
	require.Equal(t, "writeback-adr", persistency.WriteBackADR.String())
	require.Equal(t, "writeback-pct", persistency.WriteBackPCT.String())
	for name, want := range map[string]persistency.Model{"restudy": persistency.WriteBackADR, "Restudy-PCT": persistency.WriteBackPCT} {
		got, err := persistency.Parse(name)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
	}
	_, err = persistency.Parse("tso")
	require.ErrorIs(t, err, persistency.ErrModel)
	require.False(t, persistency.Model(200).Valid())
	// The zero Model is no model: a forgotten one is not a silent Strict.
	require.False(t, persistency.Model(0).Valid())
	require.Equal(t, persistency.Unset, persistency.Model(0))
	require.Equal(t, "unset", persistency.Model(0).String())
	require.NotContains(t, persistency.Models(), persistency.Unset)
	_, err = persistency.Parse("unset")
	require.ErrorIs(t, err, persistency.ErrModel)
}

// The verb table states each model's rules; a change to it is a change of
// model semantics and must show here.
func TestVerbRules(t *testing.T) {
	const (
		o = persistency.Orders
		d = persistency.Durable
		r = persistency.Releases
		a = persistency.Acquires
		j = persistency.Joins
	)
	for _, tc := range []struct {
		m    persistency.Model
		k    pm.OpKind
		s    pm.Scope
		want persistency.Effect
	}{
		{persistency.SBRP, pm.OpOFence, pm.Thread, o},
		{persistency.SBRP, pm.OpDFence, pm.Thread, o | d},
		{persistency.SBRP, pm.OpPRel, pm.Block, r},
		{persistency.SBRP, pm.OpPAcq, pm.Device, a},
		{persistency.SBRP, pm.OpSyncThreads, pm.Block, 0},
		{persistency.SBRP, pm.OpPBarrier, pm.Block, o | j},
		{persistency.Epoch, pm.OpPRel, pm.Block, o | d | r},
		{persistency.Epoch, pm.OpPAcq, pm.Block, o | a},
		{persistency.Epoch, pm.OpSyncThreads, pm.Block, o | d | j},
		{persistency.GPM, pm.OpSyncThreads, pm.Block, o | d | j},
		{persistency.ScopedBarrier, pm.OpPBarrier, pm.Thread, o},
		{persistency.ScopedBarrier, pm.OpPBarrier, pm.Device, o | j},
		{persistency.ScopedBarrier, pm.OpSyncThreads, pm.Block, 0},
		{persistency.Strict, pm.OpSyncThreads, pm.Block, o | j},
		{persistency.Strict, pm.OpPAcq, pm.Block, o | a},
		{persistency.None, pm.OpDFence, pm.Thread, 0},
		{persistency.X86, pm.OpSFence, pm.Thread, o | d},
	} {
		require.Equal(t, tc.want, tc.m.Verb(tc.k, tc.s), "%v %v.%v: got %v", tc.m, tc.k, tc.s, tc.m.Verb(tc.k, tc.s))
	}
	require.True(t, persistency.SBRP.Scoped())
	require.False(t, persistency.Epoch.Scoped())
	require.True(t, persistency.Strict.ProgramOrder())
	require.True(t, persistency.Strict.AtomicsSync())
	require.True(t, persistency.COSPlay.Contexts() && persistency.COSPlay.CPU())
	require.True(t, persistency.None.Unordered())
	require.Equal(t, "orders+durable", (o | d).String())
	require.Equal(t, "none", persistency.Effect(0).String())
}
