package btree

import (
	"fmt"
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
		name  string
		alg   Alg
		set   []string
		model hwmodel.Model
	}{{"dram-only", Alg2, []string{"persist.none=true"}, hwmodel.None}, {"alg1", Alg1, nil, hwmodel.ScopedBarrier}, {"alg2", Alg2, nil, hwmodel.ScopedBarrier}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := hwmodel.PresetGOPE()
			require.NoError(b, cfg.Set(c.set...))
			var cycles uint64
			var host time.Duration
			for b.Loop() {
				be, err := hwmodel.New(cfg, c.model)
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

// scalingTree builds a tree of n random keys (seeded) on the functional
// backend in batches of 4,096 and returns it with its keys.
func scalingTree(b *testing.B, n int) (*Tree, []uint64) {
	rng := rand.New(rand.NewPCG(3, 4))
	tr, err := Create(newMachine(b), "bt", Options{Capacity: n/4 + 4096})
	require.NoError(b, err)
	keys := make([]uint64, 0, n)
	seen := make(map[uint64]bool, n)
	for len(keys) < n {
		k := rng.Uint64()
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for s := 0; s < n; s += 4096 {
		ks := keys[s:min(s+4096, n)]
		_, err := tr.InsertBatch(ks, ks, BatchOptions{})
		require.NoError(b, err)
	}
	require.Equal(b, n, tr.Len())
	return tr, keys
}

// BenchmarkPutScaling measures one Put (a new value for a key the tree
// holds, so that the tree keeps its size) in trees of 10K and 400K keys on
// the functional backend: host µs per Put, and PM nodes of the tree. A
// commit costs what it changes, so the two should be close (the goal is
// 400K within 1.5x of 10K).
func BenchmarkPutScaling(b *testing.B) {
	for _, n := range []int{10_000, 400_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			tr, keys := scalingTree(b, n)
			rng := rand.New(rand.NewPCG(5, 6))
			b.ReportAllocs()
			for b.Loop() {
				k := keys[rng.IntN(len(keys))]
				if err := tr.Put(k, k+1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/put")
			b.ReportMetric(float64(tr.Nodes()), "nodes")
		})
	}
}
