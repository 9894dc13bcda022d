package btree

import (
	"encoding/binary"
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
	for id, nd := range c.m {
		require.NotZero(t, bm[id/64]&(1<<(id%64)), "cached node %d is free", id)
		got, err := tr.readNode(id)
		require.NoError(t, err, "cached node %d", id)
		require.Equal(t, got.leaf, nd.leaf, "node %d", id)
		require.Equal(t, got.next, nd.next, "node %d", id)
		require.Equal(t, got.keys, nd.keys, "node %d", id)
		require.Equal(t, got.vals, nd.vals, "node %d", id)
	}
}

// Metamorphic: host inserts with the node cache and without it, mixed with
// deletes and kernel batches, leave trees that read the same, and every
// cached node is what the image holds.
func TestNodeCacheMetamorphic(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xcace))
	var trees [2]*Tree
	for i := range trees {
		tr, err := Create(newMachine(t), "t", Options{Order: 8, Capacity: 4096, MaxBatch: 256})
		require.NoError(t, err)
		tr.knobs.noNodeCache = i == 1
		trees[i] = tr
	}
	const keySpace = 600
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
		for _, tr := range trees {
			switch {
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
	require.NotEmpty(t, trees[0].nc.m, "the cache was used")
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
	_, ok := tr.nc.m[id]
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
