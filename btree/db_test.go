//go:build unix

package btree_test

import (
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

func openDB(t *testing.T, dir string, o *btree.DirOptions) *btree.DB {
	t.Helper()
	db, err := btree.OpenDir(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Writes survive Close and OpenDir: single Puts, a batch and a Delete.
func TestDBReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db") // OpenDir makes it
	db := openDB(t, dir, nil)
	want := map[uint64]uint64{}
	for k := uint64(1); k <= 50; k++ {
		require.NoError(t, db.Put(k*3, k))
		want[k*3] = k
	}
	keys, vals := make([]uint64, 500), make([]uint64, 500)
	for i := range keys {
		keys[i], vals[i] = uint64(1000+i), uint64(i)
		want[keys[i]] = vals[i]
	}
	require.NoError(t, db.PutBatch(keys, vals))
	found, err := db.Delete(9)
	require.NoError(t, err)
	require.True(t, found)
	delete(want, 9)
	found, err = db.Delete(10)
	require.NoError(t, err)
	require.False(t, found)
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "a second Close")

	db = openDB(t, dir, &btree.DirOptions{NoCreate: true})
	n, err := db.Len()
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	for k, v := range want {
		got, ok, err := db.Get(k)
		require.NoError(t, err)
		require.True(t, ok, "key %d", k)
		require.Equal(t, v, got, "key %d", k)
	}
	_, ok, err := db.Get(9)
	require.NoError(t, err)
	require.False(t, ok)
	gv, gf, err := db.GetBatch([]uint64{3, 9, 1499, 1500})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 0, 499, 0}, gv)
	require.Equal(t, []bool{true, false, true, false}, gf)
	var scanned []uint64
	require.NoError(t, db.Scan(1, 20, func(k, v uint64) bool {
		scanned = append(scanned, k)
		return true
	}))
	require.Equal(t, []uint64{3, 6, 12, 15, 18}, scanned)
	require.NoError(t, db.Check())
	require.Equal(t, dir, db.Dir())
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"Put", func() error { return db.Put(5, 5) }},
		{"PutBatch", func() error { return db.PutBatch([]uint64{4, 8, 2000}, []uint64{1, 2, 3}) }},
		{"Delete", func() error { _, err := db.Delete(4); return err }},
	} {
		s0 := db.Stats()
		require.NoError(t, tc.write(), tc.name)
		require.Equal(t, s0.Syncs+1, db.Stats().Syncs, "%s: one sync of the persist log", tc.name)
	}
}

// OpenDir refuses what is not a usable directory, with the sentinel that
// says why.
func TestDBOpenErrors(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	locked := filepath.Join(base, "locked")
	openDB(t, locked, nil)
	for _, tc := range []struct {
		name string
		dir  string
		opts *btree.DirOptions
		want error
	}{
		{"empty name", "", nil, btree.ErrBadArg},
		{"a regular file", file, nil, native.ErrIO},
		{"under a regular file", filepath.Join(file, "db"), nil, native.ErrIO},
		{"missing, NoCreate", filepath.Join(base, "missing"), &btree.DirOptions{NoCreate: true}, native.ErrIO},
		{"no tree, NoCreate", base, &btree.DirOptions{NoCreate: true}, pm.ErrNoRegion},
		{"held by another DB", locked, nil, native.ErrLocked},
		{"bad capacity", filepath.Join(base, "cap"), &btree.DirOptions{Capacity: -1}, btree.ErrBadArg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := btree.OpenDir(tc.dir, tc.opts)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, db)
		})
	}
}

// Every call on a closed DB returns ErrClosed.
func TestDBUseAfterClose(t *testing.T) {
	db, err := btree.OpenDir(t.TempDir(), nil)
	require.NoError(t, err)
	require.NoError(t, db.Put(1, 2))
	require.NoError(t, db.Close())
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Put", func() error { return db.Put(1, 3) }},
		{"PutBatch", func() error { return db.PutBatch([]uint64{1}, []uint64{3}) }},
		{"Get", func() error { _, _, err := db.Get(1); return err }},
		{"GetBatch", func() error { _, _, err := db.GetBatch([]uint64{1}); return err }},
		{"Delete", func() error { _, err := db.Delete(1); return err }},
		{"Scan", func() error { return db.Scan(0, 10, func(uint64, uint64) bool { return true }) }},
		{"Len", func() error { _, err := db.Len(); return err }},
		{"Check", db.Check},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), btree.ErrClosed)
		})
	}
}

// A batch over MaxBatch moves the tree to a generation whose batch area
// holds it and commits whole; a batch whose keys and values differ in
// number is refused, and the DB stays usable.
func TestDBLargeBatch(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, &btree.DirOptions{MaxBatch: 8, Capacity: 256, Mode: native.ModeUnsafeNoSync})
	keys := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	require.ErrorIs(t, db.PutBatch(keys, keys[:8]), btree.ErrBadArg)
	require.NoError(t, db.PutBatch(keys[:8], keys[:8]))
	files, err := filepath.Glob(filepath.Join(dir, "btree*.pmr"))
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "btree.pmr")}, files, "8 keys fit the area")
	require.NoError(t, db.PutBatch(keys, keys))
	big := make([]uint64, 5000)
	for i := range big {
		big[i] = uint64(i) * 11
	}
	require.NoError(t, db.PutBatch(big, big))
	n, err := db.Len()
	require.NoError(t, err)
	require.Equal(t, 5000+9, n, "1..9 are no multiples of 11")
	require.NoError(t, db.Check())
	require.NoError(t, db.PutBatch(nil, nil))
	require.NoError(t, db.Close())
	files, err = filepath.Glob(filepath.Join(dir, "btree*.pmr"))
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "btree.2.pmr")}, files, "two moves: areas of 16 and 8192 keys")
	db = openDB(t, dir, &btree.DirOptions{NoCreate: true})
	v, ok, err := db.Get(4999 * 11)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(4999*11), v)
}

