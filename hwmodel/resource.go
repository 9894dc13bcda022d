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
//
// Buckets only fill up (until trim forgets them), so the full ones are
// skipped with a union-find over bucket indices (skip): a transfer behind a
// long backlog finds the first bucket with room in near-constant time
// instead of walking the backlog bucket by bucket.
type resource struct {
	perByte uint64   // occupancy per byte, in 1/2^fracBits cycles, rounded up
	base    uint64   // bucket index of used[0]
	used    []uint32 // occupancy of each bucket, in 1/2^fracBits cycles
	skip    skipList // the full buckets of used
	bytes   uint64   // bytes moved
}

// newResource returns a resource of gbps GB/s for a core clock of clockMHz.
// Bytes per cycle are gbps*1e3/clockMHz; the per-byte cost is rounded up so
// the model never beats the configured bandwidth.
func newResource(gbps, clockMHz float64) resource {
	cyclesPerByte := clockMHz / (gbps * 1e3)
	return resource{perByte: uint64(math.Ceil(cyclesPerByte * (1 << fracBits)))}
}

// perCycle returns a resource that serves n units per cycle (an SM's
// schedulers, its execution units, its shared memory).
func perCycle(n int) resource {
	return resource{perByte: (1<<fracBits + uint64(n) - 1) / uint64(n)}
}

// perCycles returns a resource that serves one unit every c cycles (a
// load/store path's lines).
func perCycles(c float64) resource {
	return resource{perByte: uint64(math.Ceil(c * (1 << fracBits)))}
}

// reset forgets every reservation before cycle at.
func (r *resource) reset(at uint64) {
	r.base = at >> bucketShift
	r.used = r.used[:0]
	r.skip.reset()
}

// transfer reserves the resource for n bytes starting no earlier than cycle
// at and returns the cycle at which the transfer ends.
func (r *resource) transfer(at, n uint64) uint64 { return r.transferAs(at, n, r.perByte) }

// transferAs is transfer at perByte (in 1/2^fracBits cycles) instead of the
// resource's own rate: a bus both directions share, each at its own rate.
func (r *resource) transferAs(at, n, perByte uint64) uint64 {
	r.bytes += n
	return r.fill(at, n*perByte, true)
}

// take is transfer when book, and otherwise a dry run of it (endAs).
func (r *resource) take(at, n uint64, book bool) uint64 {
	if book {
		return r.transfer(at, n)
	}
	return r.endAs(at, n, r.perByte)
}

// endAs returns the cycle at which transferAs(at, n, perByte) would end,
// reserving nothing: a dry run for a request that must know when it would
// leave before it takes a slot in front of the resource.
func (r *resource) endAs(at, n, perByte uint64) uint64 { return r.fill(at, n*perByte, false) }

