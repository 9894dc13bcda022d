package kvs_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
)

func seeded(t testing.TB, seed uint64) *rand.Rand {
	t.Logf("seed = %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func newMachine(t testing.TB) *pm.Machine {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	return m
}

// distinctKeys returns n distinct keys in 1..space.
func distinctKeys(rng *rand.Rand, n int, space uint32) []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	for len(out) < n {
		k := 1 + rng.Uint32N(space)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

var logKinds = []kvs.LogKind{kvs.LogHCL, kvs.LogConv}

// Random SET, DELETE and GET batches against a Go map, with the store's
// invariant checked after every batch, for both logs.
func TestBatchesMatchModel(t *testing.T) {
	for _, lk := range logKinds {
		t.Run(lk.String(), func(t *testing.T) {
			rng := seeded(t, 11+uint64(lk))
			m := newMachine(t)
			st, err := kvs.Create(m, kvs.Config{Buckets: 64, MaxBatch: 96, BlockThreads: 64, Log: lk})
			require.NoError(t, err)
			model := map[uint32]uint64{}
			for round := range 12 {
				keys := distinctKeys(rng, 1+rng.IntN(96), 300)
				switch round % 3 {
				case 0, 1:
					vals := make([]uint64, len(keys))
					want := kvs.BatchResult{}
					for i, k := range keys {
						vals[i] = rng.Uint64()
						if _, ok := model[k]; ok {
							want.Updated++
						} else {
							want.Inserted++
						}
						model[k] = vals[i]
					}
					res, err := st.SetBatch(keys, vals)
					require.NoError(t, err, "round %d", round)
					require.Equal(t, want.Inserted, res.Inserted)
					require.Equal(t, want.Updated, res.Updated)
				case 2:
					want := 0
					for _, k := range keys {
						if _, ok := model[k]; ok {
							want++
							delete(model, k)
						}
					}
					res, err := st.DeleteBatch(keys)
					require.NoError(t, err)
					require.Equal(t, want, res.Deleted)
					require.Equal(t, len(keys)-want, res.Missing)
				}
				got, err := st.Contents()
				require.NoError(t, err, "round %d", round)
				require.Equal(t, model, got, "round %d", round)

				probe := distinctKeys(rng, 50, 300)
				vals, found, err := st.GetBatch(probe)
				require.NoError(t, err)
				for i, k := range probe {
					v, ok := model[k]
					require.Equal(t, ok, found[i], "key %d", k)
					require.Equal(t, v, vals[i], "key %d", k)
				}
			}
		})
	}
}

func TestFull(t *testing.T) {
	m := newMachine(t)
	st, err := kvs.Create(m, kvs.Config{Buckets: 2, MaxBatch: 32})
	require.NoError(t, err)
	keys := make([]uint32, 20)
	vals := make([]uint64, 20)
	for i := range keys {
		keys[i], vals[i] = uint32(i+1), uint64(i)
	}
	res, err := st.SetBatch(keys, vals)
	require.ErrorIs(t, err, kvs.ErrFull)
	require.Equal(t, 2*kvs.Ways, res.Inserted)
	require.Len(t, res.Full, 20-2*kvs.Ways)
	n, err := st.Len()
	require.NoError(t, err)
	require.Equal(t, 2*kvs.Ways, n)
	// Updates of present keys still work when the table is full.
	require.NoError(t, st.Put(keys[0], 99))
	v, ok, err := st.Get(keys[0])
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(99), v)
}

func TestBadInput(t *testing.T) {
	m := newMachine(t)
	st, err := kvs.Create(m, kvs.Config{Buckets: 8, MaxBatch: 4})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		keys []uint32
		vals []uint64
	}{
		{"zero key", []uint32{0}, []uint64{1}},
		{"duplicate", []uint32{3, 3}, []uint64{1, 2}},
		{"too many", []uint32{1, 2, 3, 4, 5}, []uint64{1, 2, 3, 4, 5}},
		{"empty", nil, []uint64{}},
		{"lengths", []uint32{1, 2}, []uint64{1}},
		{"nil values", []uint32{1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.SetBatch(tc.keys, tc.vals)
			require.ErrorIs(t, err, kvs.ErrBadArg)
		})
	}
	for _, cfg := range []kvs.Config{
		{Buckets: 1, MaxBatch: 4},
		{Buckets: 8, MaxBatch: 0},
		{Buckets: 8, MaxBatch: 4, BlockThreads: 2048},
		{Buckets: 8, MaxBatch: 4, Log: 9},
		{Buckets: kvs.MaxBuckets + 1, MaxBatch: 4},
	} {
		_, err := kvs.Create(m, cfg)
		require.ErrorIs(t, err, kvs.ErrBadArg, "%+v", cfg)
	}
	_, err = kvs.Create(nil, kvs.Config{Buckets: 8, MaxBatch: 4})
	require.ErrorIs(t, err, kvs.ErrBadArg)
	_, err = kvs.ParseLogKind("wal")
	require.ErrorIs(t, err, kvs.ErrBadArg)

	// A corrupt header is an error on Open, never a panic.
	bad := make([]byte, 8)
	require.NoError(t, m.CopyIn(st.Table().Base.Add(16), bad))
	_, err = kvs.Open(m, "gpkvs")
	require.ErrorIs(t, err, kvs.ErrCorrupt)
	_, err = kvs.Open(m, "nope")
	require.ErrorIs(t, err, pm.ErrNoRegion)
}

