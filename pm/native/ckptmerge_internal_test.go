//go:build unix

package native

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

// ckptWrite is bytes at an offset of a region.
type ckptWrite struct {
	off  uint64
	data []byte
}

// mergeWrites is writeMerged of writes given as bytes (a log of their
// bytes, read piece bytes at a time), in parts of at most batch bytes,
// with hole 0: no byte that no write wrote is read or written.
func mergeWrites(t *testing.T, ws []ckptWrite, batch, piece int) []ckptWrite {
	return mergeWritesOver(t, ws, batch, piece, 0, 0, nil)
}

// mergeWritesOver is mergeWrites merging across holes of up to hole bytes,
// filled from target (the bytes at offsets from base on).
func mergeWritesOver(t *testing.T, ws []ckptWrite, batch, piece int, hole, base uint64, target []byte) []ckptWrite {
	var raw []byte
	lw := make([]logWrite, len(ws))
	for i, w := range ws {
		lw[i] = newLogWrite(w.off, uint64(len(raw)), uint64(len(w.data)))
		raw = append(raw, w.data...)
	}
	out := []ckptWrite{}
	rw := mergeIO{
		fill: func(off uint64, b []byte) error {
			require.NotZero(t, hole, "a fill with hole 0")
			copy(b, target[off-base:])
			return nil
		},
		write: func(off uint64, data []byte) error {
			require.LessOrEqual(t, len(data), batch)
			out = append(out, ckptWrite{off, slices.Clone(data)})
			return nil
		},
	}
	require.NoError(t, writeMerged(bytes.NewReader(raw), int64(len(raw)), lw, batch, piece, hole, rw))
	return out
}

// writeMerged leaves what the writes leave in order, in ascending extents
// that neither overlap nor touch (but where a batch cuts one), with no
// byte no write wrote, whatever its batch and piece sizes.
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
			require.Equal(t, tc.want, mergeWrites(t, tc.ws, 1<<20, 1<<20))
			require.Equal(t, tc.want, mergeWrites(t, tc.ws, 1<<20, 1), "piece of 1 byte")
		})
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for x := range 1200 {
		batch := []int{1 << 20, 1, 7, 64}[x%4]
		piece := []int{1 << 20, 1, 5, 100}[x/4%4]
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
		ext := mergeWrites(t, ws, batch, piece)
		for i := range ext {
			ext[i].off -= base
		}
		for i, e := range ext {
			if i > 0 {
				prevEnd := ext[i-1].off + uint64(len(ext[i-1].data))
				if batch < size {
					require.GreaterOrEqual(t, e.off, prevEnd, "extents in order (a batch may cut one)")
				} else {
					require.Greater(t, e.off, prevEnd, "extents apart")
				}
			}
			copy(got[e.off:], e.data)
			for j := range e.data {
				covered[int(e.off)+j] = true
			}
		}
		require.Equal(t, want, got)
		require.Equal(t, wrote, covered)

		// Across holes: the holes keep the target's bytes, extents lie
		// more than hole bytes apart, and no more writes do it (unless
		// batches cut the longer extents).
		hole := uint64(1 + x%9)
		target := make([]byte, size)
		for j := range target {
			target[j] = byte(rng.IntN(256))
		}
		want, got = slices.Clone(target), slices.Clone(target)
		for _, w := range ws {
			copy(want[w.off-base:], w.data)
		}
		hext := mergeWritesOver(t, ws, batch, piece, hole, base, target)
		if batch >= size {
			require.LessOrEqual(t, len(hext), len(ext), "no more writes across holes")
		}
		for i := range hext {
			hext[i].off -= base
			e := hext[i]
			if i > 0 && batch >= size {
				require.Greater(t, e.off, hext[i-1].off+uint64(len(hext[i-1].data))+hole, "extents more than a hole apart")
			}
			copy(got[e.off:], e.data)
		}
		require.Equal(t, want, got, "hole %d", hole)
	}
}

// A checkpoint read in pieces of any size, indexing passes of any number
// of entries, leaves the region file what the log's writes, applied in
// order, leave: writes of one place in different pieces and passes,
// records larger than a piece and pieces smaller than a header included;
// for writes anywhere, and for writes that rewrite a few places again and
// again (which a full pass drops rather than writes).
func TestWriteFromLogPieces(t *testing.T) {
	for _, tc := range []struct {
		rewrites bool
		spacing  int // of the rewritten places
	}{{false, 0}, {true, 600}, {true, ckptHole + 905}} {
		t.Run(fmt.Sprintf("rewrites=%v/spacing=%d", tc.rewrites, tc.spacing), func(t *testing.T) { testWriteFromLogPieces(t, tc.rewrites, tc.spacing) })
	}
}

