package hwmodel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCalendarsMatchNaiveWalk drives the resource and occupancy calendars
// and copies that walk bucket by bucket instead of skipping full buckets
// (skipList.walk) with the same random streams of out-of-order requests,
// trims and resets, and requires the same answers.
func TestCalendarsMatchNaiveWalk(t *testing.T) {
	for _, c := range []struct {
		name   string
		gbps   float64
		spread uint64 // how far requests scatter around the current time
		window int
	}{
		{"saturated", 8, 64, 4},
		{"light", 400, 4096, 32},
		{"backlog", 2, 16, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(len(c.name))*7919 + c.spread
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			fast, slow := newResource(c.gbps, 1000), newResource(c.gbps, 1000)
			slow.skip.walk = true
			var occ, nocc occupancy
			nocc.skip.walk = true
			now := uint64(1000)
			fast.reset(now)
			slow.reset(now)
			occ.reset(now)
			nocc.reset(now)
			for i := range 6000 {
				at := now + rng.Uint64N(c.spread)
				if rng.IntN(4) == 0 && at > c.spread {
					at -= rng.Uint64N(c.spread) // out of time order
				}
				n := uint64(32 << rng.IntN(3))
				require.Equal(t, slow.transfer(at, n), fast.transfer(at, n), "transfer %d at %d", i, at)
				w := c.window
				s1, s2 := nocc.firstFree(at, w), occ.firstFree(at, w)
				require.Equal(t, s1, s2, "firstFree %d at %d", i, at)
				end := s1 + 1 + rng.Uint64N(300)
				nocc.add(s1, end)
				occ.add(s2, end)
				now += rng.Uint64N(8)
				if i%997 == 0 {
					fast.trim(now - c.spread/2)
					slow.trim(now - c.spread/2)
					occ.trim(now - c.spread/2)
					nocc.trim(now - c.spread/2)
				}
				if i == 4500 {
					fast.reset(now)
					slow.reset(now)
					occ.reset(now)
					nocc.reset(now)
				}
			}
			require.Equal(t, slow.bytes, fast.bytes)
		})
	}
}
