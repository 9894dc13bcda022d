//go:build unix

package native_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
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
			opts := native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), inj)}
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
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
	defer be.Close()
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(t, err)
	cases := []struct {
		name  string
		do    func() error
		syncs uint64
	}{
		{"host write", func() error { return m.CopyIn(r.Base, make([]byte, 5000)) }, 1},
		// Two durability points, each reached by every thread in one
		// round: the DFences, then the PRels (durable, as under scoped
		// barriers); the launch's end finds nothing left to sync.
		{"launch of 1024 threads with OFences, DFences and PRels", func() error {
			_, err := scope.Launch(m, scope.Grid{Blocks: 4, Threads: 256}, func(t *scope.Thread) {
				a := r.Base.Add(8 * uint64(t.ID()))
				t.Store64(a, 1)
				t.OFence()
				t.Store64(a, 2)
				t.DFence()
				t.PRel(r.Base.Add(1<<15+8*uint64(t.ID())), 1, pm.Device)
			})
			return err
		}, 2},
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
			tr, err := btree.Create(m, "tree", btree.Options{Capacity: 64})
			require.NoError(t, err)
			require.NoError(t, tr.Put(1, 10))
			require.NoError(t, be.Close())
			// A tree used after Close: an error, not a crash.
			require.ErrorIs(t, tr.Put(2, 20), native.ErrClosed)
			_, _, err = tr.Get(1)
			require.ErrorIs(t, err, native.ErrClosed)
			require.NoError(t, be.Close(), "a second Close is a no-op")
			require.ErrorIs(t, m.CopyIn(r.Base, le(2)), native.ErrClosed)
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store64(r.Base, 3) })
			require.ErrorIs(t, err, native.ErrClosed)
			_, err = m.CreateRegion("e", 64)
			require.ErrorIs(t, err, native.ErrClosed)
			require.ErrorIs(t, be.Commit(), native.ErrClosed)
			buf := make([]byte, 8)
			require.ErrorIs(t, m.CopyOut(r.Base, buf), native.ErrClosed, "the image is gone with the backend")
			require.Empty(t, m.Regions())
		})
	}
}

// nthFailer fails the n-th file operation (1-based) it sees, of any kind.
type nthFailer struct {
	mu   sync.Mutex
	n    int
	seen int
	op   native.FSOp
	path string
}

func (f *nthFailer) MaybeError(op native.FSOp, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen++
	if f.seen == f.n {
		f.op, f.path = op, path
		return syscall.EIO
	}
	return nil
}

// copyDir copies the plain files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

// Open of a directory with a log to replay, with its n-th file operation
// failing, for every n: an error wrapping ErrIO (never a panic), and a
// later Open recovers every acknowledged write.
func TestOpenFaultSweep(t *testing.T) {
	tmpl := t.TempDir()
	_, m := open(t, tmpl, native.Options{Mode: native.ModeLog})
	r, err := m.CreateRegion("d", 8*64)
	require.NoError(t, err)
	_, err = m.CreateRegion("e", 64)
	require.NoError(t, err)
	for i := range 8 {
		require.NoError(t, m.CopyIn(r.Base.Add(8*uint64(i)), le(uint64(i+1))))
	}
	_, err = m.Crash() // leaves the log to replay
	require.NoError(t, err)

	failed := 0
	for n := 1; ; n++ {
		dir := copyDir(t, tmpl)
		inj := &nthFailer{n: n}
		be, err := native.Open(dir, native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), inj)})
		if err == nil {
			require.Less(t, inj.seen, n, "operation %d failed but Open succeeded", n)
			inj.mu.Lock()
			inj.n = 0
			inj.mu.Unlock()
			require.NoError(t, be.Close())
			t.Logf("Open takes %d file operations; each one failing was reported", n-1)
			break
		}
		failed++
		require.ErrorIs(t, err, native.ErrIO, "failing operation %d (%s %s)", n, inj.op, filepath.Base(inj.path))
		be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
		buf := make([]byte, 64)
		require.NoError(t, m2.CopyOut(r.Base, buf))
		for i := range 8 {
			require.Equal(t, uint64(i+1), binary.LittleEndian.Uint64(buf[8*i:]), "after failing operation %d (%s %s), word %d", n, inj.op, filepath.Base(inj.path), i)
		}
		require.NoError(t, be2.Close())
	}
	require.Greater(t, failed, 5)
}

