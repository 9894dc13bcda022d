package hwmodel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveResource and naiveOccupancy are the calendars without the skip
// lists: every search walks the buckets one by one. The calendars must give
// exactly their answers.
type naiveResource struct{ resource }

func (r *naiveResource) transfer(at, n uint64) uint64 {
	const capacity = 1 << (bucketShift + fracBits)
	r.bytes += n
	cost := n * r.perByte
	if at>>bucketShift < r.base {
		at = r.base << bucketShift
	}
	k := at>>bucketShift - r.base
	avail0 := ((at>>bucketShift+1)<<bucketShift - at) << fracBits
	left := cost
	var end uint64
	for first := true; ; first = false {
		for uint64(len(r.used)) <= k {
			r.used = append(r.used, 0)
		}
		free := capacity - uint64(r.used[k])
		if first {
			free = min(free, avail0)
		}
		take := min(free, left)
		r.used[k] += uint32(take)
		left -= take
		if left == 0 {
			end = (r.base+k)<<(bucketShift+fracBits) + uint64(r.used[k])
			break
		}
		k++
	}
	end = max(end, at<<fracBits+cost)
	return (end + (1<<fracBits - 1)) >> fracBits
}

func (r *naiveResource) trim(at uint64) {
	k := at >> bucketShift
	if k <= r.base || k-r.base < uint64(len(r.used))/2 {
		return
	}
	drop := min(k-r.base, uint64(len(r.used)))
	r.used = append(r.used[:0], r.used[drop:]...)
	r.base += drop
}

type naiveOccupancy struct {
	base uint64
	cnt  []uint32
}

func (o *naiveOccupancy) firstFree(t uint64, w int) uint64 {
	k := max(t>>occShift, o.base)
	for k-o.base < uint64(len(o.cnt)) && o.cnt[k-o.base] >= uint32(w) {
		k++
	}
	return max(t, k<<occShift)
}

func (o *naiveOccupancy) add(start, end uint64) {
	lo := max(start>>occShift, o.base)
	hi := (max(end, start+1) - 1) >> occShift
	for k := lo; k <= hi; k++ {
		for k-o.base >= uint64(len(o.cnt)) {
			o.cnt = append(o.cnt, 0)
		}
		o.cnt[k-o.base]++
	}
}

func (o *naiveOccupancy) trim(at uint64) {
	k := at >> occShift
	if k <= o.base || k-o.base < uint64(len(o.cnt))/2 {
		return
	}
	drop := min(k-o.base, uint64(len(o.cnt)))
	o.cnt = append(o.cnt[:0], o.cnt[drop:]...)
	o.base += drop
}

// TestCalendarsMatchNaiveWalk drives the resource and occupancy calendars
// and their bucket-by-bucket references with the same random streams of
// out-of-order requests, trims and resets, and requires the same answers.
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
			fast, slow := newResource(c.gbps, 1000), naiveResource{newResource(c.gbps, 1000)}
			var occ occupancy
			var nocc naiveOccupancy
			now := uint64(1000)
			fast.reset(now)
			slow.reset(now)
			occ.reset(now)
			nocc.base = now >> occShift
			for i := range 12000 {
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
				if i == 9000 {
					fast.reset(now)
					slow.reset(now)
					occ.reset(now)
					nocc.base, nocc.cnt = now>>occShift, nocc.cnt[:0]
				}
			}
			require.Equal(t, slow.bytes, fast.bytes)
		})
	}
}
