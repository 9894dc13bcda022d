package btree

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The host insert path (insertHost, the DB's) writes the very bytes the
// insert kernel does: after every batch, on trees of several orders, the
// region of a tree written by InsertBatch and that of one written by
// insertHost are equal, byte for byte (nodes, piece records, marks,
// result, bitmaps, meta). So a crash in the host path leaves what a crash
// in the kernel could, and the kernel's recovery finishes it.
func TestInsertHostMatchesKernel(t *testing.T) {
	seed := testSeed(t)
	for _, tc := range []struct {
		name            string
		order, maxBatch int
		keySpace        uint64
		rounds          int
	}{
		{"order4", 4, 64, 500, 60},
		{"order7", 7, 128, 2000, 40},
		{"default", 0, 256, 5000, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(tc.order)))
			o := Options{Order: tc.order, Capacity: 8192, MaxBatch: tc.maxBatch}
			ma, mb := newMachine(t), newMachine(t)
			ta, err := Create(ma, "t", o)
			require.NoError(t, err)
			tb, err := Create(mb, "t", o)
			require.NoError(t, err)
			for r := range tc.rounds {
				n := 1 + rng.IntN(tc.maxBatch)
				if r%5 == 0 {
					n = 1
				}
				ks, vs := make([]uint64, n), make([]uint64, n)
				for i := range ks {
					ks[i], vs[i] = 1+rng.Uint64N(tc.keySpace), rng.Uint64()
				}
				_, err := ta.InsertBatch(ks, vs, BatchOptions{})
				require.NoError(t, err, "round %d", r)
				require.NoError(t, tb.insertHost(ks, vs), "round %d", r)
				if r%7 == 3 {
					k := ks[0]
					fa, err := ta.Delete(k)
					require.NoError(t, err)
					fb, err := tb.Delete(k)
					require.NoError(t, err)
					require.Equal(t, fa, fb)
				}
				ra, _ := ma.Memory().Snapshot().Region("t")
				rb, _ := mb.Memory().Snapshot().Region("t")
				require.True(t, bytes.Equal(ra.Data, rb.Data), "round %d (batch of %d): regions differ", r, n)
			}
			require.NoError(t, tb.Check())
			require.Equal(t, ta.Len(), tb.Len())
			t.Logf("%d batches, %d keys, height %d", tc.rounds, tb.Len(), tb.Height())
		})
	}
}
