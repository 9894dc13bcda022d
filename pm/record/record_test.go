package record_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
	"github.com/scopedpm/scopedpm/scope"
)

func TestPersistPrefixes(t *testing.T) {
	rec := record.New(functional.New(pm.GPULimits{}), true)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	r, err := m.CreateRegion("r", 64)
	require.NoError(t, err)
	v, err := m.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	base := m.Memory().Snapshot()
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(t *scope.Thread) {
		me := r.Base.Add(uint64(32 * t.ID()))
		t.Store64(v, 1) // volatile: no persist
		t.StoreBytes(me.Add(4), []byte("0123456789ab"))
		t.OFence()
		t.Store32(me, 0xfeed)
	})
	require.NoError(t, err)
	ps := rec.Persists()
	// Each thread: the 12-byte store splits into 4+8 bytes, then one 4-byte store.
	require.Len(t, ps, 6)
	require.Equal(t, 0, ps[0].Agent.ID)
	require.Equal(t, uint64(1), ps[0].Seq, "the volatile store is verb 0")
	require.Equal(t, uint64(3), ps[2].Seq, "after the OFence")

	full, err := record.Image(base, ps)
	require.NoError(t, err)
	img, err := m.Crash()
	require.NoError(t, err)
	require.True(t, full.Equal(img), "all persists applied give the functional crash image")

	none, err := record.Image(base, nil)
	require.NoError(t, err)
	require.True(t, none.Equal(base))
	half, err := record.Image(base, ps[:1])
	require.NoError(t, err)
	rr, _ := half.Region("r")
	require.Equal(t, "0123", string(rr.Data[4:8]))
	require.Equal(t, make([]byte, 8), rr.Data[8:16], "the second word is torn off")

	for _, e := range rec.Events() {
		require.Contains(t, e.Site, "record_test.go:")
	}
}
