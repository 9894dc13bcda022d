//go:build unix

package native

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The dax write-back path (CLWB or CLFLUSHOPT on every dirty line, then
// SFENCE, per epoch) runs on this machine's page-cache mapping: there it
// proves nothing about durability (no DAX device), but it must carry every
// persist to the file and count its syncs.
func TestDAXPathOnPageCache(t *testing.T) {
	cpu := detectCPU()
	if !cpu.has() {
		t.Skip("CPU has neither CLWB nor CLFLUSHOPT")
	}
	dir := t.TempDir()
	be, err := Open(dir, Options{daxOnPageCache: true})
	require.NoError(t, err)
	require.Equal(t, ModeDAX, be.Mode())
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	r, err := m.CreateRegion("d", 8*1024)
	require.NoError(t, err)
	s0 := be.Stats()
	_, err = scope.Launch(m, scope.Grid{Blocks: 4, Threads: 256}, func(t *scope.Thread) {
		i := uint64(t.ID())
		t.Store64(r.Base.Add(8*i), i+1)
		t.OFence()
		t.Store32(r.Base.Add(8*i+4), uint32(i))
		t.DFence()
	})
	require.NoError(t, err)
	st := be.Stats()
	require.Equal(t, uint64(2), st.Syncs-s0.Syncs)
	require.Equal(t, uint64(2*8*1024-4), st.SyncBytes-s0.SyncBytes)
	require.NoError(t, be.Close())
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store64(r.Base, 1) })
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, m.CopyIn(r.Base, []byte{1}), ErrClosed)

	be2, err := Open(dir, Options{Mode: ModeLog})
	require.NoError(t, err)
	defer be2.Close()
	data := be2.region("d").data
	for i := range 1024 {
		require.Equal(t, uint64(i)<<32|uint64(i+1), binary.LittleEndian.Uint64(data[8*i:]), "word %d", i)
	}
}
