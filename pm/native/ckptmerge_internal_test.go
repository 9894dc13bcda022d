package native

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// mergeWrites is mergeLogWrites of writes given as bytes.
func mergeWrites(ws []ckptWrite) []ckptWrite {
	var raw []byte
	lw := make([]logWrite, len(ws))
	for i, w := range ws {
		lw[i] = logWrite{off: w.off, pos: uint64(len(raw)), n: uint64(len(w.data))}
		raw = append(raw, w.data...)
	}
	return mergeLogWrites(raw, lw)
}

// mergeLogWrites leaves what the writes leave in order, in ascending extents
// that neither overlap nor touch, with no byte no write wrote.
func TestMergeWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   []ckptWrite
		want []ckptWrite
	}{
		{"none", nil, []ckptWrite{}},
		{"one", []ckptWrite{{4, []byte("ab")}}, []ckptWrite{{4, []byte("ab")}}},
		{"later wins", []ckptWrite{{4, []byte("abcd")}, {5, []byte("X")}, {4, []byte("Y")}}, []ckptWrite{{4, []byte("YXcd")}}},
		{"touching merge", []ckptWrite{{6, []byte("cd")}, {4, []byte("ab")}}, []ckptWrite{{4, []byte("abcd")}}},
		{"gap stays", []ckptWrite{{8, []byte("cd")}, {4, []byte("ab")}}, []ckptWrite{{4, []byte("ab")}, {8, []byte("cd")}}},
		{"overlap extends", []ckptWrite{{0, []byte("abc")}, {2, []byte("XYZ")}, {1, []byte("Q")}}, []ckptWrite{{0, []byte("aQXYZ")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, mergeWrites(tc.ws))
		})
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for x := range 400 {
		// Offsets from 1<<60 on do not fit the packed sort: its fallback.
		base := uint64(x%2) << 60
		const size = 256
		want, got := make([]byte, size), make([]byte, size)
		wrote, covered := make([]bool, size), make([]bool, size)
		ws := make([]ckptWrite, 1+rng.IntN(20))
		for i := range ws {
			off := rng.IntN(size - 1)
			d := make([]byte, 1+rng.IntN(min(16, size-off)))
			for j := range d {
				d[j] = byte(1 + rng.IntN(255))
				wrote[off+j] = true
			}
			copy(want[off:], d)
			ws[i] = ckptWrite{base + uint64(off), d}
		}
		ext := mergeWrites(ws)
		for i := range ext {
			ext[i].off -= base
		}
		for i, e := range ext {
			if i > 0 {
				require.Greater(t, e.off, ext[i-1].off+uint64(len(ext[i-1].data)), "extents apart")
			}
			copy(got[e.off:], e.data)
			for j := range e.data {
				covered[int(e.off)+j] = true
			}
		}
		require.Equal(t, want, got)
		require.Equal(t, wrote, covered)
	}
}
