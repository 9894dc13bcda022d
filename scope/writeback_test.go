package scope_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
	"github.com/scopedpm/scopedpm/scope"
)

// The re-study's verbs reach the backend with their kinds, a
// write-through store is a store with WT set, and a bad CLWB address
// faults.
func TestWriteBackVerbsReported(t *testing.T) {
	rec := record.New(functional.New(pm.GPULimits{}), false)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	r, err := m.CreateRegion("r", 256)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		t.StoreWT64(r.Base, 7)
		t.StoreWT32(r.Base+8, 9)
		t.Store64(r.Base+128, 1)
		t.CLWB(r.Base + 130)
		t.L2WB()
		t.PCommit()
		t.MemBar()
	})
	require.NoError(t, err)
	var got []string
	for _, ev := range rec.Events() {
		got = append(got, ev.Op.String())
	}
	require.Equal(t, []string{
		"Store.wt 8@" + r.Base.String(), "Store.wt 4@" + (r.Base + 8).String(), "Store 8@" + (r.Base + 128).String(),
		"CLWB " + (r.Base + 130).String(), "L2WB", "PCommit", "MemBar",
	}, got)
	v, err := m.Memory().Load(r.Base, 8)
	require.NoError(t, err)
	require.Equal(t, uint64(7), v)

	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.CLWB(0) })
	require.ErrorIs(t, err, scope.ErrFault)
}