// fill takes cost (in 1/2^fracBits cycles) of the resource's free time from
// cycle at on and returns the cycle at which it ends; with book false it
// only computes that end.
func (r *resource) fill(at, cost uint64, book bool) uint64 {
	const capacity = 1 << (bucketShift + fracBits)
	if at>>bucketShift < r.base {
		at = r.base << bucketShift
	}
	k := at>>bucketShift - r.base
	// In the first bucket only the time after at is available.
	avail0 := ((at>>bucketShift+1)<<bucketShift - at) << fracBits
	left := cost
	var end uint64
	for first := true; ; first = false {
		if !first {
			k = r.skip.next(k) // a full bucket has nothing to give
		}
		var used uint64
		if k < uint64(len(r.used)) {
			used = uint64(r.used[k])
		} else if book {
			for uint64(len(r.used)) <= k {
				r.used = append(r.used, 0)
			}
		}
		free := capacity - used
		if first {
			free = min(free, avail0)
		}
		take := min(free, left)
		left -= take
		if book {
			r.used[k] += uint32(take)
			if r.used[k] == capacity {
				r.skip.full(k)
			}
		}
		if left == 0 {
			end = (r.base+k)<<(bucketShift+fracBits) + used + take
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
	r.skip.drop(drop)
	// The calendar starts at k even where nothing was booked up to it, so
	// that a transfer far later does not fill in the idle buckets between.
	r.base = k
}

// skipList marks full buckets of a calendar so that a search for the first
// bucket with room skips them: a union-find whose set of bucket k is
// represented by the first bucket at or after k not marked full. Buckets
// are indices relative to the calendar's base.
type skipList struct {
	up   []uint32 // up[k] == k: bucket k is not marked full (or is a root)
	walk bool     // tests: skip nothing, so the search walks bucket by bucket
}

func (s *skipList) reset() { s.up = s.up[:0] }

// next returns the first bucket at or after k that is not marked full.
func (s *skipList) next(k uint64) uint64 {
	if s.walk {
		return k
	}
	root := k
	for root < uint64(len(s.up)) && uint64(s.up[root]) != root {
		root = uint64(s.up[root])
	}
	for k < uint64(len(s.up)) && uint64(s.up[k]) != k {
		k, s.up[k] = uint64(s.up[k]), uint32(root)
	}
	return root
}

// full marks bucket k full.
func (s *skipList) full(k uint64) {
	for uint64(len(s.up)) <= k+1 {
		s.up = append(s.up, uint32(len(s.up)))
	}
	s.up[k] = uint32(k + 1)
}

// drop forgets the first n buckets (the calendar's trim): the others move
// down by n. Links only point forward, so the kept ones stay inside.
func (s *skipList) drop(n uint64) {
	if n >= uint64(len(s.up)) {
		s.up = s.up[:0]
		return
	}
	s.up = append(s.up[:0], s.up[n:]...)
	for k := range s.up {
		s.up[k] -= uint32(n)
	}
}

// occShift sets the granularity of an occupancy calendar: 2^occShift cycles
// per bucket.
const occShift = 3

// occupancy counts, per bucket of cycles, the jobs (outstanding flushes,
// queue entries) that hold one of a limited number of slots (a flush
// window, an NVW-FIFO, a memory queue). A job holds a slot in every bucket
// its interval touches, so a bound on slots per bucket bounds the jobs
// outstanding at any cycle. Like resource, it accepts requests out of time
// order.
//
// The counts live in a segment tree over the buckets from base (each node
// keeps the adds that cover its whole range and the least count below it),
// so holding a slot over a long interval and finding the first bucket with
// room both take O(log n) whatever the interval's length.
//
// Counts are 16-bit: a count is at most its queue's limit (fit never
// overfills a queue; the limits are at most maxQueueEntries), and the
// calendars of a paper-size run hold tens of megabytes of them.
type occupancy struct {
	base   uint64    // bucket index of leaf 0
	used   uint64    // buckets from base that a job has touched
	n      uint64    // leaves (a power of two, or 0)
	nodes  []occNode // the tree's inner nodes, root at 1 (node n+i is leaf i)
	leaves []uint16  // each leaf's count: least, greatest and adds at once
	keep   []uint16  // rebuild's scratch: the counts it keeps
}

// occNode is a node of an occupancy tree. Its three counts sit together,
// so a step down or up the tree touches one cache line, not three.
type occNode struct {
	cov uint16 // jobs covering the node's whole range
	mn  uint16 // least count in its range (its add included)
	mx  uint16 // greatest count in its range (its add included)
}

// occKeepLeaves is the capacity (leaves, 8 bytes each with their inner
// node) up to which an occupancy tree keeps its arrays when it shrinks:
// 256 KiB.
const occKeepLeaves = 256 << 10 / 8

// maxQueueEntries bounds the limits of the queues occupancy calendars
// count (Config.Validate refuses more): the most a 16-bit count holds.
const maxQueueEntries = math.MaxUint16

func (o *occupancy) reset(at uint64) {
	o.base = at >> occShift
	o.used = 0
	clear(o.nodes)
	clear(o.leaves)
}

// node returns node i's counts; a leaf's one count is all three. Leaves
// keep a bare count: a third less memory than a node each (the calendars
// of a paper-size run hold tens of megabytes of leaves).
func (o *occupancy) node(i uint64) occNode {
	if i >= o.n {
		c := o.leaves[i-o.n]
		return occNode{cov: c, mn: c, mx: c}
	}
	return o.nodes[i]
}

// push moves inner node i's adds down to its two children.
func (o *occupancy) push(i uint64) {
	a := o.nodes[i].cov
	if a == 0 {
		return
	}
	o.nodes[i].cov = 0
	for c := 2 * i; c <= 2*i+1; c++ {
		if c >= o.n {
			o.leaves[c-o.n] += a
		} else {
			o.nodes[c].cov += a
		}
	}
}

// firstFree returns the first cycle from t in whose bucket fewer than w
// slots are held.
func (o *occupancy) firstFree(t uint64, w int) uint64 {
	k := max(t>>occShift, o.base)
	if rel := k - o.base; rel < o.used {
		if f, ok := o.find(1, 0, o.n-1, rel, uint32(w), 0); ok {
			k = o.base + f
		} else {
			k = o.base + max(rel, o.used)
		}
	}
	return max(t, k<<occShift)
}

// find returns the first leaf at or after k under node (covering lo..hi)
// whose count, with acc from the node's ancestors, is below w.
func (o *occupancy) find(node, lo, hi, k uint64, w, acc uint32) (uint64, bool) {
	nd := o.node(node)
	if hi < k || uint32(nd.mn)+acc >= w {
		return 0, false
	}
	if lo == hi {
		return lo, true
	}
	mid := (lo + hi) / 2
	acc += uint32(nd.cov)
	if f, ok := o.find(2*node, lo, mid, k, w, acc); ok {
		return f, true
	}
	return o.find(2*node+1, mid+1, hi, k, w, acc)
}

// fitTries is how many starts fit tries, each after the last full bucket
// the previous one's hold met, before it waits until after the calendar's
// last full bucket.
const fitTries = 4

// fit returns a cycle s from t at which a job can hold a slot for its
// whole interval [s, end(s)), so that no bucket ever holds more than w
// jobs; end must not decrease as s grows. Jobs are booked out of time order
// (warps the engine ran ahead book first), so a job can find a slot free in
// its first bucket and the queue full later in its interval. Such a job
// tries the first free bucket after the last full one its interval met, up
// to fitTries starts, and then waits until after the calendar's last full
// bucket, where its whole interval has room. The cap bounds the cost: a
// saturated queue can have dozens of full stretches ahead (volta's PM
// queues under a stream: 24-31 per write, up to 8x the CPU time of four
// tries), and searching them all changes the streaming kernels by under
// 1%; waiting after the last full bucket at the first miss instead made
// ScopedBarrier's micro-persist stream 8.5% slower than Epoch's on pm-near. end is called
// only when a bucket at or after the start is full.
func (o *occupancy) fit(t uint64, w int, end func(s uint64) uint64) uint64 {
	s := o.firstFree(t, w)
	for try := 1; ; try++ {
		lo := max(s>>occShift, o.base) - o.base
		if lo >= o.used {
			return s
		}
		last, full := o.lastFull(1, 0, o.n-1, lo, o.used-1, uint32(w), 0)
		if !full {
			return s // nothing full from s on
		}
		hi := (max(end(s), s+1) - 1) >> occShift
		if hi < o.base {
			return s
		}
		b, full := o.lastFull(1, 0, o.n-1, lo, min(hi-o.base, o.used-1), uint32(w), 0)
		if !full {
			return s
		}
		if try == fitTries {
			return max(s, (o.base+last+1)<<occShift) // after every full bucket
		}
		s = o.firstFree((o.base+b+1)<<occShift, w)
	}
}

// peak returns the most slots held in any bucket from cycle start until
// cycle end.
func (o *occupancy) peak(start, end uint64) uint32 {
	lo := max(start>>occShift, o.base)
	hi := (max(end, start+1) - 1) >> occShift
	if hi < lo || lo-o.base >= o.used {
		return 0
	}
	return o.rangeMax(1, 0, o.n-1, lo-o.base, min(hi-o.base, o.used-1), 0)
}

// rangeMax returns the greatest count over leaves l..r under node
// (covering lo..hi), with acc from the node's ancestors.
func (o *occupancy) rangeMax(node, lo, hi, l, r uint64, acc uint32) uint32 {
	if r < lo || hi < l {
		return 0
	}
	nd := o.node(node)
	if l <= lo && hi <= r {
		return uint32(nd.mx) + acc
	}
	mid := (lo + hi) / 2
	acc += uint32(nd.cov)
	return max(o.rangeMax(2*node, lo, mid, l, r, acc), o.rangeMax(2*node+1, mid+1, hi, l, r, acc))
}

// lastFull returns the last leaf in l..r under node (covering lo..hi)
// whose count, with acc from the node's ancestors, is at least w.
func (o *occupancy) lastFull(node, lo, hi, l, r uint64, w, acc uint32) (uint64, bool) {
	nd := o.node(node)
	if r < lo || hi < l || uint32(nd.mx)+acc < w {
		return 0, false
	}
	if lo == hi {
		return lo, true
	}
	mid := (lo + hi) / 2
	acc += uint32(nd.cov)
	if f, ok := o.lastFull(2*node+1, mid+1, hi, l, r, w, acc); ok {
		return f, true
	}
	return o.lastFull(2*node, lo, mid, l, r, w, acc)
}

// add holds a slot from cycle start until cycle end.
func (o *occupancy) add(start, end uint64) { o.addN(start, end, 1) }

// addN holds k slots from cycle start until cycle end (a job that takes
// several units of its queue: the words of a read's data).
func (o *occupancy) addN(start, end uint64, k uint16) {
	lo := max(start>>occShift, o.base)
	hi := (max(end, start+1) - 1) >> occShift
	if hi < lo {
		return
	}
	l, r := lo-o.base, hi-o.base
	if r >= o.n {
		o.rebuild(0, r+1)
	}
	o.used = max(o.used, r+1)
	o.rangeAdd(l, r, k)
}

// rangeAdd adds k slots to leaves l..r: to the nodes that cover the range
// (the leaves' canonical cover, found bottom-up, as a recursive descent
// from the root would find them), then recomputes the least and greatest
// counts of the nodes above the range's two ends.
func (o *occupancy) rangeAdd(l, r uint64, k uint16) {
	lo, hi := l+o.n, r+o.n
	for lo <= hi {
		if lo&1 == 1 {
			o.cover(lo, k)
			lo++
		}
		if hi&1 == 0 {
			o.cover(hi, k)
			hi--
		}
		lo, hi = lo>>1, hi>>1
	}
	// The two ends' ancestors, level by level, once where they meet.
	a, b := (l+o.n)>>1, (r+o.n)>>1
	for ; a != b; a, b = a>>1, b>>1 {
		o.pull(a)
		o.pull(b)
	}
	for ; a >= 1; a >>= 1 {
		o.pull(a)
	}
}

// cover adds k slots covering node's whole range.
func (o *occupancy) cover(node uint64, k uint16) {
	if node >= o.n {
		c := &o.leaves[node-o.n]
		if *c > maxQueueEntries-k {
			panic("hwmodel: an occupancy calendar holds more jobs than any queue's limit")
		}
		*c += k
		return
	}
	nd := &o.nodes[node]
	if nd.mx > maxQueueEntries-k {
		panic("hwmodel: an occupancy calendar holds more jobs than any queue's limit")
	}
	nd.cov += k
	nd.mn += k
	nd.mx += k
}

// pull recomputes the least and greatest counts of node from its
// children's.
func (o *occupancy) pull(node uint64) {
	nd, a, b := &o.nodes[node], o.node(2*node), o.node(2*node+1)
	nd.mn = nd.cov + min(a.mn, b.mn)
	nd.mx = nd.cov + max(a.mx, b.mx)
}

// rebuild drops the first drop leaves and makes room for at least need
// leaves after them, keeping every count.
func (o *occupancy) rebuild(drop, need uint64) {
	keep := uint64(0)
	if drop < o.used {
		keep = o.used - drop
	}
	n := occSize(need, keep, o.n)
	if n == o.n && n > 0 {
		o.shift(drop, keep)
		return
	}
	// Push every node's adds down to the leaves: they then hold the counts.
	for node := uint64(1); node < o.n; node++ {
		o.push(node)
	}
	o.keep = append(o.keep[:0], o.leaves[drop:drop+keep]...)
	if n != o.n {
		o.n = n
		// Reuse the array where it fits, unless it is far larger than
		// what is kept (a far-future hold grew it) and large: a small
		// array is kept whatever it holds, so that a calendar a trim
		// shrank regrows in place instead of reallocating at every
		// doubling (a quarter less occupancy allocation in a quick
		// sbrp-fig6).
		if c := uint64(cap(o.leaves)); c >= n && (c <= 4*n || c <= occKeepLeaves) {
			o.nodes, o.leaves = o.nodes[:n], o.leaves[:n]
		} else {
			o.nodes, o.leaves = make([]occNode, n), make([]uint16, n)
		}
	}
	copy(o.leaves, o.keep)
	clear(o.leaves[len(o.keep):])
	for node := n - 1; node >= 1; node-- {
		a, b := o.node(2*node), o.node(2*node+1)
		o.nodes[node] = occNode{mn: min(a.mn, b.mn), mx: max(a.mx, b.mx)}
	}
	o.used = keep
}

// occSize returns the leaves of a tree that holds need leaves and keep
// kept ones, for a tree of now leaves. The tree fits what is kept: a trim
// after a far-future hold shrinks it again, so later rebuilds cost what
// the calendar holds. It keeps its size while that is at most 8 times what
// it must hold, so that trims and holds that come and go do not shrink and
// regrow it (and reallocate it) again and again.
func occSize(need, keep, now uint64) uint64 {
	n := uint64(64)
	for n < need || n < keep {
		n *= 2
	}
	if now > n && now <= 8*n {
		n = now
	}
	return n
}

// shift is rebuild for a tree that keeps its size: it moves leaves
// drop..drop+keep-1 to the front and touches only the nodes over the used
// leaves (a tree is often much larger than its used part, and no job ever
// touched the nodes beyond it).
func (o *occupancy) shift(drop, keep uint64) {
	n, used := o.n, o.used
	// Push the adds over the used leaves down to them, level by level
	// (the level of first has first nodes of w leaves each).
	for first, w := uint64(1), n; first < n; first, w = first<<1, w>>1 {
		for node := first; node < first+(used+w-1)/w; node++ {
			o.push(node)
		}
	}
	leaves := o.leaves[:used]
	copy(leaves, leaves[drop:drop+keep])
	clear(leaves[keep:])
	for first, w := n>>1, uint64(2); first >= 1; first, w = first>>1, w<<1 {
		for node := first; node < first+(used+w-1)/w; node++ {
			a, b := o.node(2*node), o.node(2*node+1)
			o.nodes[node] = occNode{mn: min(a.mn, b.mn), mx: max(a.mx, b.mx)}
		}
	}
	o.used = keep
}

func (o *occupancy) trim(at uint64) {
	k := at >> occShift
	if k <= o.base || k-o.base < o.used/2 {
		return
	}
	if k-o.base >= o.used {
		// Nothing is held from k on: the calendar starts again at k, so
		// that a hold far later does not grow it over the idle cycles
		// between (a calendar idle since its last trim kept its old base
		// and, at paper size, grew to millions of buckets).
		if o.used > 0 {
			o.rebuild(o.used, 0)
		}
		o.base = k
		return
	}
	o.rebuild(k-o.base, 0)
	o.base = k
}
