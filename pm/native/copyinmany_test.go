//go:build unix

package native_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// CopyInMany through the backend's HostWrites leaves, after a reopen, the
// bytes single CopyIns leave, in every mode, inside Defer or not.
func TestCopyInManyDurable(t *testing.T) {
	writes := []struct {
		off  uint64
		data string
	}{{4, "aaaaaaaa"}, {6, "bb"}, {3, "c"}, {100, "far"}, {4, "dd"}, {5000, "next page"}}
	for _, mode := range []native.Mode{native.ModeLog, native.ModeUnsafeNoSync} {
		for _, deferred := range []bool{false, true} {
			var imgs [2][]byte
			for k, many := range []bool{false, true} {
				dir := t.TempDir()
				be, m := open(t, dir, native.Options{Mode: mode})
				r, err := m.CreateRegion("r", 8192)
				require.NoError(t, err)
				var ws []pm.Write
				for _, w := range writes {
					ws = append(ws, pm.Write{Addr: r.Base.Add(w.off), Data: []byte(w.data)})
				}
				run := func() error {
					if many {
						return m.CopyInMany(ws)
					}
					for _, w := range ws {
						if err := m.CopyIn(w.Addr, w.Data); err != nil {
							return err
						}
					}
					return nil
				}
				if deferred {
					require.NoError(t, be.Defer(run))
				} else {
					require.NoError(t, run())
				}
				require.NoError(t, be.Close())
				be2, m2 := open(t, dir, native.Options{Mode: mode})
				imgs[k] = make([]byte, r.Size)
				require.NoError(t, m2.CopyOut(r.Base, imgs[k]))
				require.NoError(t, be2.Close())
			}
			require.Equal(t, imgs[0], imgs[1], "%v deferred=%v", mode, deferred)
			require.Equal(t, "cddbbaaa", string(imgs[1][3:11]))
		}
	}
}

// An I/O error at write i of a CopyInMany reaches that call, naming write
// i, wrapped with ErrBackend and ErrIO: the writes before it are durable,
// and the backend refuses the next call.
func TestCopyInManyIOError(t *testing.T) {
	dir := t.TempDir()
	// Fail the second log sync: outside Defer each host write is one
	// sync of the log, so write 1 of 3 fails.
	logSyncs := 0
	armed := false
	inj := native.InjectorFunc(func(op native.FSOp, path string) error {
		if armed && op == native.FSSync && strings.Contains(filepath.Base(path), "LOG") {
			if logSyncs++; logSyncs == 2 {
				return syscall.EIO
			}
		}
		return nil
	})
	be, m := open(t, dir, native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), inj)})
	r, err := m.CreateRegion("r", 64)
	require.NoError(t, err)
	armed = true
	err = m.CopyInMany([]pm.Write{{Addr: r.Base, Data: []byte("one")}, {Addr: r.Base.Add(8), Data: []byte("two")}, {Addr: r.Base.Add(16), Data: []byte("three")}})
	require.ErrorIs(t, err, pm.ErrBackend)
	require.ErrorIs(t, err, native.ErrIO)
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorContains(t, err, "write 1 of 3")
	err = m.CopyInMany([]pm.Write{{Addr: r.Base.Add(32), Data: []byte("after")}})
	require.ErrorIs(t, err, native.ErrIO)
	require.ErrorContains(t, err, "write 0 of 1")
	_ = be.Close()

	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be2.Close()
	buf := make([]byte, 64)
	require.NoError(t, m2.CopyOut(r.Base, buf))
	require.Equal(t, "one", string(buf[:3]), "the write before the error is durable")
	require.Equal(t, make([]byte, 8), buf[16:24], "the writes after it were not issued")
	require.Equal(t, make([]byte, 8), buf[32:40])
}

// A closed backend fails the call; a bad address writes nothing.
func TestCopyInManyClosedAndBad(t *testing.T) {
	dir := t.TempDir()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog})
	r, err := m.CreateRegion("r", 64)
	require.NoError(t, err)
	err = m.CopyInMany([]pm.Write{{Addr: r.Base, Data: []byte("x")}, {Addr: r.Base.Add(64), Data: []byte("y")}})
	require.ErrorIs(t, err, pm.ErrOutOfRange)
	require.NoError(t, be.Close())
	require.ErrorIs(t, m.CopyInMany([]pm.Write{{Addr: r.Base, Data: []byte("x")}}), native.ErrClosed)

	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be2.Close()
	buf := make([]byte, 1)
	require.NoError(t, m2.CopyOut(r.Base, buf))
	require.Equal(t, []byte{0}, buf)
}
