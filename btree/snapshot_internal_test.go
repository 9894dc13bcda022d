package btree

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// collectView returns what scanView yields for [lo, hi], stopping after
// limit keys (0: no limit).
func collectView(t *testing.T, tr *Tree, v view, lo, hi uint64, limit int) []KV {
	t.Helper()
	var got []KV
	require.NoError(t, tr.scanView(v, lo, hi, func(k, val uint64) bool {
		got = append(got, KV{k, val})
		return limit == 0 || len(got) < limit
	}))
	return got
}

// A view's Get and Scan (which walk the tree from the root) read what the
// leaf-chain Scan and Get read, on trees from height 1 to at least 4, for random
// ranges, empty and inverted ones, and scans stopped early.
func TestScanViewMatchesScan(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	m := newMachine(t)
	tr, err := Create(m, "snap", Options{Order: 4, Capacity: 1 << 14, MaxBatch: 512})
	require.NoError(t, err)
	want := map[uint64]uint64{}
	heights := map[int]bool{}
	for round := range 12 {
		ks, vs := make([]uint64, 1+rng.IntN(min(2<<round, 300))), []uint64{}
		for i := range ks {
			ks[i] = rng.Uint64N(5000) * 3
			vs = append(vs, uint64(round)<<32|uint64(i))
		}
		require.NoError(t, tr.insertHost(ks, vs))
		for i, k := range ks {
			want[k] = vs[i]
		}
		v := tr.view()
		heights[v.height] = true
		require.Equal(t, uint64(len(want)), v.count)
		keys := slices.Sorted(maps.Keys(want))
		for range 40 {
			lo, hi := rng.Uint64N(16000), rng.Uint64N(16000)
			if rng.IntN(8) == 0 {
				lo, hi = 0, math.MaxUint64
			}
			limit := 0
			if rng.IntN(4) == 0 {
				limit = 1 + rng.IntN(20)
			}
			var exp []KV
			require.NoError(t, tr.ScanErr(lo, hi, func(k, val uint64) bool {
				exp = append(exp, KV{k, val})
				return limit == 0 || len(exp) < limit
			}))
			require.Equal(t, exp, collectView(t, tr, v, lo, hi, limit), "[%d, %d] limit %d", lo, hi, limit)
		}
		for range 40 {
			k := keys[rng.IntN(len(keys))] + uint64(rng.IntN(2)) // present, or absent
			val, ok, err := tr.getView(v, k)
			require.NoError(t, err)
			wv, wok := want[k]
			require.Equal(t, wok, ok, "key %d", k)
			require.Equal(t, wv, val, "key %d", k)
		}
	}
	// A batch may grow the tree by two levels at once (3 to 5 in one
	// seed), so the test asks for height 1 and for some height of 4 or more.
	require.True(t, heights[1] && slices.Max(slices.Collect(maps.Keys(heights))) >= 4, "heights %v", heights)
}

// A view stays readable, whole and unchanged, while later batches rewrite
// every key, as long as the tree keeps the nodes they free; once released,
// freed nodes are reused.
func TestKeepFreed(t *testing.T) {
	m := newMachine(t)
	tr, err := Create(m, "keep", Options{Order: 4, Capacity: 1 << 12, MaxBatch: 512})
	require.NoError(t, err)
	tr.keepFreed()
	ks, vs := make([]uint64, 200), make([]uint64, 200)
	for i := range ks {
		ks[i], vs[i] = uint64(i), 1
	}
	require.NoError(t, tr.insertHost(ks, vs))
	old := tr.view()
	before := collectView(t, tr, old, 0, math.MaxUint64, 0)
	require.Len(t, before, 200)
	for r := range 5 {
		for i := range vs {
			vs[i] = uint64(r + 2)
		}
		require.NoError(t, tr.insertHost(ks, vs))
		found, err := tr.Delete(uint64(r))
		require.NoError(t, err)
		require.True(t, found)
	}
	require.Equal(t, before, collectView(t, tr, old, 0, math.MaxUint64, 0), "the old view is unchanged")
	require.Len(t, collectView(t, tr, tr.view(), 0, math.MaxUint64, 0), 199, "each round puts back the key the last deleted")
	kept := tr.keptNodes()
	require.Positive(t, kept)
	// A release up to the current batch lets every kept node go; the
	// next batch reuses the lowest free ids again.
	tr.releaseKept(tr.view().seq)
	require.Zero(t, tr.keptNodes())
	require.Less(t, tr.hint, uint64(tr.nodes+kept), "the hint points below the released nodes")
	require.NoError(t, tr.Check())
}
