package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// lineMap hands out one slot per line, keeps a slot's value across later
// slots (the slice may move; the index does not), and forgets every line
// at reset.
func TestLineMap(t *testing.T) {
	m := newLineMap[uint64]()
	require.Equal(t, int32(-1), m.find(7))
	lines := []uint64{7, 1 << 40, 3, 7, 3, 1 << 40}
	for k, line := range lines {
		i, had := m.slot(line)
		require.Equal(t, k >= 3, had, "line %d", line)
		*m.at(i) += line
	}
	for _, line := range []uint64{7, 1 << 40, 3} {
		i := m.find(line)
		require.GreaterOrEqual(t, i, int32(0))
		require.Equal(t, 2*line, *m.at(i), "line %d", line)
	}
	// Many more lines move the slice; the first ones keep their values.
	for line := uint64(100); line < 5000; line++ {
		i, had := m.slot(line)
		require.False(t, had)
		*m.at(i) = line
	}
	require.Equal(t, uint64(14), *m.at(m.find(7)))
	require.Equal(t, uint64(4999), *m.at(m.find(4999)))

	m.reset()
	require.Equal(t, int32(-1), m.find(7))
	i, had := m.slot(7)
	require.False(t, had)
	require.Zero(t, *m.at(i), "a reset slot starts at zero")
}

// A cache whose sets are a power of two indexes them by mask, and any
// other count by remainder: both put a line in the set its number modulo
// the sets names.
func TestCacheSetIndex(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  CacheConfig
	}{
		{"power of two", CacheConfig{SizeBytes: 64 << 10, LineBytes: 128, Assoc: 8}},
		{"three sets", CacheConfig{SizeBytes: 3 * 8 * 128, LineBytes: 128, Assoc: 8}},
		{"one set", CacheConfig{SizeBytes: 8 * 128, LineBytes: 128, Assoc: 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newCache(c.cfg)
			for _, line := range []uint64{0, 1, 5, 63, 64, 1<<40 + 3} {
				require.Equal(t, int(line%uint64(k.sets))*k.assoc, k.set(line), "line %d", line)
				w, _, _, _ := k.insert(line)
				require.Equal(t, w, k.way(line))
				require.Equal(t, k.set(line), w-w%k.assoc)
			}
		})
	}
}