// A session (create a region, a host write, a launch, another host
// write, Close) with its n-th file operation failing, for every n: the
// failure reaches some call as an error wrapping ErrIO, every call after
// it fails too, and a reopen recovers every write acknowledged before it.
func TestSessionFaultSweep(t *testing.T) {
	for n := 1; ; n++ {
		dir := t.TempDir()
		inj := &nthFailer{n: -1}
		be, m := open(t, dir, native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), inj)})
		inj.mu.Lock()
		inj.n, inj.seen = n, 0 // count from the end of Open
		inj.mu.Unlock()
		var acked []int // steps that returned nil
		var errs []error
		step := func(i int, err error) {
			if err == nil {
				require.Empty(t, errs, "step %d succeeded after a failure", i)
				acked = append(acked, i)
				return
			}
			require.ErrorIs(t, err, native.ErrIO, "step %d", i)
			errs = append(errs, err)
		}
		r, err := m.CreateRegion("d", 8*64)
		step(0, err)
		if err == nil {
			step(1, m.CopyIn(r.Base, le(11)))
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 4}, func(t *scope.Thread) {
				t.Store64(r.Base.Add(8*uint64(1+t.ID())), 22)
			})
			step(2, err)
			step(3, m.CopyIn(r.Base.Add(8*5), le(33)))
		}
		step(4, be.Close())
		if inj.seen < n {
			require.Empty(t, errs)
			t.Logf("a session takes %d file operations; each one failing was reported", n-1)
			return
		}
		require.NotEmpty(t, errs, "operation %d (%s %s) failed silently", n, inj.op, filepath.Base(inj.path))

		be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
		if slices.Contains(acked, 0) {
			buf := make([]byte, 64)
			require.NoError(t, m2.CopyOut(r.Base, buf))
			w := func(i int) uint64 { return binary.LittleEndian.Uint64(buf[8*i:]) }
			if slices.Contains(acked, 1) {
				require.Equal(t, uint64(11), w(0), "operation %d", n)
			}
			if slices.Contains(acked, 2) {
				require.Equal(t, uint64(22), w(4), "operation %d", n)
			}
			if slices.Contains(acked, 3) {
				require.Equal(t, uint64(33), w(5), "operation %d", n)
			}
		}
		require.NoError(t, be2.Close())
	}
}

// Goroutines that commit through DeferAsync, each under a lock for its
// use of the machine and waiting outside it, share syncs of the log; every
// acknowledged write survives a crash. The log's syncs are slowed down so
// that commits overlap on any machine.
func TestGroupCommitGoroutines(t *testing.T) {
	var mu sync.Mutex // the machine's lock
	var cmu sync.Mutex
	syncs := 0
	fs := native.InjectFS(native.OSFS(), native.InjectorFunc(func(op native.FSOp, path string) error {
		if op == native.FSSync && strings.HasPrefix(filepath.Base(path), "LOG") {
			cmu.Lock()
			syncs++
			cmu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	}))
	dir := t.TempDir()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog, FS: fs})
	r, err := m.CreateRegion("d", 8*1024)
	require.NoError(t, err)
	cmu.Lock()
	syncs = 0
	cmu.Unlock()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				slot := uint64(w*each + i)
				mu.Lock()
				wait, err := be.DeferAsync(func() error { return m.CopyIn(r.Base.Add(8*slot), le(slot+1)) })
				mu.Unlock()
				if err == nil {
					err = wait()
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	cmu.Lock()
	n := syncs
	cmu.Unlock()
	t.Logf("%d commits from %d goroutines: %d syncs of the log", workers*each, workers, n)
	require.Less(t, n, workers*each/2, "concurrent commits must share syncs")
	_, err = m.Crash()
	require.NoError(t, err)
	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be2.Close()
	buf := make([]byte, 8*workers*each)
	require.NoError(t, m2.CopyOut(r.Base, buf))
	for i := range workers * each {
		require.Equal(t, uint64(i+1), binary.LittleEndian.Uint64(buf[8*i:]), "commit %d", i)
	}
	_ = be
}
