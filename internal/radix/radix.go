// Package radix sorts unsigned integers by their bytes: a least-significant-
// digit radix sort, several times faster than a comparison sort on the
// packed keys (an offset above an index) that the stores sort their writes
// by.
package radix

// Sort sorts keys, whose values are all below 1<<width (width at most 64),
// in ascending order, using scratch (at least as long as keys) as the other
// buffer; it returns the one of the two that holds the result. A byte
// every key shares costs one counting pass and no move.
func Sort(keys, scratch []uint64, width uint) []uint64 {
	if len(keys) < 2 {
		return keys
	}
	scratch = scratch[:len(keys)]
	for shift := uint(0); shift < width; shift += 8 {
		var count [257]int
		for _, k := range keys {
			count[(k>>shift)&0xff+1]++
		}
		if count[(keys[0]>>shift)&0xff+1] == len(keys) {
			continue
		}
		for d := 1; d < 257; d++ {
			count[d] += count[d-1]
		}
		for _, k := range keys {
			d := (k >> shift) & 0xff
			scratch[count[d]] = k
			count[d]++
		}
		keys, scratch = scratch, keys
	}
	return keys
}

// SortBy sorts idx by key(idx[i]), whose values are all below 1<<width, in
// ascending order, stably (elements with equal keys keep their order),
// using scratch (at least as long as idx) as the other buffer; it returns
// the one of the two that holds the result. It sorts indices into a table
// without a packed key array beside them: 8 bytes an element for uint32
// indices where Sort on packed keys takes 16.
func SortBy[T ~uint32 | ~uint64](idx, scratch []T, width uint, key func(T) uint64) []T {
	if len(idx) < 2 {
		return idx
	}
	scratch = scratch[:len(idx)]
	for shift := uint(0); shift < width; shift += 8 {
		var count [257]int
		for _, i := range idx {
			count[(key(i)>>shift)&0xff+1]++
		}
		if count[(key(idx[0])>>shift)&0xff+1] == len(idx) {
			continue
		}
		for d := 1; d < 257; d++ {
			count[d] += count[d-1]
		}
		for _, i := range idx {
			d := (key(i) >> shift) & 0xff
			scratch[count[d]] = i
			count[d]++
		}
		idx, scratch = scratch, idx
	}
	return idx
}
