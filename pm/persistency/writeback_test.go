package persistency_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
)

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
