package hwmodel

import "math"

// fracBits is the fixed-point precision of bandwidth resources: time inside
// a resource is kept in 1/2^fracBits cycles so that a stream of small
// transfers accumulates no rounding error.
const fracBits = 16

// bucketShift sets the granularity of a resource's calendar: 2^bucketShift
// cycles per bucket.
const bucketShift = 5

// resource is a bandwidth resource (a memory channel, a link direction): a
// transfer occupies it for size/bandwidth cycles. Requests do not arrive in
// time order (warps run ahead of each other), so the resource keeps a
// calendar: for each bucket of 2^bucketShift cycles, how much of it is
// taken. A transfer fills the free capacity of the buckets from its start
// cycle on (in its first bucket, only the part after its start), so no
// stream of transfers ever beats the bandwidth, and an early request is not
// queued behind a later one.
type resource struct {
	perByte uint64   // occupancy per byte, in 1/2^fracBits cycles, rounded up
	base    uint64   // bucket index of used[0]
	used    []uint32 // occupancy of each bucket, in 1/2^fracBits cycles
	bytes   uint64   // bytes moved
}

// newResource returns a resource of gbps GB/s for a core clock of clockMHz.
// Bytes per cycle are gbps*1e3/clockMHz; the per-byte cost is rounded up so
// the model never beats the configured bandwidth.
func newResource(gbps, clockMHz float64) resource {
	cyclesPerByte := clockMHz / (gbps * 1e3)
	return resource{perByte: uint64(math.Ceil(cyclesPerByte * (1 << fracBits)))}
}

// reset forgets every reservation before cycle at.
func (r *resource) reset(at uint64) {
	r.base = at >> bucketShift
	r.used = r.used[:0]
}

// transfer reserves the resource for n bytes starting no earlier than cycle
// at and returns the cycle at which the transfer ends.
func (r *resource) transfer(at, n uint64) uint64 {
	const capacity = 1 << (bucketShift + fracBits)
	r.bytes += n
	cost := n * r.perByte
	if at>>bucketShift < r.base {
		at = r.base << bucketShift
	}
	k := at>>bucketShift - r.base
	// In the first bucket only the time after at is available.
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

// trim forgets the calendar before cycle at, once that is at least half of
// it, so a long launch does not keep its whole history. Requests before at
// are then treated as arriving at at.
func (r *resource) trim(at uint64) {
	k := at >> bucketShift
	if k <= r.base || k-r.base < uint64(len(r.used))/2 {
		return
	}
	drop := min(k-r.base, uint64(len(r.used)))
	r.used = append(r.used[:0], r.used[drop:]...)
	r.base += drop
}

// occShift sets the granularity of an occupancy calendar: 2^occShift cycles
// per bucket.
const occShift = 3

// occupancy counts, per bucket of cycles, the jobs (outstanding flushes)
// that hold one of a limited number of slots (a flush window, an NVW-FIFO).
// A job holds a slot in every bucket its interval touches, so a bound on
// slots per bucket bounds the jobs outstanding at any cycle. Like resource,
// it accepts requests out of time order.
type occupancy struct {
	base uint64
	cnt  []uint32
}

func (o *occupancy) reset(at uint64) {
	o.base = at >> occShift
	o.cnt = o.cnt[:0]
}

// firstFree returns the first cycle from t in whose bucket fewer than w
// slots are held.
func (o *occupancy) firstFree(t uint64, w int) uint64 {
	k := max(t>>occShift, o.base)
	for k-o.base < uint64(len(o.cnt)) && o.cnt[k-o.base] >= uint32(w) {
		k++
	}
	return max(t, k<<occShift)
}

// add holds a slot from cycle start until cycle end.
func (o *occupancy) add(start, end uint64) {
	lo := max(start>>occShift, o.base)
	hi := (max(end, start+1) - 1) >> occShift
	for k := lo; k <= hi; k++ {
		for k-o.base >= uint64(len(o.cnt)) {
			o.cnt = append(o.cnt, 0)
		}
		o.cnt[k-o.base]++
	}
}

func (o *occupancy) trim(at uint64) {
	k := at >> occShift
	if k <= o.base || k-o.base < uint64(len(o.cnt))/2 {
		return
	}
	drop := min(k-o.base, uint64(len(o.cnt)))
	o.cnt = append(o.cnt[:0], o.cnt[drop:]...)
	o.base += drop
}
