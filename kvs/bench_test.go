package kvs_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// benchKeys is how many distinct keys the benchmarks cycle through.
const benchKeys = 1024

// benchStore returns a store on the functional backend with maxBatch
// requests per batch, preloaded with keys 1..benchKeys.
func benchStore(b *testing.B, maxBatch int) *kvs.Store {
	b.Helper()
	st, err := kvs.Create(newMachine(b), kvs.Config{Buckets: 4096, MaxBatch: maxBatch})
	require.NoError(b, err)
	for k0 := 0; k0 < benchKeys; k0 += maxBatch {
		n := min(maxBatch, benchKeys-k0)
		keys, vals := make([]uint32, n), make([]uint64, n)
		for i := range keys {
			keys[i], vals[i] = uint32(k0+i+1), uint64(k0+i)
		}
		_, err := st.SetBatch(keys, vals)
		require.NoError(b, err)
	}
	return st
}

// BenchmarkPutMaxBatch times a one-key Put (an update of a present key) on
// stores whose MaxBatch differs by a factor of 1,024: a Put should cost
// what it writes, not what the store could write in one batch.
func BenchmarkPutMaxBatch(b *testing.B) {
	for _, mb := range []int{64, 65536} {
		b.Run(fmt.Sprintf("MaxBatch=%d", mb), func(b *testing.B) {
			st := benchStore(b, mb)
			i := 0
			for b.Loop() {
				if err := st.Put(uint32(1+i%benchKeys), uint64(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "hostns/key")
		})
	}
}

// BenchmarkGet times a single-key Get of a present key.
func BenchmarkGet(b *testing.B) {
	st := benchStore(b, 64)
	i := 0
	for b.Loop() {
		if _, ok, err := st.Get(uint32(1 + i%benchKeys)); err != nil || !ok {
			b.Fatal(err, ok)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "hostns/key")
}

// BenchmarkGetBatchOne times a GetBatch of one present key: a kernel
// launch, the path Get took before it read from the host.
func BenchmarkGetBatchOne(b *testing.B) {
	st := benchStore(b, 64)
	keys := []uint32{0}
	i := 0
	for b.Loop() {
		keys[0] = uint32(1 + i%benchKeys)
		if _, found, err := st.GetBatch(keys); err != nil || !found[0] {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "hostns/key")
}

// BenchmarkHostSetBatch times SET batches of 1,000 keys run on the host
// (HostBatches) on pm/native, as kvs-vs-pebble's set/b1000 does: windows of
// 1,000 consecutive keys over 16,000, in a table of 131,072 buckets. In
// log mode each batch is one synced record and writes no undo log
// (DeferAtomic); unsafe-nosync syncs nothing but, promising no atomicity,
// still writes the undo log, so it is not log mode's CPU without the sync.
func BenchmarkHostSetBatch(b *testing.B) {
	const batch, keySpace = 1000, 16000
	for _, mode := range []native.Mode{native.ModeLog, native.ModeUnsafeNoSync} {
		b.Run(mode.String(), func(b *testing.B) {
			be, err := native.Open(b.TempDir(), native.Options{Mode: mode})
			require.NoError(b, err)
			defer be.Close()
			m, err := pm.NewMachine(be)
			require.NoError(b, err)
			st, err := kvs.Create(m, kvs.Config{Buckets: 1 << 17, MaxBatch: batch, BlockThreads: 256}, kvs.HostBatches())
			require.NoError(b, err)
			keys, vals := make([]uint32, batch), make([]uint64, batch)
			next := 0
			for b.Loop() {
				for i := range keys {
					keys[i], vals[i] = uint32((next+i)%keySpace+1), uint64(next+i)
				}
				next = (next + batch) % keySpace
				if _, err := st.SetBatch(keys, vals); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}