// A region left by a Create that never returned (no commit word, no
// node written) is created again; a committed tree whose commit word was
// damaged is reported, never discarded.
func TestDBUnfinishedCreate(t *testing.T) {
	t.Run("never committed", func(t *testing.T) {
		dir := t.TempDir()
		be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
		require.NoError(t, err)
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		_, err = m.CreateRegion("btree", 1<<20)
		require.NoError(t, err)
		require.NoError(t, be.Close())
		db := openDB(t, dir, nil)
		require.NoError(t, db.Put(7, 70))
		require.NoError(t, db.Check())
	})
	t.Run("damaged commit word", func(t *testing.T) {
		dir := t.TempDir()
		db, err := btree.OpenDir(dir, nil)
		require.NoError(t, err)
		require.NoError(t, db.Put(7, 70))
		require.NoError(t, db.Close())
		be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
		require.NoError(t, err)
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		r, err := m.OpenRegion("btree")
		require.NoError(t, err)
		require.NoError(t, m.CopyIn(r.Base.Add(128), make([]byte, 8))) // the commit word
		require.NoError(t, be.Close())
		_, err = btree.OpenDir(dir, nil)
		require.Error(t, err)
		require.True(t, errors.Is(err, btree.ErrCorrupt) || errors.Is(err, pm.ErrCorrupt), "%v", err)
	})
}

// Concurrent writers and readers: no race, every write lands.
func TestDBConcurrent(t *testing.T) {
	db := openDB(t, t.TempDir(), &btree.DirOptions{Mode: native.ModeUnsafeNoSync})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				k := uint64(g*100 + i)
				if err := db.Put(k, k); err != nil {
					t.Error(err)
					return
				}
				if _, _, err := db.Get(k); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n, err := db.Len()
	require.NoError(t, err)
	require.Equal(t, 100, n)
	require.NoError(t, db.Check())
}

// A DB opened with the zero options has the default pool, not Create's:
// 20,480 random keys fit without a growth.
func TestDBDefaultCapacity(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, &btree.DirOptions{Mode: native.ModeUnsafeNoSync})
	ks := make([]uint64, 4096)
	for b := range 5 {
		for i := range ks {
			ks[i] = uint64(b)<<48 | uint64(i)*0x9E3779B9
		}
		require.NoError(t, db.PutBatch(ks, ks))
	}
	n, err := db.Len()
	require.NoError(t, err)
	require.Equal(t, 5*4096, n)
	files, err := filepath.Glob(filepath.Join(dir, "btree*.pmr"))
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "btree.pmr")}, files, "no growth")
}

// A DB created with a small pool grows (several generations) as writes
// need nodes: every write succeeds, the tree passes Check and holds what
// a map holds, before and after a reopen, and one tree file is left.
func TestDBGrows(t *testing.T) {
	const seed = 11
	t.Logf("seed %d", seed)
	dir := t.TempDir()
	db := openDB(t, dir, &btree.DirOptions{Capacity: 16, MaxBatch: 256, Mode: native.ModeLog})
	rng := rand.New(rand.NewPCG(seed, 1))
	want := map[uint64]uint64{}
	for i := range 300 {
		switch i % 5 {
		case 0:
			k := rng.Uint64N(1 << 20)
			require.NoError(t, db.Put(k, uint64(i)))
			want[k] = uint64(i)
		case 1:
			if len(want) > 0 {
				k := slices.Min(slices.Collect(maps.Keys(want))) // not map order: the seed replays
				found, err := db.Delete(k)
				require.NoError(t, err)
				require.True(t, found)
				delete(want, k)
			}
		default:
			n := 1 + rng.IntN(256)
			ks, vs := make([]uint64, n), make([]uint64, n)
			for j := range ks {
				ks[j], vs[j] = rng.Uint64N(1<<20), uint64(i*1000+j)
				want[ks[j]] = vs[j]
			}
			require.NoError(t, db.PutBatch(ks, vs))
		}
	}
	check := func(db *btree.DB) {
		require.NoError(t, db.Check())
		got := map[uint64]uint64{}
		require.NoError(t, db.Scan(0, math.MaxUint64, func(k, v uint64) bool { got[k] = v; return true }))
		require.Equal(t, want, got)
	}
	check(db)
	require.NoError(t, db.Close())
	files, err := filepath.Glob(filepath.Join(dir, "btree*.pmr"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one generation left: %v", files)
	require.NotEqual(t, "btree.pmr", filepath.Base(files[0]), "the tree grew")
	t.Logf("%d keys in %s", len(want), filepath.Base(files[0]))
	check(openDB(t, dir, &btree.DirOptions{NoCreate: true}))
}
