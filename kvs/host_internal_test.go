package kvs

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// radixSort agrees with slices.Sort on keys of every width up to 64 bits,
// with few and many distinct bytes.
func TestRadixSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, width := range []uint{1, 7, 8, 9, 16, 29, 40, 63, 64} {
		for _, n := range []int{1, 2, 3, 100, 5000} {
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = rng.Uint64()
				if width < 64 {
					keys[i] &= 1<<width - 1
				}
			}
			want := slices.Sorted(slices.Values(keys))
			got := radixSort(slices.Clone(keys), make([]uint64, n), width)
			require.Equal(t, want, got, "width %d, %d keys", width, n)
		}
	}
}
