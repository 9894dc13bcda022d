//go:build unix

package btree_test

import (
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/pm/native"
)

// A Scan paused in the middle sees the tree as of its start while twenty
// writes rewrite every key and delete some: the nodes it reads are not
// reused under it.
func TestDBScanSnapshot(t *testing.T) {
	db := openDB(t, t.TempDir(), &btree.DirOptions{Capacity: 4096, Mode: native.ModeUnsafeNoSync})
	const n = 300
	keys, vals := make([]uint64, n), make([]uint64, n)
	put := func(v uint64) {
		for i := range keys {
			keys[i], vals[i] = uint64(i), v
		}
		require.NoError(t, db.PutBatch(keys, vals))
	}
	put(1)
	wrote := make(chan error)
	got := map[uint64]uint64{}
	require.NoError(t, db.Scan(0, math.MaxUint64, func(k, v uint64) bool {
		if len(got) == 0 {
			go func() { // writes do not wait for the scan
				var err error
				for r := uint64(2); r <= 21 && err == nil; r++ {
					for i := range keys {
						keys[i], vals[i] = uint64(i), r
					}
					if err = db.PutBatch(keys, vals); err == nil {
						_, err = db.Delete(r)
					}
				}
				wrote <- err
			}()
			require.NoError(t, <-wrote)
		}
		got[k] = v
		return true
	}))
	require.Len(t, got, n)
	for k, v := range got {
		require.Equal(t, uint64(1), v, "key %d", k)
	}
	n2, err := db.Len()
	require.NoError(t, err)
	require.Equal(t, n-1, n2, "the last round's delete stands")
	v, ok, err := db.Get(100)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(21), v)
	require.NoError(t, db.Check())
}

// Readers run during writes and growths (a pool of 16 nodes): every Scan
// and GetBatch of the keys a round rewrites sees one write's tree (every
// key with the same value, never an older one than the reader saw before),
// and the race detector finds nothing, though the writes rewrite the next
// word of a leaf the scans read.
func TestDBReadersDuringWrites(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, &btree.DirOptions{Capacity: 16, MaxBatch: 128, Mode: native.ModeUnsafeNoSync})
	const n, rounds = 128, 60
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i) * 7
	}
	put := func(r uint64) error {
		vals := make([]uint64, n)
		for i := range vals {
			vals[i] = r
		}
		return db.PutBatch(keys, vals)
	}
	require.NoError(t, put(0))
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := uint64(0)
			for i := 0; !done.Load(); i++ {
				var vals []uint64
				var err error
				switch (g + i) % 3 {
				case 0:
					err = db.Scan(0, keys[n-1], func(_, v uint64) bool {
						vals = append(vals, v)
						runtime.Gosched() // let writes run mid-scan
						return true
					})
				case 1:
					var found []bool
					vals, found, err = db.GetBatch(keys)
					for j, f := range found {
						if !f {
							t.Errorf("key %d missing", keys[j])
						}
					}
				case 2:
					var l int
					if l, err = db.Len(); l < n {
						t.Errorf("Len %d, want at least %d", l, n)
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				if vals == nil {
					continue
				}
				if len(vals) != n {
					t.Errorf("read %d keys, want %d", len(vals), n)
					return
				}
				for _, v := range vals {
					if v != vals[0] {
						t.Errorf("one read saw values %d and %d", vals[0], v)
						return
					}
				}
				if vals[0] < last {
					t.Errorf("read value %d after %d", vals[0], last)
					return
				}
				last = vals[0]
				reads.Add(1)
			}
		}()
	}
	for r := uint64(1); r <= rounds; r++ {
		require.NoError(t, put(r))
		// A key past the readers' range: its leaf is replaced, and the
		// next word of the last leaf they read is rewritten in place.
		require.NoError(t, db.Put(1<<40+r, r))
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d reads", reads.Load())
	require.NoError(t, db.Check())
	v, ok, err := db.Get(keys[n-1])
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(rounds), v)
	require.NoError(t, db.Close())
	files, err := filepath.Glob(filepath.Join(dir, "btree*.pmr"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.NotEqual(t, "btree.pmr", filepath.Base(files[0]), "the tree grew during the reads")
	db = openDB(t, dir, &btree.DirOptions{NoCreate: true})
	require.NoError(t, db.Check())
}
