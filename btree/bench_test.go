package btree

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// benchTree builds a tree of n random keys on the functional backend and
// returns its image and a batch of n/10 more keys.
func benchTree(b *testing.B, n int) (*pm.Image, []uint64) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := newMachine(b)
	tr, err := Create(m, "bt", Options{Capacity: n, MaxBatch: n})
	require.NoError(b, err)
	ks := make([]uint64, n)
	for i := range ks {
		ks[i] = rng.Uint64()
	}
	_, err = tr.InsertBatch(ks, ks, BatchOptions{})
	require.NoError(b, err)
	batch := make([]uint64, n/10)
	for i := range batch {
		batch[i] = rng.Uint64()
	}
	img, err := m.Crash()
	require.NoError(b, err)
	return img, batch
}

// BenchmarkInsert times one batch (a tenth of the tree) on the gope machine
// under ScopedBarrier: simulated cycles per key (until durable) and host
// nanoseconds per key.
func BenchmarkInsert(b *testing.B) {
	img, batch := benchTree(b, 20000)
	for _, c := range []struct {
		name string
		alg  Alg
		set  []string
	}{{"dram-only", Alg2, []string{"persist.none=true"}}, {"alg1", Alg1, nil}, {"alg2", Alg2, nil}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := hwmodel.PresetGOPE()
			require.NoError(b, cfg.Set(c.set...))
			var cycles uint64
			var host time.Duration
			for b.Loop() {
				be, err := hwmodel.New(cfg, hwmodel.ScopedBarrier)
				require.NoError(b, err)
				m, err := pm.Reopen(img.Clone(), be)
				require.NoError(b, err)
				tr, err := Open(m, "bt")
				require.NoError(b, err)
				t0, start := be.Now(), time.Now()
				_, err = tr.InsertBatch(batch, batch, BatchOptions{Alg: c.alg})
				require.NoError(b, err)
				host += time.Since(start)
				cycles += be.Now() - t0
			}
			keys := float64(b.N * len(batch))
			b.ReportMetric(float64(cycles)/keys, "simcycles/key")
			b.ReportMetric(float64(host.Nanoseconds())/keys, "hostns/key")
		})
	}
}

// BenchmarkGet times point lookups as a kernel on the gope machine, and
// from the host.
func BenchmarkGet(b *testing.B) {
	img, batch := benchTree(b, 20000)
	b.Run("kernel", func(b *testing.B) {
		be, err := hwmodel.New(hwmodel.PresetGOPE(), hwmodel.ScopedBarrier)
		require.NoError(b, err)
		m, err := pm.Reopen(img.Clone(), be)
		require.NoError(b, err)
		tr, err := Open(m, "bt")
		require.NoError(b, err)
		var cycles uint64
		for b.Loop() {
			t0 := be.Now()
			_, _, err := tr.GetBatch(batch)
			require.NoError(b, err)
			cycles += be.Now() - t0
		}
		b.ReportMetric(float64(cycles)/float64(b.N*len(batch)), "simcycles/key")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "hostns/key")
	})
	b.Run("host", func(b *testing.B) {
		m, err := pm.Reopen(img.Clone(), functional.New(pm.GPULimits{}))
		require.NoError(b, err)
		tr, err := Open(m, "bt")
		require.NoError(b, err)
		for b.Loop() {
			for _, k := range batch {
				if _, _, err := tr.Get(k); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "hostns/key")
	})
}
