//go:build unix

package btree_test

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/pm/native"
)

// benchDBKeys are the keys a benchmark DB holds before it is timed.
const benchDBKeys = 10_000

// benchDB returns a DB in a fresh directory under $TMPDIR (set TMPDIR=/dev/shm
// for tmpfs) in the default, durable mode, holding keys 1..benchDBKeys
// (written with durability off, not timed).
func benchDB(b *testing.B) *btree.DB {
	dir := b.TempDir()
	db, err := btree.OpenDir(dir, &btree.DirOptions{Mode: native.ModeUnsafeNoSync})
	require.NoError(b, err)
	ks := make([]uint64, 0, 4096)
	for k := uint64(1); k <= benchDBKeys; k++ {
		ks = append(ks, k)
		if len(ks) == cap(ks) || k == benchDBKeys {
			require.NoError(b, db.PutBatch(ks, ks))
			ks = ks[:0]
		}
	}
	require.NoError(b, db.Close())
	db, err = btree.OpenDir(dir, &btree.DirOptions{NoCreate: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// BenchmarkDB measures the embedded store on pm/native in its durable mode
// (wall-clock; the filesystem of $TMPDIR): one durable Put, a durable
// batch of 1,000, and a Get, each of random keys of a 10,000-key tree;
// keys/s and µs per operation.
func BenchmarkDB(b *testing.B) {
	for _, tc := range []struct {
		name  string
		batch int
		op    func(db *btree.DB, ks []uint64) error
	}{
		{"put", 1, func(db *btree.DB, ks []uint64) error { return db.Put(ks[0], ks[0]+1) }},
		{"batch1000", 1000, func(db *btree.DB, ks []uint64) error { return db.PutBatch(ks, ks) }},
		{"get", 1, func(db *btree.DB, ks []uint64) error {
			_, ok, err := db.Get(ks[0])
			if err == nil && !ok {
				b.Fatalf("key %d lost", ks[0])
			}
			return err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db := benchDB(b)
			rng := rand.New(rand.NewPCG(7, uint64(tc.batch)))
			ks := make([]uint64, tc.batch)
			for b.Loop() {
				for i := range ks {
					ks[i] = 1 + rng.Uint64N(benchDBKeys)
				}
				if err := tc.op(db, ks); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*tc.batch)/sec, "keys/s")
			b.ReportMetric(sec*1e6/float64(b.N), "µs/op")
		})
	}
}

// BenchmarkDBParallelPut measures durable Puts from several goroutines
// (b.RunParallel, GOMAXPROCS of them; raise it with -cpu): group commit
// shares one sync among the puts that wait beside a write. Keys/s and
// syncs per Put (1 without sharing).
func BenchmarkDBParallelPut(b *testing.B) {
	db := benchDB(b)
	before := db.Stats().Syncs
	var seed atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(7, seed.Add(1)))
		for pb.Next() {
			k := 1 + rng.Uint64N(benchDBKeys)
			if err := db.Put(k, k+1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(db.Stats().Syncs-before)/float64(b.N), "syncs/put")
}
