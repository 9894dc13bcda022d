//go:build unix

package native

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

// A finished background checkpoint leaves its log as LOG.free, and the
// next log is that file, written over: its records of older generations
// are never replayed, neither after the new log's last record nor after
// a torn one (a header of the current generation over garbage, as a
// power cut in the middle of a record leaves it); Open recovers every
// write and removes LOG.free, and Close removes it too.
func TestLogRecycled(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Mode: ModeLog, CheckpointBytes: 4 << 10}
	be, err := Open(dir, opts)
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(t, err)
	want := make([]byte, r.Size)
	n := 0
	write := func() {
		off := uint64(n*72) % (r.Size - 8)
		binary.LittleEndian.PutUint64(want[off:], uint64(n+1))
		require.NoError(t, m.CopyIn(r.Base.Add(off), want[off:off+8]), "write %d", n)
		n++
	}
	logPath, freePath := filepath.Join(dir, logName), filepath.Join(dir, freeLogName)
	reused := 0
	for range 4 {
		// Write until a checkpoint starts, then let it finish.
		for c := be.Stats().Checkpoints; be.Stats().Checkpoints == c; {
			write()
		}
		require.NoError(t, be.WaitCheckpoint())
		free, err := os.Stat(freePath)
		require.NoError(t, err, "a finished checkpoint keeps its log")
		for c := be.Stats().Checkpoints; be.Stats().Checkpoints == c; {
			write()
		}
		log, err := os.Stat(logPath)
		require.NoError(t, err)
		require.True(t, os.SameFile(free, log), "the next log is the free one")
		reused++
		require.NoError(t, be.WaitCheckpoint())
	}
	write() // a record in the reused log, with older records after it
	img, err := m.Crash()
	require.NoError(t, err)
	rg, _ := img.Region("d")
	require.Equal(t, want, rg.Data, "the durable image")

	// A torn record after the last one: a valid-looking header of the
	// log's generation over garbage.
	f, size, err := openLog(OSFS(), logPath)
	require.NoError(t, err)
	gen, end, records, err := scanLogAt(f, size, scanPiece, func(logEntry) error { return nil }, nil)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NotZero(t, records)
	require.Greater(t, size-end, int64(4<<10), "older records follow the last one")
	torn := make([]byte, 200)
	for i := range torn {
		torn[i] = byte(i*7 + 1)
	}
	binary.LittleEndian.PutUint32(torn[4:], uint32(len(torn)))
	binary.LittleEndian.PutUint64(torn[8:], gen)
	lf, err := os.OpenFile(logPath, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = lf.WriteAt(torn, end)
	require.NoError(t, err)
	require.NoError(t, lf.Close())

	be2, err := Open(dir, opts)
	require.NoError(t, err)
	m2, err := pm.NewMachine(be2)
	require.NoError(t, err)
	got := make([]byte, r.Size)
	require.NoError(t, m2.CopyOut(r.Base, got))
	require.Equal(t, want, got, "after %d writes over %d reused logs", n, reused)
	_, err = os.Stat(freePath)
	require.ErrorIs(t, err, os.ErrNotExist, "Open removes the free log")

	// Close removes a free log too.
	for c := be2.Stats().Checkpoints; be2.Stats().Checkpoints == c; {
		require.NoError(t, m2.CopyIn(r.Base, want[:64]))
	}
	require.NoError(t, be2.WaitCheckpoint())
	_, err = os.Stat(freePath)
	require.NoError(t, err)
	require.NoError(t, be2.Close())
	_, err = os.Stat(freePath)
	require.ErrorIs(t, err, os.ErrNotExist, "Close removes the free log")
}
