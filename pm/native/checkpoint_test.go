//go:build unix

package native_test

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm/native"
)

// onCaller is an Injector that notes, for every write and sync of a
// region file, whether the goroutine doing it is running fn (a function
// named in its stack): a background checkpoint's are not.
type onCaller struct {
	mu       sync.Mutex
	fn       string
	region   int // region writes and syncs seen
	inCaller int // of those, made on a stack running fn
}

func (c *onCaller) MaybeError(op native.FSOp, path string) error {
	if (op != native.FSWrite && op != native.FSSync) || !strings.Contains(filepath.Base(path), ".pmr") {
		return nil
	}
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	in := false
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, c.fn) {
			in = true
		}
		if !more {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.region++
	if in {
		c.inCaller++
	}
	return nil
}

// Past Options.CheckpointBytes, the region files are written from the log
// in the background: no region file is written or synced by the calls
// that cross the size (they run on the test's goroutine), yet checkpoints
// happen, the log stays within twice the size, LOG.old is gone once a
// checkpoint finished, and everything survives a crash and reopen.
func TestBackgroundCheckpoint(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	dir := t.TempDir()
	inj := &onCaller{fn: "TestBackgroundCheckpoint"}
	be, m := open(t, dir, native.Options{Mode: native.ModeLog, CheckpointBytes: 8 << 10, FS: native.InjectFS(native.OSFS(), inj)})
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(t, err)
	inj.mu.Lock()
	inj.region, inj.inCaller = 0, 0 // CreateRegion writes its file itself
	inj.mu.Unlock()
	want := make([]byte, r.Size)
	for i := range 300 {
		off := rng.Uint64N(r.Size - 256)
		data := make([]byte, 1+rng.IntN(255))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		copy(want[off:], data)
		require.NoError(t, m.CopyIn(r.Base.Add(off), data), "write %d", i)
		require.LessOrEqual(t, logUsed(t, dir), 2*(8<<10)+512, "write %d: the log is bounded", i)
	}
	require.NoError(t, be.WaitCheckpoint())
	st := be.Stats()
	t.Logf("%+v", st)
	require.NotZero(t, st.Checkpoints)
	_, err = os.Stat(filepath.Join(dir, "LOG.old"))
	require.ErrorIs(t, err, os.ErrNotExist, "a finished checkpoint removes its log")
	inj.mu.Lock()
	region, inCaller := inj.region, inj.inCaller
	inj.mu.Unlock()
	require.NotZero(t, region, "checkpoints wrote the region file")
	require.Zero(t, inCaller, "region writes and syncs made by the caller of CopyIn, not in the background")
	img, err := m.Crash()
	require.NoError(t, err)
	rg, _ := img.Region("d")
	require.Equal(t, want, rg.Data)
	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be2.Close()
	got := make([]byte, r.Size)
	require.NoError(t, m2.CopyOut(r.Base, got))
	require.Equal(t, want, got)
}

// A background checkpoint whose region write fails: the error, wrapping
// ErrIO and the cause, reaches the next call (here WaitCheckpoint, then
// CopyIn and Close: the backend refuses writes), and Open recovers every
// acknowledged write from the log the checkpoint left (LOG.old).
func TestBackgroundCheckpointError(t *testing.T) {
	dir := t.TempDir()
	f := &failer{op: native.FSWrite, file: ".pmr", err: syscall.ENOSPC}
	be, m := open(t, dir, native.Options{Mode: native.ModeLog, CheckpointBytes: 4 << 10, FS: native.InjectFS(native.OSFS(), f)})
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(t, err)
	f.arm()
	n := 0
	for be.Stats().Checkpoints == 0 {
		require.NoError(t, m.CopyIn(r.Base.Add(64*uint64(n)), le(uint64(n+1))), "write %d", n)
		n++
	}
	err = be.WaitCheckpoint()
	require.ErrorIs(t, err, native.ErrIO)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Equal(t, 1, f.hit)
	err = m.CopyIn(r.Base, le(99))
	require.ErrorIs(t, err, native.ErrIO, "a write after the failed checkpoint")
	require.ErrorIs(t, be.Close(), native.ErrIO)
	_, err = os.Stat(filepath.Join(dir, "LOG.old"))
	require.NoError(t, err, "the failed checkpoint's log stays for recovery")

	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be2.Close()
	buf := make([]byte, 64*n)
	require.NoError(t, m2.CopyOut(r.Base, buf))
	for i := range n {
		require.Equal(t, uint64(i+1), binary.LittleEndian.Uint64(buf[64*i:]), "write %d of %d", i, n)
	}
	_, err = os.Stat(filepath.Join(dir, "LOG.old"))
	require.ErrorIs(t, err, os.ErrNotExist, "recovery removes LOG.old")
}

