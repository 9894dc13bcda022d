package btree

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNodeIndex checks the plan's index of nodes against a map over
// batches of random ids, with resets between them and ids outside the pool.
func TestNodeIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 0x1d))
	var x nodeIndex
	for round, n := range []int{0, 1, 63, 64, 1000, 5000, 3} {
		const capacity = 1 << 14
		x.reset(capacity)
		want := map[uint32]*node{}
		for range n {
			id := uint32(r.IntN(capacity + 100)) // some outside the pool
			nd := &node{}
			x.put(id, nd)
			if id < capacity {
				want[id] = nd
			}
		}
		require.Equal(t, len(want), x.n, "round %d", round)
		for id := range uint32(capacity + 100) {
			got, ok := x.get(id)
			nd, in := want[id]
			require.Equal(t, in, ok, "round %d id %d", round, id)
			require.Same(t, nd, got, "round %d id %d", round, id)
		}
	}
}
