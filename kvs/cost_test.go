package kvs_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// launchLog is a backend that notes every launch it begins.
type launchLog struct {
	pm.Backend
	launches []pm.Launch
}

func (l *launchLog) Begin(ln pm.Launch) error {
	l.launches = append(l.launches, ln)
	return l.Backend.Begin(ln)
}

// Unwrap returns the functional backend underneath (pm.Wrapper).
func (l *launchLog) Unwrap() pm.Backend { return l.Backend }

// A one-key Put launches the same kernels on the same grids, and takes the
// same simulated cycles, whatever the store's MaxBatch: it costs what it
// writes. Before, its truncate kernel ran one thread per log partition of
// the whole batch grid.
func TestPutCostsWhatItWrites(t *testing.T) {
	for _, lk := range logKinds {
		t.Run(lk.String(), func(t *testing.T) {
			var grids [][]pm.Launch
			var cycles []uint64
			for _, mb := range []int{64, 65536} {
				ll := &launchLog{Backend: functional.New(pm.GPULimits{})}
				m, err := pm.NewMachine(ll)
				require.NoError(t, err)
				st, err := kvs.Create(m, kvs.Config{Buckets: 64, MaxBatch: mb, Log: lk})
				require.NoError(t, err)
				require.NoError(t, st.Put(7, 70))
				ll.launches = nil
				require.NoError(t, st.Put(7, 71))
				threads := 0
				for _, ln := range ll.launches {
					threads += ln.Blocks * ln.Threads
				}
				require.Len(t, ll.launches, 4, "begin, set, commit, truncate")
				require.LessOrEqual(t, threads, 1+32+1+32, "MaxBatch %d: %+v", mb, ll.launches)
				grids = append(grids, ll.launches)

				cfg, err := hwmodel.Preset("pm-near")
				require.NoError(t, err)
				be, err := hwmodel.New(cfg, hwmodel.SBRP)
				require.NoError(t, err)
				m, err = pm.NewMachine(be)
				require.NoError(t, err)
				st, err = kvs.Create(m, kvs.Config{Buckets: 64, MaxBatch: mb, Log: lk})
				require.NoError(t, err)
				res, err := st.SetBatch([]uint32{7}, []uint64{70})
				require.NoError(t, err)
				require.NotZero(t, res.Cycles)
				cycles = append(cycles, res.Cycles)
			}
			require.Equal(t, grids[0], grids[1])
			require.Equal(t, cycles[0], cycles[1], "simulated cycles of a one-key Put at MaxBatch 64 and 65,536")
		})
	}
}

// Batches of every size, on block shapes that are and are not whole warps
// and batch sizes that end mid-block, leave the log empty (the truncate
// kernel covers every partition a batch wrote) and match a model.
func TestTruncateCoversTheBatch(t *testing.T) {
	for _, tc := range []struct {
		log             kvs.LogKind
		block, maxBatch int
		parts           int
	}{
		{kvs.LogHCL, 64, 200, 0},
		{kvs.LogHCL, 20, 70, 0},
		{kvs.LogHCL, 48, 100, 0},
		{kvs.LogHCL, 4, 9, 0},
		{kvs.LogConv, 64, 200, 0},
		{kvs.LogConv, 20, 70, 5},
		{kvs.LogConv, 16, 100, 40},
	} {
		t.Run(fmt.Sprintf("%v/block=%d/max=%d/parts=%d", tc.log, tc.block, tc.maxBatch, tc.parts), func(t *testing.T) {
			rng := seeded(t, uint64(31*tc.block+tc.maxBatch))
			st, err := kvs.Create(newMachine(t), kvs.Config{Buckets: 128, MaxBatch: tc.maxBatch, BlockThreads: tc.block, Log: tc.log, ConvParts: tc.parts})
			require.NoError(t, err)
			model := map[uint32]uint64{}
			sizes := []int{1, tc.block - 1, tc.block, tc.block + 1, tc.maxBatch - 1, tc.maxBatch}
			for range 6 {
				sizes = append(sizes, 1+rng.IntN(tc.maxBatch))
			}
			for i, n := range sizes {
				n = max(n, 1)
				keys := distinctKeys(rng, n, 400)
				if i%3 == 2 {
					_, err := st.DeleteBatch(keys)
					require.NoError(t, err, "batch %d of %d keys", i, n)
					for _, k := range keys {
						delete(model, k)
					}
				} else {
					vals := make([]uint64, n)
					for j, k := range keys {
						vals[j] = rng.Uint64()
						model[k] = vals[j]
					}
					_, err := st.SetBatch(keys, vals)
					require.NoError(t, err, "batch %d of %d keys", i, n)
				}
				require.False(t, st.NeedsRecovery())
				got, err := st.Contents() // ErrNeedsRecovery if an entry was left
				require.NoError(t, err, "batch %d of %d keys", i, n)
				require.True(t, maps.Equal(model, got), "batch %d of %d keys", i, n)
			}
		})
	}
}
