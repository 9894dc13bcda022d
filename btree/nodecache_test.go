package btree

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkCache requires every node in t's cache, if it holds the committed
// batch (a commit by another path leaves it behind, to be emptied at its
// next use), to be what a checked read of the image decodes.
func checkCache(t *testing.T, tr *Tree) {
	t.Helper()
	c := tr.nc
	if c == nil || !c.ok || c.seq != tr.cur.seq {
		return
	}
	bm := tr.bm[tr.cur.seq&1]
	require.LessOrEqual(t, len(c.ents), c.max, "entries")
	require.LessOrEqual(t, c.len(), c.max, "cached nodes")
	live := 0
	for i, e := range c.ents {
		require.Equal(t, int32(i), e.idx)
		if !e.live {
			continue
		}
		live++
		id := e.id
		ie, ok := c.entry(id)
		require.True(t, ok && ie == e, "node %d not indexed", id)
		nd := &e.nd
		require.NotZero(t, bm[id/64]&(1<<(id%64)), "cached node %d is free", id)
		got, err := tr.readNode(id)
		require.NoError(t, err, "cached node %d", id)
		require.Equal(t, got.leaf, nd.leaf, "node %d", id)
		require.Equal(t, got.next, nd.next, "node %d", id)
		require.Equal(t, got.keys, nd.keys, "node %d", id)
		require.Equal(t, got.vals, nd.vals, "node %d", id)
	}
	require.Equal(t, live, c.len(), "live entries")
	indexed := 0
	for _, x := range c.at {
		if x != 0 {
			indexed++
		}
	}
	require.Equal(t, live, indexed, "indexed nodes")
}

// Metamorphic: host inserts with the node cache and without it, mixed with
// deletes and kernel batches, leave trees that read the same, and every
// cached node is what the image holds.
// With a tiny bound (5 nodes: a batch pins more than that, so nodes are
// read past the cache; 40: evictions between batches) the eviction paths
// run.
func TestNodeCacheMetamorphic(t *testing.T) {
	for _, bound := range []int{0, 5, 40} {
		t.Run(fmt.Sprintf("max=%d", bound), func(t *testing.T) { testNodeCacheMetamorphic(t, bound) })
	}
}

func testNodeCacheMetamorphic(t *testing.T, bound int) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xcace))
	var trees [2]*Tree
	for i := range trees {
		tr, err := Create(newMachine(t), "t", Options{Order: 8, Capacity: 4096, MaxBatch: 256})
		require.NoError(t, err)
		tr.knobs.noNodeCache = i == 1
		tr.knobs.nodeCacheMax = bound
		trees[i] = tr
	}
	const keySpace = 600
	peak := 0
	for step := range 300 {
		op := rng.IntN(10)
		var ks, vs []uint64
		n := 1 + rng.IntN(100)
		if op < 2 {
			n = 1
		}
		for range n {
			ks = append(ks, 1+rng.Uint64N(keySpace))
			vs = append(vs, rng.Uint64())
		}
		del := ks[0]
		// A growth's old tree drops its scratch, and a growth's copy
		// inserts without the cache; either may be followed by inserts
		// (the last 100 steps keep one cache, for the counts below).
		drop, uncached := step%37 == 36 && step < 200, rng.IntN(8) == 0
		for _, tr := range trees {
			if drop {
				tr.dropScratch()
			}
			switch {
			case op < 6 && uncached:
				require.NoError(t, tr.insertHostCached(ks, vs), "step %d", step)
			case op < 6: // a host insert (DB.Put, DB.PutBatch)
				require.NoError(t, tr.insertHost(ks, vs), "step %d", step)
			case op < 9:
				_, err := tr.Delete(del)
				require.NoError(t, err, "step %d", step)
			default: // a kernel batch: the cache must not outlive it
				_, err := tr.InsertBatch(ks, vs, BatchOptions{})
				require.NoError(t, err, "step %d", step)
			}
		}
		checkCache(t, trees[0])
		if c := trees[0].nc; c != nil {
			peak = max(peak, c.len())
		}
		require.Equal(t, trees[1].Len(), trees[0].Len(), "step %d", step)
		probe := []uint64{del, ks[len(ks)-1], 1 + rng.Uint64N(keySpace)}
		for _, k := range probe {
			v0, ok0, err0 := trees[0].Get(k)
			v1, ok1, err1 := trees[1].Get(k)
			require.NoError(t, err0)
			require.NoError(t, err1)
			require.Equal(t, []any{v1, ok1}, []any{v0, ok0}, "step %d key %d", step, k)
		}
		if step%25 == 24 {
			var all [2][][2]uint64
			for i, tr := range trees {
				for k, v := range tr.Scan(0, ^uint64(0)) {
					all[i] = append(all[i], [2]uint64{k, v})
				}
				require.NoError(t, tr.Check())
			}
			require.Equal(t, all[1], all[0], "step %d", step)
		}
	}
	c := trees[0].nc
	t.Logf("cache: %d entries, peak %d nodes, %d evictions, %d reads past it", len(c.ents), peak, c.evictions, c.uncached)
	require.Positive(t, peak, "the cache was used")
	switch bound {
	case 5:
		require.Positive(t, c.uncached, "reads past a full cache")
	case 40:
		require.Positive(t, c.evictions, "evictions")
	}
}

