package hwmodel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWatermarkMatchesNaive holds the Fenwick watermark to a list of every
// write: by(t) is the latest completion among the writes that left in a
// bucket up to t's, or that trim folded into the floor.
func TestWatermarkMatchesNaive(t *testing.T) {
	for _, c := range []struct {
		name   string
		spread uint64 // how far out of time order writes are noted
		trims  bool
	}{{"in-order", 1, false}, {"out-of-order", 5000, false}, {"with-trims", 5000, true}} {
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(len(c.name))*104729 + c.spread
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 2))
			type write struct{ start, done uint64 }
			var w watermark
			w.reset(0)
			var all []write
			var floor uint64 // what a trim forgot, as the naive model keeps it
			trimmedTo := uint64(0)
			now := uint64(0)
			for range 4000 {
				now += rng.Uint64N(40)
				start := now + rng.Uint64N(c.spread)
				if start>>bucketShift < trimmedTo {
					start = trimmedTo << bucketShift
				}
				wr := write{start, start + rng.Uint64N(3000)}
				w.note(wr.start, wr.done)
				all = append(all, wr)
				if c.trims && rng.Uint64N(200) == 0 {
					w.trim(now)
					trimmedTo = w.base
					var kept []write
					for _, x := range all {
						if x.start>>bucketShift < trimmedTo {
							floor = max(floor, x.done)
						} else {
							kept = append(kept, x)
						}
					}
					all = kept
				}
				q := trimmedTo<<bucketShift + rng.Uint64N(now+c.spread+1)
				want := floor
				for _, x := range all {
					if x.start>>bucketShift <= q>>bucketShift {
						want = max(want, x.done)
					}
				}
				require.Equal(t, want, w.by(q), "by(%d) after %d writes", q, len(all))
			}
		})
	}
}
