package radix

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Sort agrees with slices.Sort on keys of every width up to 64 bits, with
// few and many keys, repeated values and shared bytes.
func TestSort(t *testing.T) {
	const seed = 7
	t.Logf("seed = %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, width := range []uint{0, 1, 7, 8, 9, 16, 29, 40, 63, 64} {
		for _, n := range []int{0, 1, 2, 3, 100, 5000} {
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = rng.Uint64()
				if width < 64 {
					keys[i] &= 1<<width - 1
				}
				if i%3 == 0 && i > 0 {
					keys[i] = keys[i-1] // repeats
				}
			}
			want := slices.Sorted(slices.Values(keys))
			got := Sort(slices.Clone(keys), make([]uint64, n), width)
			require.Equal(t, len(want), len(got), "width %d, %d keys", width, n)
			if n > 0 {
				require.Equal(t, want, got, "width %d, %d keys", width, n)
			}
		}
	}
}

// SortFrom with an index packed below the offsets sorts the packed keys
// as Sort does, for offsets with repeats and every index width, and
// leaves keys that agree above from in their order.
func TestSortFrom(t *testing.T) {
	const seed = 11
	t.Logf("seed = %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, n := range []int{0, 1, 2, 255, 256, 257, 3000} {
		for _, offBits := range []uint{0, 5, 20, 40} {
			ib := uint(bits.Len(uint(n)))
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = rng.Uint64()&(1<<offBits-1)<<ib | uint64(i)
			}
			want := slices.Sorted(slices.Values(keys))
			got := SortFrom(slices.Clone(keys), make([]uint64, n), ib, offBits+ib)
			require.Equal(t, len(want), len(got))
			if n > 0 {
				require.Equal(t, want, got, "%d keys, %d offset bits", n, offBits)
			}
		}
	}
	// Keys equal above from keep their order, whatever their low bits.
	keys := []uint64{0x13, 0x21, 0x12, 0x20, 0x11}
	require.Equal(t, []uint64{0x13, 0x12, 0x11, 0x21, 0x20}, SortFrom(keys, make([]uint64, 5), 4, 8))
}

// BenchmarkSort sorts 16,384 keys of 40 bits: radix against slices.Sort.
func BenchmarkSort(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	keys := make([]uint64, 1<<14)
	for i := range keys {
		keys[i] = rng.Uint64() & (1<<40 - 1)
	}
	work, scratch := make([]uint64, len(keys)), make([]uint64, len(keys))
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(work, keys)
			Sort(work, scratch, 40)
		}
	})
	b.Run("slices", func(b *testing.B) {
		for b.Loop() {
			copy(work, keys)
			slices.Sort(work)
		}
	})
}
