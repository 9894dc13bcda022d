//go:build unix

package native_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/scope"
)

// A durable B+tree Put or Delete: each of its host writes and its launch
// is a durability point of its own (one sync each); inside Defer the whole
// commit costs one sync, and the tree reopens with it.
func TestBTreeSyncs(t *testing.T) {
	var cnt native.Counter
	dir := t.TempDir()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
	tr, err := btree.Create(m, "tree", btree.Options{Capacity: 4096})
	require.NoError(t, err)
	for k := range uint64(200) {
		require.NoError(t, tr.Put(k, k))
	}
	s0 := cnt.Count(native.FSSync)
	require.NoError(t, tr.Put(1000, 1))
	plain := cnt.Count(native.FSSync) - s0

	s0 = cnt.Count(native.FSSync)
	require.NoError(t, be.Defer(func() error { return tr.Put(1001, 2) }))
	deferred := cnt.Count(native.FSSync) - s0

	s0 = cnt.Count(native.FSSync)
	require.NoError(t, be.Defer(func() error {
		_, err := tr.Delete(5)
		return err
	}))
	deleted := cnt.Count(native.FSSync) - s0
	t.Logf("btree Put: %d syncs of the log; inside Defer: Put %d, Delete %d", plain, deferred, deleted)
	require.Equal(t, uint64(1), deferred)
	require.Equal(t, uint64(1), deleted)
	require.NoError(t, be.Close())

	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be2.Close()
	tr2, err := btree.Open(m2, "tree")
	require.NoError(t, err)
	require.NoError(t, tr2.Check())
	v, ok, err := tr2.Get(1001)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(2), v)
	_, ok, err = tr2.Get(5)
	require.NoError(t, err)
	require.False(t, ok)
}

// The Go heap holds one copy of each region (plus the log's buffers):
// reopening a directory of 48 MiB of regions, with a log to replay, grows
// the heap by at most 1.2 times the regions' size.
func TestHeapPerRegionByte(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 48 MiB")
	}
	const size = 16 << 20
	dir := t.TempDir()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog})
	var rs []pm.Range
	for _, name := range []string{"a", "b", "c"} {
		r, err := m.CreateRegion(name, size)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	_, err := scope.Launch(m, scope.Grid{Blocks: 64, Threads: 256}, func(t *scope.Thread) {
		for _, r := range rs {
			t.Store64(r.Base.Add(uint64(t.ID())*64), uint64(t.ID()))
		}
	})
	require.NoError(t, err)
	// Leave the log full: crash (no checkpoint), then reopen and replay.
	_, err = m.Crash()
	require.NoError(t, err)
	require.Greater(t, logUsed(t, dir), 3*64*256*24, "the log holds the launch's persists")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	ratio := grown / (3 * size)
	t.Logf("heap grew %.1f MiB for %d MiB of regions: %.3fx", grown/(1<<20), 3*size>>20, ratio)
	require.LessOrEqual(t, ratio, 1.2)
	buf := make([]byte, 8)
	require.NoError(t, m2.CopyOut(rs[2].Base.Add(64*777), buf))
	require.Equal(t, uint64(777), binary.LittleEndian.Uint64(buf))
	require.NoError(t, be2.Close())
	_ = be
}

// BenchmarkStoreDFence: one thread stores a word and DFences, one launch
// per op: each op is one durability point.
func BenchmarkStoreDFence(b *testing.B) {
	var cnt native.Counter
	be, err := native.Open(b.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
	require.NoError(b, err)
	defer be.Close()
	m, err := pm.NewMachine(be)
	require.NoError(b, err)
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(b, err)
	s0 := cnt.Count(native.FSSync)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
			t.Store64(r.Base.Add(uint64(i%8192)*8), uint64(i))
			t.DFence()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(cnt.Count(native.FSSync)-s0)/float64(b.N), "syncs/op")
}