// A node the cache holds that is corrupted in the image is still reported
// by the reads that bypass the cache: Check, Get, and Open (recovery).
func TestNodeCacheCorruptReported(t *testing.T) {
	m := newMachine(t)
	tr, err := Create(m, "t", Options{Order: 8, Capacity: 1024, MaxBatch: 256})
	require.NoError(t, err)
	ks := make([]uint64, 200)
	for i := range ks {
		ks[i] = uint64(i + 1)
	}
	require.NoError(t, tr.insertHost(ks, ks))
	require.NoError(t, tr.insertHost(ks[:50], ks[:50])) // the cache now holds committed nodes
	require.True(t, tr.nc.ok)
	id := tr.cur.root
	_, ok := tr.nc.entry(id)
	require.True(t, ok, "the root is cached")
	// Flip a key bit of the root in the image, behind the tree's back.
	a := tr.node0.Add(uint64(id)*tr.g.nodeBytes + 16)
	b := make([]byte, 8)
	require.NoError(t, m.CopyOut(a, b))
	binary.LittleEndian.PutUint64(b, binary.LittleEndian.Uint64(b)^1<<40)
	require.NoError(t, m.CopyIn(a, b))

	require.ErrorIs(t, tr.Check(), ErrCorrupt)
	_, _, err = tr.Get(7)
	require.ErrorIs(t, err, ErrCorrupt)
	// Recovery's reads bypass it too: Open, or the Check after it, sees
	// the corrupt root.
	tr2, err := Open(m, "t")
	if err != nil {
		require.ErrorIs(t, err, ErrCorrupt)
		return
	}
	require.ErrorIs(t, tr2.Check(), ErrCorrupt)
}

// The cache never holds more than its bound, nor allocates more entries,
// under a long random workload of host inserts on a tree many times its
// size, with the odd delete; it evicts, and what it holds is the image.
func TestNodeCacheBound(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xb0d))
	tr, err := Create(newMachine(t), "t", Options{Order: 8, Capacity: 1 << 14, MaxBatch: 512})
	require.NoError(t, err)
	const bound = 100
	tr.knobs.nodeCacheMax = bound
	steps, keySpace := 400, uint64(20_000)
	if testing.Short() {
		steps = 150
	}
	var peak, peakEnts int
	for step := range steps {
		n := 1 + rng.IntN(512)
		if rng.IntN(4) == 0 {
			n = 1
		}
		ks, vs := make([]uint64, n), make([]uint64, n)
		for i := range ks {
			ks[i], vs[i] = 1+rng.Uint64N(keySpace), rng.Uint64()
		}
		if rng.IntN(10) == 0 {
			_, err := tr.Delete(ks[0])
			require.NoError(t, err, "step %d", step)
			continue
		}
		require.NoError(t, tr.insertHost(ks, vs), "step %d", step)
		c := tr.nc
		require.LessOrEqual(t, len(c.ents), bound, "step %d: entries", step)
		require.LessOrEqual(t, c.len(), bound, "step %d: cached nodes", step)
		require.LessOrEqual(t, c.pins, c.len(), "step %d", step)
		peak, peakEnts = max(peak, c.len()), max(peakEnts, len(c.ents))
		if step%20 == 0 {
			checkCache(t, tr)
		}
	}
	checkCache(t, tr)
	require.NoError(t, tr.Check())
	t.Logf("tree of %d keys, height %d; cache peak %d nodes, %d entries of %d; %d evictions, %d reads past it",
		tr.Len(), tr.Height(), peak, peakEnts, bound, tr.nc.evictions, tr.nc.uncached)
	require.Equal(t, bound, peakEnts, "the cache filled")
	require.Positive(t, tr.nc.evictions, "the clock evicted")
	// The default bound: thousands of nodes at the default order, a few MiB.
	n := nodeCacheEntries(DefaultOrder)
	require.True(t, n >= 4000 && n <= 20_000, "default bound %d nodes", n)
}

// BenchmarkNodeCache: insertHost of batches of 1,000 random overwrites
// on an in-memory tree (functional backend: CPU only, no syncs) with the
// node cache off, at its default bound, and unbounded (as big as the pool),
// at the sizes of BenchmarkDB (10,000 keys) and btree-vs-pebble (65,536).
func BenchmarkNodeCache(b *testing.B) {
	for _, keys := range []int{10_000, 1 << 16} {
		for _, mode := range []string{"off", "bounded", "unbounded"} {
			b.Run(fmt.Sprintf("keys=%d/%s", keys, mode), func(b *testing.B) {
				tr, err := Create(newMachine(b), "t", Options{Capacity: 1 << 16, MaxBatch: 4096})
				require.NoError(b, err)
				ks := make([]uint64, 0, 4096)
				for k := uint64(1); k <= uint64(keys); k++ {
					ks = append(ks, k)
					if len(ks) == cap(ks) || k == uint64(keys) {
						require.NoError(b, tr.insertHost(ks, ks))
						ks = ks[:0]
					}
				}
				tr.knobs.noNodeCache = mode == "off"
				if mode == "unbounded" {
					tr.knobs.nodeCacheMax = 1 << 16
				}
				tr.nc = nil
				rng := rand.New(rand.NewPCG(7, 1000))
				ks = make([]uint64, 1000)
				for b.Loop() {
					for i := range ks {
						ks[i] = 1 + rng.Uint64N(uint64(keys))
					}
					if err := tr.insertHost(ks, ks); err != nil {
						b.Fatal(err)
					}
				}
				if c := tr.nc; c != nil {
					b.ReportMetric(float64(c.len()), "cached")
					b.ReportMetric(float64(len(c.ents)), "entries")
					b.ReportMetric(float64(c.evictions)/float64(b.N), "evictions/op")
					b.ReportMetric(float64(c.uncached)/float64(b.N), "uncached/op")
				}
			})
		}
	}
}
