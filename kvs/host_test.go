package kvs_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// regionBytes returns the bytes of region name on m.
func regionBytes(t *testing.T, m *pm.Machine, name string) []byte {
	t.Helper()
	r, err := m.OpenRegion(name)
	require.NoError(t, err)
	b := make([]byte, r.Size)
	require.NoError(t, m.CopyOut(r.Base, b))
	return b
}

// Random SET, DELETE and GET batches on two stores, one running its
// batches as kernels and one on the host (HostBatches): after every batch
// the results, and the table's and the log's bytes, are the same. The
// table is small and nearly full, so new keys share buckets and some find
// no free way. The bytes agree only while the executor lets a bucket's
// claiming threads take free ways in thread order, as the host does in
// request order (HostBatches); a change there shows here first.
func TestHostBatchesMatchKernels(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		buckets, maxBatch, block int
		space                    uint32
		seed                     uint64
	}{
		{"one block", 16, 24, 32, 300, 1},
		{"blocks of 40", 16, 100, 40, 200, 2},
		{"full table", 8, 64, 64, 120, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := seeded(t, tc.seed)
			cfg := kvs.Config{Buckets: tc.buckets, MaxBatch: tc.maxBatch, BlockThreads: tc.block}
			mk, mh := newMachine(t), newMachine(t)
			kernel, err := kvs.Create(mk, cfg)
			require.NoError(t, err)
			host, err := kvs.Create(mh, cfg, kvs.HostBatches())
			require.NoError(t, err)
			full := 0
			for round := range 40 {
				what := fmt.Sprintf("round %d", round)
				keys := distinctKeys(rng, 1+rng.IntN(tc.maxBatch-1), tc.space)
				var rk, rh kvs.BatchResult
				var ek, eh error
				switch round % 4 {
				case 3:
					rk, ek = kernel.DeleteBatch(keys)
					rh, eh = host.DeleteBatch(keys)
				case 2:
					// A GET batch, repeating a key.
					keys = append(keys, keys[0])
					vk, fk, err := kernel.GetBatch(keys)
					require.NoError(t, err, what)
					vh, fh, err := host.GetBatch(keys)
					require.NoError(t, err, what)
					require.Equal(t, fk, fh, what)
					require.Equal(t, vk, vh, what)
					continue
				default:
					vals := make([]uint64, len(keys))
					for i := range vals {
						vals[i] = rng.Uint64()
					}
					rk, ek = kernel.SetBatch(keys, vals)
					rh, eh = host.SetBatch(keys, vals)
				}
				require.Equal(t, ek, eh, what)
				full += len(rh.Full)
				rk.Cycles, rk.KernelCycles = 0, 0
				require.Equal(t, rk, rh, what)
				require.NoError(t, host.Check(), what)
				require.Equal(t, regionBytes(t, mk, "gpkvs"), regionBytes(t, mh, "gpkvs"), "%s: table", what)
				require.Equal(t, regionBytes(t, mk, "gpkvs.log"), regionBytes(t, mh, "gpkvs.log"), "%s: log", what)
			}
			n, err := host.Len()
			require.NoError(t, err)
			require.Positive(t, n)
			if tc.buckets*kvs.Ways < int(tc.space) {
				require.Positive(t, full, "some new keys found both buckets full")
			}
		})
	}
}

