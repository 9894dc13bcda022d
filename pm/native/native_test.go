//go:build unix

package native_test

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/pm/record"
	"github.com/scopedpm/scopedpm/scope"
)

func open(t *testing.T, dir string, opts native.Options) (*native.Backend, *pm.Machine) {
	t.Helper()
	be, err := native.Open(dir, opts)
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	return be, m
}

// A region survives closing and reopening: same base, same bytes, written
// both by a kernel and by the host.
func TestReopen(t *testing.T) {
	for _, mode := range []native.Mode{native.ModeLog, native.ModeUnsafeNoSync} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			be, m := open(t, dir, native.Options{Mode: mode})
			require.Equal(t, mode, be.Mode())
			require.Equal(t, "native/"+mode.String(), be.Name())
			_, err := m.CreateRegion("other", 64)
			require.NoError(t, err)
			r, err := m.CreateRegion("data", 8*64)
			require.NoError(t, err)
			require.NoError(t, m.CopyIn(r.Base, []byte("host")))
			_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(th *scope.Thread) {
				a := r.Base.Add(uint64(8 * th.ID()))
				if th.ID() == 0 {
					return
				}
				th.Store64(a, uint64(th.ID())*3)
				th.OFence()
				th.Store32(a, uint32(th.ID()))
				th.DFence()
			})
			require.NoError(t, err)
			require.NoError(t, be.Close())

			be2, m2 := open(t, dir, native.Options{Mode: mode})
			defer be2.Close()
			r2, err := m2.OpenRegion("data")
			require.NoError(t, err)
			require.Equal(t, r, r2)
			buf := make([]byte, r.Size)
			require.NoError(t, m2.CopyOut(r.Base, buf))
			require.Equal(t, "host", string(buf[:4]))
			for i := 1; i < 64; i++ {
				want := uint64(i)*3&^0xffffffff | uint64(i)
				require.Equal(t, want, binary.LittleEndian.Uint64(buf[8*i:]), "word %d", i)
			}
			require.Len(t, m2.Regions(), 2)
			require.NoError(t, m2.RemoveRegion("other"))
			_, err = os.Stat(filepath.Join(dir, "other.pmr"))
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

// A second backend cannot open a directory in use.
func TestLocked(t *testing.T) {
	dir := t.TempDir()
	be, err := native.Open(dir, native.Options{})
	require.NoError(t, err)
	_, err = native.Open(dir, native.Options{})
	require.ErrorIs(t, err, native.ErrLocked)
	require.NoError(t, be.Close())
	be, err = native.Open(dir, native.Options{})
	require.NoError(t, err)
	require.NoError(t, be.Close())
}

// makeRegion writes one region file of size bytes with one word set and
// returns its path.
func makeRegion(t *testing.T, dir string, size uint64) string {
	t.Helper()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog})
	r, err := m.CreateRegion("r", size)
	require.NoError(t, err)
	require.NoError(t, m.CopyIn(r.Base, []byte{1, 2, 3, 4, 5, 6, 7, 8}))
	require.NoError(t, be.Close())
	return filepath.Join(dir, "r.pmr")
}

func rechecksum(b []byte) {
	binary.LittleEndian.PutUint32(b[native.HeaderSize-4:], crc32.Checksum(b[:native.HeaderSize-4], crc32.MakeTable(crc32.Castagnoli)))
}

