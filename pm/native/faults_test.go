//go:build unix

package native_test

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/scope"
)

// failer is an Injector that, once armed, fails the first operation of
// kind op on a file whose name contains file, with err.
type failer struct {
	mu    sync.Mutex
	op    native.FSOp
	file  string
	err   error
	armed bool
	hit   int
}

func (f *failer) MaybeError(op native.FSOp, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed && op == f.op && strings.Contains(filepath.Base(path), f.file) {
		f.armed = false
		f.hit++
		return f.err
	}
	return nil
}

func (f *failer) arm() {
	f.mu.Lock()
	f.armed = true
	f.mu.Unlock()
}

// An injected I/O error reaches the call whose durability it breaks,
// wrapped with ErrIO and the cause; the backend then refuses writes; a
// reopen recovers every acknowledged write, and the failed one is either
// there whole or absent (its outcome was unknown).
func TestIOErrors(t *testing.T) {
	cases := []struct {
		name   string
		op     native.FSOp
		file   string
		errno  syscall.Errno
		action string // "copyin", "launch", "midlaunch" or "close"
	}{
		{"log write in CopyIn", native.FSWrite, "LOG", syscall.EIO, "copyin"},
		{"log sync in CopyIn", native.FSSync, "LOG", syscall.EIO, "copyin"},
		{"log write ENOSPC in CopyIn", native.FSWrite, "LOG", syscall.ENOSPC, "copyin"},
		{"log sync at a launch's end", native.FSSync, "LOG", syscall.EIO, "launch"},
		{"log write at a launch's end", native.FSWrite, "LOG", syscall.ENOSPC, "launch"},
		{"log sync mid-launch", native.FSSync, "LOG", syscall.EIO, "midlaunch"},
		{"region write at Close", native.FSWrite, ".pmr", syscall.EIO, "close"},
		{"region sync at Close", native.FSSync, ".pmr", syscall.EIO, "close"},
		{"log rename at Close", native.FSRename, "LOG", syscall.EIO, "close"},
		{"directory sync at Close", native.FSSyncDir, "", syscall.EIO, "close"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			inj := &failer{op: c.op, file: c.file, err: c.errno}
			opts := native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS, inj)}
			if c.action == "midlaunch" {
				opts.MaxPending = 4
			}
			be, m := open(t, dir, opts)
			r, err := m.CreateRegion("d", 8*64)
			require.NoError(t, err)
			require.NoError(t, m.CopyIn(r.Base, le(1)))
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 8}, func(t *scope.Thread) {
				t.Store64(r.Base.Add(8*uint64(8+t.ID())), 2)
			})
			require.NoError(t, err)

			inj.arm()
			var failed error
			switch c.action {
			case "copyin":
				failed = m.CopyIn(r.Base.Add(8*32), le(3))
			case "launch", "midlaunch":
				_, failed = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 8}, func(t *scope.Thread) {
					t.Store64(r.Base.Add(8*uint64(32+t.ID())), 3)
				})
			case "close":
				failed = be.Close()
			}
			require.Equal(t, 1, inj.hit, "the fault was injected")
			require.ErrorIs(t, failed, native.ErrIO)
			require.ErrorIs(t, failed, c.errno)
			t.Log(failed)
			if c.action != "close" {
				// Refused until reopened.
				require.ErrorIs(t, m.CopyIn(r.Base.Add(8*40), le(4)), native.ErrIO)
				_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store64(r.Base, 9) })
				require.ErrorIs(t, err, native.ErrIO)
				require.ErrorIs(t, be.Commit(), native.ErrIO)
				require.ErrorIs(t, be.Close(), native.ErrIO)
			}
			require.ErrorIs(t, m.CopyIn(r.Base, le(5)), native.ErrClosed)

			be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
			defer be2.Close()
			buf := make([]byte, 8*64)
			require.NoError(t, m2.CopyOut(r.Base, buf))
			w := func(i int) uint64 { return binary.LittleEndian.Uint64(buf[8*i:]) }
			require.Equal(t, uint64(1), w(0), "acknowledged host write")
			for i := 8; i < 16; i++ {
				require.Equal(t, uint64(2), w(i), "acknowledged launch, word %d", i)
			}
			require.Zero(t, w(40), "a write refused after the error")
			// The failed call: all, some prefix (mid-launch syncs), or none.
			seen0 := false
			for i := 32; i < 40; i++ {
				if c.action == "copyin" && i > 32 {
					break
				}
				v := w(i)
				require.Contains(t, []uint64{0, 3}, v, "word %d", i)
				if v == 0 {
					seen0 = true
				} else {
					require.False(t, seen0, "word %d durable after a lost earlier one", i)
				}
			}
		})
	}
}

func le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// Every durability point costs exactly one sync of the log (counted
// through the FS seam), and nothing to sync costs none.
func TestSyncsPerDurabilityPoint(t *testing.T) {
	var cnt native.Counter
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS, &cnt)})
	defer be.Close()
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(t, err)
	cases := []struct {
		name  string
		do    func() error
		syncs uint64
	}{
		{"host write", func() error { return m.CopyIn(r.Base, make([]byte, 5000)) }, 1},
		{"launch of 1024 threads with OFences and DFences", func() error {
			_, err := scope.Launch(m, scope.Grid{Blocks: 4, Threads: 256}, func(t *scope.Thread) {
				a := r.Base.Add(8 * uint64(t.ID()))
				t.Store64(a, 1)
				t.OFence()
				t.Store64(a, 2)
				t.DFence()
				t.PRel(r.Base.Add(1<<15+8*uint64(t.ID())), 1, pm.Device)
			})
			return err
		}, 1},
		{"launch without persists", func() error {
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) { t.Load64(r.Base) })
			return err
		}, 0},
		{"commit with nothing pending", be.Commit, 0},
		{"host write of one word", func() error { return m.CopyIn(r.Base.Add(64), le(7)) }, 1},
	}
	for _, c := range cases {
		s0 := cnt.Count(native.FSSync)
		require.NoError(t, c.do(), c.name)
		require.Equal(t, c.syncs, cnt.Count(native.FSSync)-s0, c.name)
	}
}

// After Close every mode refuses use with ErrClosed, never a crash.
func TestUseAfterClose(t *testing.T) {
	for _, mode := range []native.Mode{native.ModeLog, native.ModeUnsafeNoSync} {
		t.Run(mode.String(), func(t *testing.T) {
			be, m := open(t, t.TempDir(), native.Options{Mode: mode})
			r, err := m.CreateRegion("d", 64)
			require.NoError(t, err)
			require.NoError(t, m.CopyIn(r.Base, le(1)))
			require.NoError(t, be.Close())
			require.NoError(t, be.Close(), "a second Close is a no-op")
			require.ErrorIs(t, m.CopyIn(r.Base, le(2)), native.ErrClosed)
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store64(r.Base, 3) })
			require.ErrorIs(t, err, native.ErrClosed)
			_, err = m.CreateRegion("e", 64)
			require.ErrorIs(t, err, native.ErrClosed)
			require.ErrorIs(t, be.Commit(), native.ErrClosed)
			buf := make([]byte, 8)
			require.NoError(t, m.CopyOut(r.Base, buf), "the visible image stays readable")
		})
	}
}