// BenchmarkMidLaunchDFence: 256 threads each store a word, DFence and
// store another, one launch per op: the DFences are one durability point
// in the middle of the launch (all threads share its sync, group commit)
// and the launch's end another: 2 syncs per op, 256 DFences.
func BenchmarkMidLaunchDFence(b *testing.B) {
	var cnt native.Counter
	be, err := native.Open(b.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
	require.NoError(b, err)
	defer be.Close()
	m, err := pm.NewMachine(be)
	require.NoError(b, err)
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(b, err)
	s0 := cnt.Count(native.FSSync)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: 128}, func(t *scope.Thread) {
			a := r.Base.Add(uint64(t.ID()) * 16)
			t.Store64(a, uint64(i))
			t.DFence()
			t.Store64(a.Add(8), uint64(i))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(256*float64(b.N)/b.Elapsed().Seconds(), "DFences/s")
	b.ReportMetric(float64(cnt.Count(native.FSSync)-s0)/float64(b.N), "syncs/op")
}

// BenchmarkCPUStoreFence: a CPU run of 64 tasks, each storing a word,
// writing it back and fencing (an SFence, or COSPlay's CFence: durable on
// return), one run per op, under three configurations: every task active
// (Baseline), a window of 8 (Baseline), and COSPlay with a window of 8.
// The tasks held at their fences together share a sync (group commit):
// 1, 8 and 8 syncs per run, where each Baseline fence once cost its own
// (64; COSPlay's switch before the CFence already let 8 share one).
func BenchmarkCPUStoreFence(b *testing.B) {
	const tasks = 64
	for _, c := range []struct {
		name string
		cfg  coro.Config
	}{
		{"baseline", coro.Config{Mode: coro.Baseline}},
		{"baseline-w8", coro.Config{Mode: coro.Baseline, Window: 8}},
		{"cosplay-w8", coro.Config{Mode: coro.COSPlay, Window: 8}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var cnt native.Counter
			be, err := native.Open(b.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
			require.NoError(b, err)
			defer be.Close()
			m, err := pm.NewMachine(be)
			require.NoError(b, err)
			r, err := m.CreateRegion("d", 8*tasks)
			require.NoError(b, err)
			ts := make([]coro.Task, tasks)
			for i := range ts {
				ts[i] = func(c *coro.Ctx) {
					a := r.Base.Add(8 * uint64(c.ID()))
					c.Store64(a, c.Load64(a)+1)
					c.CLWB(a)
					c.Fence()
				}
			}
			s0 := cnt.Count(native.FSSync)
			b.ResetTimer()
			for b.Loop() {
				if _, err := coro.Run(m, ts, coro.WithConfig(c.cfg)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(tasks*float64(b.N)/b.Elapsed().Seconds(), "fences/s")
			b.ReportMetric(float64(cnt.Count(native.FSSync)-s0)/float64(b.N), "syncs/op")
		})
	}
}

// BenchmarkPebbleSyncSet is the yardstick for BenchmarkStoreDFence and
// BenchmarkHostWrite: one 8-byte value Set in Pebble with pebble.Sync (its
// WAL fsynced before Set returns), in a directory on the same disk
// (b.TempDir), in the same run:
//
//	go test ./pm/native -run '^$' -bench 'StoreDFence|HostWrite|PebbleSyncSet' -benchtime 2s -count 3
func BenchmarkPebbleSyncSet(b *testing.B) {
	db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: quiet{}})
	require.NoError(b, err)
	defer db.Close()
	key, val := make([]byte, 8), make([]byte, 8)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		binary.BigEndian.PutUint64(key, uint64(i%8192))
		binary.LittleEndian.PutUint64(val, uint64(i))
		if err := db.Set(key, val, pebble.Sync); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(1, "syncs/op")
}

// quiet is a Pebble logger that keeps benchmark output clean.
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// BenchmarkHostWrite: the host copies 64 bytes into PM, durable on
// return.
func BenchmarkHostWrite(b *testing.B) {
	var cnt native.Counter
	be, err := native.Open(b.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
	require.NoError(b, err)
	defer be.Close()
	m, err := pm.NewMachine(be)
	require.NoError(b, err)
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(b, err)
	data := make([]byte, 64)
	s0 := cnt.Count(native.FSSync)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		binary.LittleEndian.PutUint64(data, uint64(i))
		if err := m.CopyIn(r.Base.Add(uint64(i%1024)*64), data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(cnt.Count(native.FSSync)-s0)/float64(b.N), "syncs/op")
}

// The log stays bounded: past Options.CheckpointBytes a durability point
// restarts the log and a background checkpoint writes the regions from the
// old one; the data survives a crash and reopen, seeded and replayable.
func TestCheckpointBySize(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog, CheckpointBytes: 8 << 10})
	r, err := m.CreateRegion("d", 1<<16)
	require.NoError(t, err)
	want := make([]byte, r.Size)
	for i := range 200 {
		off := rng.Uint64N(r.Size - 256)
		data := make([]byte, 1+rng.IntN(255))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		copy(want[off:], data)
		require.NoError(t, m.CopyIn(r.Base.Add(off), data), "write %d", i)
	}
	st := be.Stats()
	t.Logf("%+v", st)
	require.NotZero(t, st.Checkpoints)
	// A background checkpoint running lets the log grow to twice the size.
	require.LessOrEqual(t, logUsed(t, dir), 2*(8<<10)+512, "the log was restarted")
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

// BenchmarkKernelPersists: a launch of 64 K threads, each storing two
// words with an OFence between and a DFence after: the per-persist cost
// of the backend plus one sync per launch.
func BenchmarkKernelPersists(b *testing.B) {
	be, err := native.Open(b.TempDir(), native.Options{Mode: native.ModeLog})
	require.NoError(b, err)
	defer be.Close()
	m, err := pm.NewMachine(be)
	require.NoError(b, err)
	r, err := m.CreateRegion("d", 16<<20)
	require.NoError(b, err)
	s0 := be.Stats()
	for b.Loop() {
		_, err := scope.Launch(m, scope.Grid{Blocks: 256, Threads: 256}, func(t *scope.Thread) {
			a := r.Base.Add(16 * uint64(t.ID()))
			t.Store64(a, 1)
			t.OFence()
			t.Store64(a.Add(8), 2)
			t.DFence()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	st := be.Stats()
	b.ReportMetric(float64(st.Persists-s0.Persists)/b.Elapsed().Seconds(), "persists/s")
	b.ReportMetric(float64(st.Syncs-s0.Syncs)/float64(b.N), "syncs/op")
}

// logUsed returns the bytes of dir's log up to its last nonzero byte (the
// file grows by zeroed chunks).
func logUsed(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "LOG"))
	require.NoError(t, err)
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return n
}

// BenchmarkBTreePut: a durable B+tree Put, alone (each host write and the
// launch a durability point) and inside Defer (one sync per Put).
func BenchmarkBTreePut(b *testing.B) {
	for _, deferred := range []bool{false, true} {
		name := "plain"
		if deferred {
			name = "defer"
		}
		b.Run(name, func(b *testing.B) {
			var cnt native.Counter
			be, err := native.Open(b.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
			require.NoError(b, err)
			defer be.Close()
			m, err := pm.NewMachine(be)
			require.NoError(b, err)
			tr, err := btree.Create(m, "tree", btree.Options{Capacity: 1 << 16})
			require.NoError(b, err)
			s0 := cnt.Count(native.FSSync)
			for k := uint64(0); b.Loop(); k++ {
				key := k * 0x9e3779b97f4a7c15 >> 40
				if deferred {
					err = be.Defer(func() error { return tr.Put(key, k) })
				} else {
					err = tr.Put(key, k)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(cnt.Count(native.FSSync)-s0)/float64(b.N), "syncs/op")
		})
	}
}

// A host write larger than a log entry is split into entries and survives
// a crash whole.
func TestLargeHostWrite(t *testing.T) {
	dir := t.TempDir()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog})
	r, err := m.CreateRegion("d", 3<<20+100)
	require.NoError(t, err)
	data := make([]byte, r.Size-10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, m.CopyIn(r.Base.Add(5), data))
	require.Equal(t, uint64(1), be.Stats().Syncs)
	_, err = m.Crash()
	require.NoError(t, err)
	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be2.Close()
	got := make([]byte, len(data))
	require.NoError(t, m2.CopyOut(r.Base.Add(5), got))
	require.Equal(t, data, got)
}

// BenchmarkBTreePutParallel: goroutines Put into one tree, each under the
// tree's lock through DeferAsync and waiting for durability outside it:
// concurrent Puts share syncs (group commit), so syncs/op falls below 1.
func BenchmarkBTreePutParallel(b *testing.B) {
	var cnt native.Counter
	be, err := native.Open(b.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
	require.NoError(b, err)
	defer be.Close()
	m, err := pm.NewMachine(be)
	require.NoError(b, err)
	tr, err := btree.Create(m, "tree", btree.Options{Capacity: 1 << 17})
	require.NoError(b, err)
	var mu sync.Mutex
	var next uint64
	s0 := cnt.Count(native.FSSync)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			next++
			k := next
			wait, err := be.DeferAsync(func() error { return tr.Put(k*0x9e3779b97f4a7c15>>40, k) })
			mu.Unlock()
			if err == nil {
				err = wait()
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(cnt.Count(native.FSSync)-s0)/float64(b.N), "syncs/op")
}