// testWriteFromLogPieces checkpoints random writes, or, with rewrites,
// writes to six places each rewritten again and again, spacing bytes
// apart (ckptHole apart or more: extents of their own).
func testWriteFromLogPieces(t *testing.T, rewrites bool, spacing int) {
	const seed = 7
	size := max(4096, 6*spacing+8) // the region file
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	base := pm.Addr(1 << pm.OffsetBits)
	// The region file holds bytes of its own: a checkpoint's merged
	// writes span the runs between the log's writes and must keep them.
	start := make([]byte, size)
	for j := range start {
		start[j] = byte(rng.IntN(256))
	}
	want := slices.Clone(start)
	log := encodeLogHeader(1)
	for seq := uint64(1); seq <= 60; seq++ {
		var p []byte
		last := -1
		for range 1 + rng.IntN(8) {
			off, n := rng.IntN(size-100), 1+rng.IntN(100)
			if rewrites {
				slot := rng.IntN(6) // six places, each always the same length
				off, n = spacing*slot+8, 4+4*slot
			}
			d := make([]byte, n)
			for j := range d {
				d[j] = byte(1 + rng.IntN(255))
			}
			copy(want[off:], d)
			p, last = appendEntry(p, last, base.Add(uint64(off)), d)
		}
		log = encodeRecord(log, 1, seq, p)
	}
	log = append(log, make([]byte, 100)...) // the zeroed end of a chunk
	for _, tc := range []struct{ piece, pass int }{{1, 1 << 20}, {64, 1 << 20}, {1000, 1 << 20}, {1 << 20, 1 << 20}, {1000, 1}, {64, 7}, {1 << 20, 50}} {
		piece, pass := tc.piece, tc.pass
		dir := t.TempDir()
		path := filepath.Join(dir, oldLogName)
		require.NoError(t, os.WriteFile(path, log, 0o644))
		f, err := OSFS().OpenFile(filepath.Join(dir, "r"), os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(int64(HeaderSize+size)))
		_, err = f.WriteAt(start, HeaderSize)
		require.NoError(t, err)
		regs := map[uint64]ckptRegion{1: {name: "r", base: base, size: uint64(size), f: f}}
		require.NoError(t, writeFromLog(OSFS(), dir, path, "", regs, piece, pass), "piece %d, pass %d", piece, pass)
		got := make([]byte, size)
		_, err = f.ReadAt(got, HeaderSize)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.Equal(t, want, got, "piece %d, pass %d", piece, pass)
		require.NoFileExists(t, path, "the log is removed")
	}
}

// sortByOffset orders writes as a stable sort by offset does, for offsets
// that pack beside their index (the radix path) and for ones too large to
// (the comparison path).
func TestSortByOffset(t *testing.T) {
	const seed = 3
	t.Logf("seed = %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, tc := range []struct {
		name string
		n    int
		max  uint64
	}{
		{"one", 1, 100}, {"small", 500, 1 << 12}, {"region", 20000, 1 << 30}, {"too large to pack", 3000, 1 << 62},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := make([]logWrite, tc.n)
			for i := range ws {
				off := rng.Uint64N(tc.max)
				if i%5 == 4 {
					off = ws[rng.IntN(i)].off // repeated offsets keep log order
				}
				ws[i] = newLogWrite(off, uint64(i), 8)
			}
			want := make([]uint32, tc.n)
			for i := range want {
				want[i] = uint32(i)
			}
			slices.SortStableFunc(want, func(a, b uint32) int { return cmp.Compare(ws[a].off, ws[b].off) })
			got, release, err := sortByOffset(ws)
			require.NoError(t, err)
			require.Equal(t, want, slices.Clone(got))
			require.NoError(t, release())
		})
	}
}

// dropRewritten keeps, in log order, the entries no later entry of the
// same offset and length rewrites.
func TestDropRewritten(t *testing.T) {
	w := func(off, pos, n uint64) logWrite { return newLogWrite(off, pos, n) }
	ws := []logWrite{w(8, 0, 4), w(0, 1, 8), w(8, 2, 4), w(8, 3, 8), w(0, 4, 8), w(16, 5, 4), w(8, 6, 4)}
	got, err := dropRewritten(slices.Clone(ws))
	require.NoError(t, err)
	require.Equal(t, []logWrite{w(8, 3, 8), w(0, 4, 8), w(16, 5, 4), w(8, 6, 4)}, got)
}
