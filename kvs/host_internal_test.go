package kvs

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

// A shadow's runs are the maximal runs of words written, in address
// order, with the bytes last written to them: checked against a word-by-
// word scan for random writes of one and two words (runs across bitmap
// words and at the window's ends included).
func TestShadowRuns(t *testing.T) {
	const seed = 5
	t.Logf("seed = %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	base := pm.Addr(1 << 20)
	for round := range 200 {
		size := uint64(4 * (1 + rng.IntN(700)))
		hb := &hostBatch{}
		hb.reset(nil, pm.Range{Base: base, Size: size})
		want := make([]byte, size)
		written := make([]bool, size/4)
		for range rng.IntN(3) { // a batch reuses the shadows
			hb.reset(nil, pm.Range{Base: base, Size: size})
			clear(written)
			for range rng.IntN(int(size / 4)) {
				n := 4 * (1 + rng.IntN(2))
				off := uint64(4 * rng.IntN(int(size/4)))
				if off+uint64(n) > size {
					continue
				}
				v := rng.Uint64()
				hb.putWord(1, base.Add(off), n, v)
				pm.PutLE(want[off:off+uint64(n)], v)
				for w := off / 4; w < (off+uint64(n))/4; w++ {
					written[w] = true
				}
			}
		}
		var wantRuns []pm.Write
		for w := 0; w < len(written); {
			if !written[w] {
				w++
				continue
			}
			e := w
			for e < len(written) && written[e] {
				e++
			}
			wantRuns = append(wantRuns, pm.Write{Addr: base.Add(uint64(4 * w)), Data: want[4*w : 4*e]})
			w = e
		}
		got := hb.plan()
		require.Len(t, got, len(wantRuns), "round %d", round)
		for i := range got {
			require.Equal(t, wantRuns[i], got[i], "round %d run %d", round, i)
		}
	}
}