// A session of host writes that pass CheckpointBytes several times, with
// its n-th file operation failing, for every n (WaitCheckpoint after each
// write makes the order of operations, background ones included, the same
// every run): the failure reaches some call as an error wrapping ErrIO,
// every call after it fails too, and a reopen recovers every write
// acknowledged before it, whatever the checkpoint had done.
func TestCheckpointFaultSweep(t *testing.T) {
	const writes = 12
	for n := 1; ; n++ {
		dir := t.TempDir()
		inj := &nthFailer{n: -1}
		be, m := open(t, dir, native.Options{Mode: native.ModeLog, CheckpointBytes: 1 << 10, FS: native.InjectFS(native.OSFS(), inj)})
		r, err := m.CreateRegion("d", 1<<16)
		require.NoError(t, err)
		inj.mu.Lock()
		inj.n, inj.seen = n, 0 // count from here
		inj.mu.Unlock()
		acked := 0
		failed := false
		step := func(what string, err error) bool {
			if err == nil {
				require.False(t, failed, "operation %d: %s succeeded after a failure", n, what)
				return true
			}
			require.ErrorIs(t, err, native.ErrIO, "operation %d: %s", n, what)
			failed = true
			return false
		}
		for i := range writes {
			data := make([]byte, 200)
			binary.LittleEndian.PutUint64(data, uint64(i+1))
			if step("write", m.CopyIn(r.Base.Add(256*uint64(i)), data)) {
				acked = i + 1
			}
			step("wait", be.WaitCheckpoint())
		}
		step("close", be.Close())
		inj.mu.Lock()
		seen, op, path := inj.seen, inj.op, inj.path
		inj.mu.Unlock()
		if seen < n {
			require.False(t, failed)
			require.Greater(t, n, 20, "the session had too few operations to sweep")
			t.Logf("a session of %d writes takes %d file operations; each one failing was reported", writes, n-1)
			return
		}
		require.True(t, failed, "operation %d (%s %s) failed silently", n, op, filepath.Base(path))
		be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
		buf := make([]byte, 256*writes)
		require.NoError(t, m2.CopyOut(r.Base, buf))
		for i := range acked {
			require.Equal(t, uint64(i+1), binary.LittleEndian.Uint64(buf[256*i:]), "operation %d (%s %s) failed: write %d of %d acknowledged", n, op, filepath.Base(path), i, acked)
		}
		require.NoError(t, be2.Close())
	}
}

// gate is an Injector that holds the first open of LOG.old (a background
// checkpoint starting to read it) until release is closed.
type gate struct {
	armed   atomic.Bool // Open's probe for LOG.old passes
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (g *gate) MaybeError(op native.FSOp, path string) error {
	if g.armed.Load() && op == native.FSOpen && filepath.Base(path) == "LOG.old" {
		g.once.Do(func() {
			close(g.reached)
			<-g.release
		})
	}
	return nil
}

// A directory as a crash during a background checkpoint leaves it: LOG.old
// (older writes) and LOG (newer writes to the same words). Open recovers
// the newer values, also with any one of its file operations failing
// first (a failed Open, then a clean one): it removes LOG.old before it
// replaces LOG, so no reopen replays LOG.old over newer bytes.
func TestOpenFaultSweepOldLog(t *testing.T) {
	src := t.TempDir()
	g := &gate{reached: make(chan struct{}), release: make(chan struct{})}
	be, m := open(t, src, native.Options{Mode: native.ModeLog, CheckpointBytes: 1 << 10, FS: native.InjectFS(native.OSFS(), g)})
	r, err := m.CreateRegion("d", 1<<12)
	require.NoError(t, err)
	g.armed.Store(true)
	n := 0
	for be.Stats().Checkpoints == 0 {
		require.NoError(t, m.CopyIn(r.Base.Add(8*uint64(n)), le(uint64(n+1))))
		n++
	}
	<-g.reached // the checkpoint has renamed LOG to LOG.old and waits
	for i := range 4 {
		require.NoError(t, m.CopyIn(r.Base.Add(8*uint64(i)), le(uint64(1000+i))))
	}
	tmpl := copyDir(t, src)
	close(g.release)
	require.NoError(t, be.Close())
	_, err = os.Stat(filepath.Join(tmpl, "LOG.old"))
	require.NoError(t, err, "the template holds LOG.old")

	check := func(dir, what string) {
		be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
		defer be2.Close()
		buf := make([]byte, 8*n)
		require.NoError(t, m2.CopyOut(r.Base, buf))
		for i := range n {
			want := uint64(i + 1)
			if i < 4 {
				want = uint64(1000 + i)
			}
			require.Equal(t, want, binary.LittleEndian.Uint64(buf[8*i:]), "%s: word %d", what, i)
		}
	}
	failed := 0
	for k := 1; ; k++ {
		dir := copyDir(t, tmpl)
		inj := &nthFailer{n: k}
		be, err := native.Open(dir, native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), inj)})
		if err == nil {
			require.Less(t, inj.seen, k, "operation %d failed but Open succeeded", k)
			require.NoError(t, be.Close())
			check(dir, "clean open")
			t.Logf("Open with LOG.old takes %d file operations; each one failing was reported", k-1)
			break
		}
		failed++
		require.ErrorIs(t, err, native.ErrIO, "failing operation %d (%s %s)", k, inj.op, filepath.Base(inj.path))
		check(dir, "after failing operation "+inj.op.String()+" "+filepath.Base(inj.path))
	}
	require.Greater(t, failed, 5)
}
