package hwmodel

import "math"

// fracBits is the fixed-point precision of bandwidth resources: time inside
// a resource is kept in 1/2^fracBits cycles so that a stream of small
// transfers accumulates no rounding error.
const fracBits = 16

// resource is a bandwidth resource (a memory channel, a link direction): a
// transfer occupies it for size/bandwidth cycles, one after the other, and
// it is busy until the end of the last transfer it accepted.
type resource struct {
	perByte uint64 // occupancy per byte, in 1/2^fracBits cycles, rounded up
	busy    uint64 // busy until, in 1/2^fracBits cycles
	bytes   uint64 // bytes moved
}

// newResource returns a resource of gbps GB/s for a core clock of clockMHz.
// Bytes per cycle are gbps*1e3/clockMHz; the per-byte cost is rounded up so
// the model never beats the configured bandwidth.
func newResource(gbps, clockMHz float64) resource {
	cyclesPerByte := clockMHz / (gbps * 1e3)
	return resource{perByte: uint64(math.Ceil(cyclesPerByte * (1 << fracBits)))}
}

// transfer reserves the resource for n bytes starting no earlier than cycle
// at and returns the cycle at which the transfer ends.
func (r *resource) transfer(at, n uint64) uint64 {
	start := max(at<<fracBits, r.busy)
	r.busy = start + n*r.perByte
	r.bytes += n
	return (r.busy + (1<<fracBits - 1)) >> fracBits
}

// servers is a group of k identical servers (window slots, FIFO entries,
// warp schedulers): a job takes the server that frees first.
type servers struct {
	free []uint64 // cycle at which each server frees
}

func newServers(k int) servers { return servers{free: make([]uint64, k)} }

// earliest returns the index of the server that frees first (the lowest
// index among ties) and its free cycle.
func (s *servers) earliest() (int, uint64) {
	best := 0
	for i, f := range s.free {
		if f < s.free[best] {
			best = i
		}
	}
	return best, s.free[best]
}

// maxFree returns the cycle at which every server is free.
func (s *servers) maxFree() uint64 {
	var m uint64
	for _, f := range s.free {
		m = max(m, f)
	}
	return m
}