// On pm/native's log mode a host batch is one record of the log
// (DeferAtomic) and writes no undo log: random SET and DELETE batches give
// the results and the table bytes the kernels give on the same backend,
// while the host store's log region keeps the bytes Create gave it, and
// each host batch costs one sync. The store then reopens with every
// batch there.
func TestHostBatchesAtomic(t *testing.T) {
	rng := seeded(t, 4)
	cfg := kvs.Config{Buckets: 32, MaxBatch: 64, BlockThreads: 32}
	open := func(dir string) (*native.Backend, *pm.Machine) {
		be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
		require.NoError(t, err)
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		return be, m
	}
	bk, mk := open(t.TempDir())
	defer bk.Close()
	hdir := t.TempDir()
	bh, mh := open(hdir)
	kernel, err := kvs.Create(mk, cfg)
	require.NoError(t, err)
	host, err := kvs.Create(mh, cfg, kvs.HostBatches())
	require.NoError(t, err)
	logAtCreate := regionBytes(t, mh, "gpkvs.log")
	want := map[uint32]uint64{}
	for round := range 30 {
		what := fmt.Sprintf("round %d", round)
		keys := distinctKeys(rng, 1+rng.IntN(cfg.MaxBatch-1), 200)
		syncs := bh.Stats().Syncs
		var rk, rh kvs.BatchResult
		var ek, eh error
		if round%3 == 2 {
			rk, ek = kernel.DeleteBatch(keys)
			rh, eh = host.DeleteBatch(keys)
			for _, k := range keys {
				delete(want, k)
			}
		} else {
			vals := make([]uint64, len(keys))
			for i := range vals {
				vals[i] = rng.Uint64()
			}
			rk, ek = kernel.SetBatch(keys, vals)
			rh, eh = host.SetBatch(keys, vals)
			full := map[uint32]bool{}
			for _, k := range rh.Full {
				full[k] = true
			}
			for i, k := range keys {
				if !full[k] {
					want[k] = vals[i]
				}
			}
		}
		require.Equal(t, ek, eh, what)
		if eh != nil {
			require.ErrorIs(t, eh, kvs.ErrFull, what)
		}
		require.EqualValues(t, 1, bh.Stats().Syncs-syncs, "%s: one sync", what)
		rk.Cycles, rk.KernelCycles = 0, 0
		require.Equal(t, rk, rh, what)
		require.Equal(t, regionBytes(t, mk, "gpkvs"), regionBytes(t, mh, "gpkvs"), "%s: table", what)
		require.Equal(t, logAtCreate, regionBytes(t, mh, "gpkvs.log"), "%s: the log region changed", what)
	}
	require.NoError(t, bh.Close())
	bh, mh = open(hdir)
	defer bh.Close()
	host, err = kvs.Open(mh, "gpkvs", kvs.HostBatches())
	require.NoError(t, err)
	require.NoError(t, host.Check())
	n, err := host.Len()
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	for k, v := range want {
		got, ok, err := host.Get(k)
		require.NoError(t, err)
		require.True(t, ok, "key %d", k)
		require.Equal(t, v, got, "key %d", k)
	}
}

// HostBatches needs an HCL log: Create and Open refuse it with a
// conventional one, before changing anything.
func TestHostBatchesNeedHCL(t *testing.T) {
	m := newMachine(t)
	cfg := kvs.Config{Buckets: 8, MaxBatch: 8, Log: kvs.LogConv}
	_, err := kvs.Create(m, cfg, kvs.HostBatches())
	require.ErrorIs(t, err, kvs.ErrBadArg)
	require.Empty(t, m.Memory().Regions(), "a refused Create makes no region")
	st, err := kvs.Create(m, cfg)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = kvs.Open(m, "gpkvs", kvs.HostBatches())
	require.ErrorIs(t, err, kvs.ErrBadArg)
}

// After the machine crashes, a store on it refuses reads and batches on
// both paths with ErrCrashed, as the machine refuses use.
func TestCrashedMachine(t *testing.T) {
	for _, path := range batchPaths {
		t.Run(path.name, func(t *testing.T) {
			m := newMachine(t)
			st, err := kvs.Create(m, kvs.Config{Buckets: 8, MaxBatch: 4}, path.opts...)
			require.NoError(t, err)
			require.NoError(t, st.Put(1, 10))
			_, err = m.Crash()
			require.NoError(t, err)
			_, _, err = st.Get(1)
			require.ErrorIs(t, err, pm.ErrCrashed)
			_, _, err = st.GetBatch([]uint32{1})
			require.ErrorIs(t, err, pm.ErrCrashed)
			require.ErrorIs(t, st.Put(2, 20), pm.ErrCrashed)
		})
	}
}