// Every kind of bad region file is a clear error at Open, never a panic.
func TestBadFiles(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		want   []error
	}{
		{"truncated header", func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 100)) }, []error{pm.ErrCorrupt}},
		{"empty file", func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 0)) }, []error{pm.ErrCorrupt}},
		{"truncated data", func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, native.HeaderSize+100)) }, []error{pm.ErrCorrupt, native.ErrSizeMismatch}},
		{"extended", func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, native.HeaderSize+8192)) }, []error{pm.ErrCorrupt, native.ErrSizeMismatch}},
		{"foreign", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, append([]byte("%PDF-1.7\n"), make([]byte, 5000)...), 0o644))
		}, []error{pm.ErrCorrupt, native.ErrForeign}},
		{"flipped header bit", func(t *testing.T, p string) { flip(t, p, 17) }, []error{pm.ErrCorrupt}},
		{"flipped checksum bit", func(t *testing.T, p string) { flip(t, p, native.HeaderSize-2) }, []error{pm.ErrCorrupt}},
		{"other version", func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			binary.LittleEndian.PutUint32(b[8:], 2)
			rechecksum(b)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, []error{pm.ErrCorrupt, native.ErrVersion}},
		{"size too large in header", func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			binary.LittleEndian.PutUint64(b[16:], 1<<62)
			rechecksum(b)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, []error{pm.ErrCorrupt}},
		{"renamed file", func(t *testing.T, p string) {
			require.NoError(t, os.Rename(p, filepath.Join(filepath.Dir(p), "s.pmr")))
		}, []error{pm.ErrCorrupt}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := makeRegion(t, dir, 4096)
			c.damage(t, p)
			_, err := native.Open(dir, native.Options{Mode: native.ModeLog})
			require.Error(t, err)
			for _, w := range c.want {
				require.ErrorIs(t, err, w)
			}
			t.Log(err)
		})
	}
	t.Run("missing directory", func(t *testing.T) {
		_, err := native.Open(filepath.Join(t.TempDir(), "nope"), native.Options{})
		require.ErrorIs(t, err, native.ErrIO)
		require.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("reopened with another size", func(t *testing.T) {
		dir := t.TempDir()
		makeRegion(t, dir, 4096)
		be, m := open(t, dir, native.Options{Mode: native.ModeLog})
		defer be.Close()
		_, err := native.OpenRegion(m, "r", 8192)
		require.ErrorIs(t, err, native.ErrSizeMismatch)
		r, err := native.OpenRegion(m, "r", 4096)
		require.NoError(t, err)
		require.Equal(t, uint64(4096), r.Size)
		r2, err := native.OpenRegion(m, "new", 128)
		require.NoError(t, err)
		require.Equal(t, uint64(128), r2.Size)
	})
	t.Run("stale temporary file", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "x.pmr.tmp"), []byte("half"), 0o644))
		be, m := open(t, dir, native.Options{Mode: native.ModeLog})
		defer be.Close()
		require.Empty(t, m.Regions())
		_, err := os.Stat(filepath.Join(dir, "x.pmr.tmp"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func flip(t *testing.T, p string, off int) {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[off] ^= 0x10
	require.NoError(t, os.WriteFile(p, b, 0o644))
}

func TestHeaderRoundTrip(t *testing.T) {
	h := native.Header{Version: native.FormatVersion, Size: 12345, Base: 7 << pm.OffsetBits, Name: "a region"}
	got, err := native.DecodeHeader(h.Encode())
	require.NoError(t, err)
	require.Equal(t, h, got)
	for n := 0; n < native.HeaderSize; n += 97 {
		_, err := native.DecodeHeader(h.Encode()[:n])
		require.ErrorIs(t, err, pm.ErrCorrupt, "%d bytes", n)
	}
}

// FuzzDecodeHeader: any bytes decode to a valid header or an error wrapping
// pm.ErrCorrupt, and a decoded header encodes back to the same bytes.
func FuzzDecodeHeader(f *testing.F) {
	good := native.Header{Version: native.FormatVersion, Size: 4096, Base: 1 << pm.OffsetBits, Name: "r"}.Encode()
	f.Add(good)
	f.Add(good[:100])
	f.Add([]byte("SCPMREG\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := native.DecodeHeader(b)
		if err != nil {
			require.ErrorIs(t, err, pm.ErrCorrupt)
			return
		}
		require.NotZero(t, h.Size)
		require.NotEmpty(t, h.Name)
		require.Equal(t, b[:native.HeaderSize], h.Encode())
	})
}

func TestParseMode(t *testing.T) {
	for _, m := range []native.Mode{native.ModeAuto, native.ModeLog, native.ModeDAX, native.ModeUnsafeNoSync} {
		got, err := native.ParseMode(m.String())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	got, err := native.ParseMode("msync") // the log mode's former name
	require.NoError(t, err)
	require.Equal(t, native.ModeLog, got)
	_, err = native.ParseMode("fsync")
	require.ErrorIs(t, err, native.ErrUnsupported)
}

// Without a DAX filesystem (this test's temporary directory), auto falls
// back to the log and an explicit dax request is refused.
func TestDAXFallback(t *testing.T) {
	dir := t.TempDir()
	if native.DAXSupport(dir) == nil {
		t.Skip("the temporary directory supports MAP_SYNC: a DAX filesystem")
	}
	t.Log("dax unavailable:", native.DAXSupport(dir))
	be, err := native.Open(dir, native.Options{})
	require.NoError(t, err)
	require.Equal(t, native.ModeLog, be.Mode())
	require.NoError(t, be.Close())
	_, err = native.Open(dir, native.Options{Mode: native.ModeDAX})
	require.ErrorIs(t, err, native.ErrUnsupported)
}

// A wrapper that hides pm.Storage would make the machine keep its regions
// in memory: the backend refuses to run kernels on them rather than
// pretend they are durable.
func TestWrappedWithoutStorage(t *testing.T) {
	// A wrapper that exposes what it wraps (pm.Wrapper, as the recorder
	// does) keeps the regions on file.
	be, err := native.Open(t.TempDir(), native.Options{Mode: native.ModeLog})
	require.NoError(t, err)
	defer be.Close()
	m, err := pm.NewMachine(record.New(be, false))
	require.NoError(t, err)
	r, err := m.CreateRegion("d", 64)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store64(r.Base, 1) })
	require.NoError(t, err)
	stored, err := be.Stored()
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.Equal(t, "d", stored[0].Name)

	// One that hides it leaves the regions in memory only: refused.
	be2, err := native.Open(t.TempDir(), native.Options{Mode: native.ModeLog})
	require.NoError(t, err)
	defer be2.Close()
	m, err = pm.NewMachine(opaque{be2})
	require.NoError(t, err)
	r, err = m.CreateRegion("d", 64)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store64(r.Base, 1) })
	require.ErrorIs(t, err, native.ErrNotStored)
}

// opaque wraps a backend without exposing it (no Unwrap).
type opaque struct{ pm.Backend }
