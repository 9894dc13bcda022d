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
			var occ occupancy
			var nocc naiveOccupancy
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
				dry := fast.endAs(at, n, fast.perByte)
				got := fast.transfer(at, n)
				require.Equal(t, slow.transfer(at, n), got, "transfer %d at %d", i, at)
				require.Equal(t, dry, got, "dry run of transfer %d at %d", i, at)
				w := c.window
				s1, s2 := nocc.firstFree(at, w), occ.firstFree(at, w)
				require.Equal(t, s1, s2, "firstFree %d at %d", i, at)
				// Half the jobs hold a slot for their whole interval (fit),
				// the others from their first free bucket (add alone).
				hold := 1 + rng.Uint64N(300)
				end := func(s uint64) uint64 { return s + hold }
				if i%2 == 0 {
					s1, s2 = nocc.fit(at, w, end), occ.fit(at, w, end)
					require.Equal(t, s1, s2, "fit %d at %d", i, at)
					require.Less(t, nocc.peak(s1, end(s1)), uint32(w), "fit %d at %d finds a full bucket", i, at)
				}
				require.Equal(t, nocc.peak(s1, end(s1)), occ.peak(s2, end(s2)), "peak %d at %d", i, at)
				nocc.add(s1, end(s1))
				occ.add(s2, end(s2))
				now += rng.Uint64N(8)
				if i%997 == 0 && now > c.spread/2 {
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

// naiveOccupancy is the occupancy calendar as a plain count per bucket,
// walked bucket by bucket: the reference the segment tree must match.
type naiveOccupancy struct {
	base uint64
	cnt  []uint32
}

func (o *naiveOccupancy) reset(at uint64) { o.base, o.cnt = at>>occShift, o.cnt[:0] }

func (o *naiveOccupancy) firstFree(t uint64, w int) uint64 {
	k := max(t>>occShift, o.base)
	for k-o.base < uint64(len(o.cnt)) && o.cnt[k-o.base] >= uint32(w) {
		k++
	}
	return max(t, k<<occShift)
}

// fit is the rule walked bucket by bucket: up to fitTries starts, each the
// first free bucket after the last full one the previous start's interval
// met, and then the cycle after the calendar's last full bucket.
func (o *naiveOccupancy) fit(t uint64, w int, end func(uint64) uint64) uint64 {
	s := o.firstFree(t, w)
	for try := 1; ; try++ {
		if o.peak(s, end(s)) < uint32(w) {
			return s
		}
		b := min((end(s)-1)>>occShift, o.base+uint64(len(o.cnt))-1)
		for o.cnt[b-o.base] < uint32(w) {
			b--
		}
		if try == fitTries {
			for k := uint64(len(o.cnt)); k > 0; k-- {
				if o.cnt[k-1] >= uint32(w) {
					return max(s, (o.base+k)<<occShift)
				}
			}
		}
		s = o.firstFree((b+1)<<occShift, w)
	}
}

// peak is the most slots any bucket of the interval holds.
func (o *naiveOccupancy) peak(start, end uint64) uint32 {
	var best uint32
	lo := max(start>>occShift, o.base)
	for k := lo; k <= (max(end, start+1)-1)>>occShift; k++ {
		if k-o.base < uint64(len(o.cnt)) {
			best = max(best, o.cnt[k-o.base])
		}
	}
	return best
}

func (o *naiveOccupancy) add(start, end uint64) {
	lo := max(start>>occShift, o.base)
	hi := (max(end, start+1) - 1) >> occShift
	for k := lo; k <= hi && hi >= lo; k++ {
		for k-o.base >= uint64(len(o.cnt)) {
			o.cnt = append(o.cnt, 0)
		}
		o.cnt[k-o.base]++
	}
}

// trim forgets the buckets before cycle at's: the calendar starts at its
// bucket.
func (o *naiveOccupancy) trim(at uint64) {
	k := at >> occShift
	if k <= o.base || k-o.base < uint64(len(o.cnt))/2 {
		return
	}
	drop := min(k-o.base, uint64(len(o.cnt)))
	o.cnt = append(o.cnt[:0], o.cnt[drop:]...)
	o.base = k
}

// TestTrimFollowsTime: a calendar nothing was booked on since its last
// trim starts again at the next trim's cycle, so a booking far later
// needs only its own span (an idle SM's read calendar grew to millions of
// buckets at paper size when trims could only drop what was booked).
func TestTrimFollowsTime(t *testing.T) {
	const far = 50_000_000
	var o occupancy
	o.reset(0)
	o.add(0, 100)
	o.trim(1000)
	o.trim(far)
	o.add(far, far+100)
	require.LessOrEqual(t, o.n, uint64(1024), "occupancy tree leaves")
	require.Equal(t, uint32(1), o.peak(far, far+100))
	require.Equal(t, uint64((far+99)>>occShift+1)<<occShift, o.firstFree(far, 1), "the next whole bucket after the hold")

	r := newResource(8, 1000) // 8 bytes a cycle
	r.reset(0)
	r.transfer(0, 64)
	r.trim(1000)
	r.trim(far)
	require.Equal(t, uint64(far+8), r.transfer(far, 64))
	require.LessOrEqual(t, len(r.used), 4, "resource buckets")
}