// Fuzz-style: random header bytes never panic Open.
func TestOpenGarbage(t *testing.T) {
	rng := seeded(t, 5)
	for i := range 200 {
		m := newMachine(t)
		r, err := m.CreateRegion("gpkvs", 256+128*uint64(1+rng.IntN(4)))
		require.NoError(t, err)
		junk := make([]byte, 256)
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		if i%2 == 0 {
			copy(junk, "GPKVS\x00\x00\x01")
		}
		require.NoError(t, m.CopyIn(r.Base, junk))
		_, err = kvs.Open(m, "gpkvs")
		require.Error(t, err)
	}
}

// Every prefix of a batch's persists, recovered, holds either the state
// before the batch or the state after it, for both logs; on a batch of one
// block, and on one of two blocks, the second partly used, whose blocks
// are not whole warps (the truncate kernel covers only the slots the batch
// wrote).
func TestCrashPrefixesAllOrNothing(t *testing.T) {
	for _, tc := range []struct {
		log                           kvs.LogKind
		buckets, block, maxBatch, pre int
		batch                         int
		seed                          uint64
	}{
		{kvs.LogHCL, 8, 8, 8, 5, 5, 78},
		{kvs.LogConv, 8, 8, 8, 5, 5, 79},
		{kvs.LogHCL, 16, 10, 24, 6, 14, 91},
		{kvs.LogConv, 16, 10, 24, 6, 14, 92},
	} {
		lk := tc.log
		t.Run(fmt.Sprintf("%v/block=%d/batch=%d", lk, tc.block, tc.batch), func(t *testing.T) {
			rng := seeded(t, tc.seed)
			rec := record.New(functional.New(pm.GPULimits{}), false)
			m, err := pm.NewMachine(rec)
			require.NoError(t, err)
			st, err := kvs.Create(m, kvs.Config{Buckets: tc.buckets, MaxBatch: tc.maxBatch, BlockThreads: tc.block, Log: lk})
			require.NoError(t, err)
			nk := tc.pre + tc.batch - 2
			keys := distinctKeys(rng, nk, 40*uint32(tc.buckets)/8)
			vals := make([]uint64, nk)
			for i := range vals {
				vals[i] = rng.Uint64()
			}
			_, err = st.SetBatch(keys[:tc.pre], vals[:tc.pre])
			require.NoError(t, err)
			before, err := st.Contents()
			require.NoError(t, err)

			base := m.Memory().Snapshot()
			rec.Reset()
			// Update two old keys, insert the others.
			bk, bv := keys[tc.pre-2:], make([]uint64, tc.batch)
			after := maps.Clone(before)
			for i := range bv {
				bv[i] = rng.Uint64()
				after[bk[i]] = bv[i]
			}
			_, err = st.SetBatch(bk, bv)
			require.NoError(t, err)
			ps := rec.Persists()
			require.NotEmpty(t, ps)
			for k := 0; k <= len(ps); k++ {
				img, err := record.Image(base, ps[:k])
				require.NoError(t, err)
				m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
				require.NoError(t, err)
				st2, err := kvs.Open(m2, "gpkvs")
				require.NoError(t, err, "prefix %d", k)
				_, err = st2.Recover()
				require.NoError(t, err, "prefix %d", k)
				got, err := st2.Contents()
				require.NoError(t, err, "prefix %d", k)
				if !maps.Equal(got, before) {
					require.Equal(t, after, got, "prefix %d of %d: neither before nor after", k, len(ps))
				}
				// The recovered store takes new batches.
				require.NoError(t, st2.Put(keys[0], 1))
			}
		})
	}
}

// A store opened on an uncommitted batch refuses batches until recovered.
func TestNeedsRecovery(t *testing.T) {
	rec := record.New(functional.New(pm.GPULimits{}), false)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	st, err := kvs.Create(m, kvs.Config{Buckets: 8, MaxBatch: 4, Log: kvs.LogConv})
	require.NoError(t, err)
	base := m.Memory().Snapshot()
	rec.Reset()
	_, err = st.SetBatch([]uint32{1, 2, 3}, []uint64{10, 20, 30})
	require.NoError(t, err)
	ps := rec.Persists()
	// Cut the batch in the middle of the batch kernel's persists.
	img, err := record.Image(base, ps[:len(ps)/2])
	require.NoError(t, err)
	m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	st2, err := kvs.Open(m2, "gpkvs")
	require.NoError(t, err)
	require.True(t, st2.NeedsRecovery())
	_, err = st2.SetBatch([]uint32{4}, []uint64{40})
	require.ErrorIs(t, err, kvs.ErrNeedsRecovery)
	require.ErrorIs(t, st2.Check(), kvs.ErrNeedsRecovery)
	r, err := st2.Recover()
	require.NoError(t, err)
	require.True(t, r.Active)
	require.Equal(t, uint64(1), r.Seq)
	n, err := st2.Len()
	require.NoError(t, err)
	require.Zero(t, n)
	// Recovering twice is harmless.
	r, err = st2.Recover()
	require.NoError(t, err)
	require.False(t, r.Active)
	_, err = st2.SetBatch([]uint32{1, 2, 3}, []uint64{10, 20, 30})
	require.NoError(t, err)
	got, err := st2.Contents()
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3}, slices.Sorted(maps.Keys(got)))
}
