package btree

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// TestDerivedStateMatchesWalk: random batches, Puts and Deletes (seeded:
// replay a failure with -seed N), and after every one the bitmap, key
// count, node count and free-node hint a commit keeps incrementally equal
// what a full walk of the committed tree gives (verifyDerived), and the
// keys equal a model map. Every so often the tree is reopened from a
// crash image, which derives the state afresh.
func TestDerivedStateMatchesWalk(t *testing.T) {
	seed := testSeed(t)
	steps := 400
	if testing.Short() {
		steps = 120
	}
	tests := []struct {
		order int
		alg   Alg
		space uint64 // keys are drawn from [0, space)
	}{
		{4, Alg2, 3000},
		{4, Alg1, 3000},
		{15, Alg2, 20000},
		{5, Alg2, 400},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("order%d-%v-space%d", tc.order, tc.alg, tc.space), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(tc.order)<<8|uint64(tc.alg)))
			m := newMachine(t)
			tr, err := Create(m, "bt", Options{Order: tc.order, Capacity: 6000, MaxBatch: 128})
			require.NoError(t, err)
			want := map[uint64]uint64{}
			for step := range steps {
				var what string
				switch op := rng.IntN(10); {
				case op < 4: // a batch
					n := 1 + rng.IntN(128)
					ks, vs := make([]uint64, n), make([]uint64, n)
					for i := range ks {
						ks[i], vs[i] = rng.Uint64N(tc.space), rng.Uint64()
					}
					_, err := tr.InsertBatch(ks, vs, BatchOptions{Alg: tc.alg, BlockThreads: 1 + rng.IntN(64)})
					require.NoError(t, err, "step %d", step)
					for i, k := range ks {
						want[k] = vs[i]
					}
					what = fmt.Sprintf("batch of %d", n)
				case op < 6: // a Put
					k, v := rng.Uint64N(tc.space), rng.Uint64()
					require.NoError(t, tr.Put(k, v), "step %d", step)
					want[k] = v
					what = fmt.Sprintf("put %d", k)
				default: // Deletes, of keys present or not
					for range 1 + rng.IntN(20) {
						k := rng.Uint64N(tc.space)
						ok, err := tr.Delete(k)
						require.NoError(t, err, "step %d", step)
						_, had := want[k]
						require.Equal(t, had, ok, "step %d: delete %d", step, k)
						delete(want, k)
					}
					what = "deletes"
				}
				require.NoError(t, tr.verifyDerived(), "step %d (%s)", step, what)
				require.Equal(t, len(want), tr.Len(), "step %d (%s)", step, what)
				if step%50 == 49 {
					requireContent(t, tr, want)
					img, err := m.Crash()
					require.NoError(t, err)
					m, err = pm.Reopen(img, functional.New(pm.GPULimits{}))
					require.NoError(t, err)
					tr, err = Open(m, "bt")
					require.NoError(t, err)
					require.NoError(t, tr.verifyDerived(), "reopened after step %d", step)
				}
			}
			requireContent(t, tr, want)
		})
	}
}
