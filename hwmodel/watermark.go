package hwmodel

// watermark answers, for a cycle t, the latest completion of the writes
// that left their SMs by t, from every SM: what a fence waits for when it
// is ordered behind every earlier write in the memory system's queues, not
// only its own warp's (gpu.fence_waits_all).
//
// Writes are noted out of time order (the engine runs warps ahead of each
// other), so it keeps, per bucket of 2^bucketShift cycles of departure, the
// latest completion, and a Fenwick tree of prefix maxima over the buckets:
// noting a write and asking for a cycle are O(log n). A write that left in
// the same bucket as the fence, after it, counts: the answer is early by
// at most a bucket. trim forgets old buckets into floor.
type watermark struct {
	base  uint64   // bucket index of raw[0]
	floor uint64   // the latest completion of the writes that left before base
	raw   []uint64 // per bucket, the latest completion of the writes that left in it
	fen   []uint64 // 1-based Fenwick tree of prefix maxima over raw; len(raw)+1 entries
}

// note records a write that left at cycle start and completes at done.
func (w *watermark) note(start, done uint64) {
	k := start >> bucketShift
	if k < w.base {
		w.floor = max(w.floor, done)
		return
	}
	i := k - w.base
	if i >= uint64(len(w.raw)) {
		w.grow(i + 1)
	}
	w.raw[i] = max(w.raw[i], done)
	for j := i + 1; j < uint64(len(w.fen)); j += j & -j {
		w.fen[j] = max(w.fen[j], done)
	}
}

// by returns the latest completion of the writes that left by cycle t (or
// in t's bucket), 0 if none.
func (w *watermark) by(t uint64) uint64 {
	k := t >> bucketShift
	if k < w.base || len(w.raw) == 0 {
		return w.floor
	}
	i := min(k-w.base, uint64(len(w.raw))-1)
	v := w.floor
	for j := i + 1; j > 0; j -= j & -j {
		v = max(v, w.fen[j])
	}
	return v
}

// grow makes room for n buckets (at least doubling) and rebuilds the tree.
func (w *watermark) grow(n uint64) {
	c := max(n, 2*uint64(len(w.raw)), 64)
	w.raw = append(w.raw, make([]uint64, c-uint64(len(w.raw)))...)
	w.rebuild()
}

// rebuild recomputes the Fenwick tree from raw in O(n).
func (w *watermark) rebuild() {
	n := len(w.raw)
	if cap(w.fen) >= n+1 {
		w.fen = w.fen[:n+1]
	} else {
		w.fen = make([]uint64, n+1)
	}
	w.fen[0] = 0
	copy(w.fen[1:], w.raw)
	for i := 1; i <= n; i++ {
		if j := i + i&-i; j <= n {
			w.fen[j] = max(w.fen[j], w.fen[i])
		}
	}
}

// reset forgets everything and starts the buckets at cycle at.
func (w *watermark) reset(at uint64) {
	w.base, w.floor = at>>bucketShift, 0
	w.raw, w.fen = w.raw[:0], w.fen[:0]
}

// trim forgets the buckets before cycle at into floor, once they are at
// least half of the kept ones.
func (w *watermark) trim(at uint64) {
	k := at >> bucketShift
	if k <= w.base || k-w.base < uint64(len(w.raw))/2 {
		return
	}
	drop := min(k-w.base, uint64(len(w.raw)))
	for _, v := range w.raw[:drop] {
		w.floor = max(w.floor, v)
	}
	w.raw = append(w.raw[:0], w.raw[drop:]...)
	w.base += drop
	w.rebuild()
}
