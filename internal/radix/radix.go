// Package radix sorts unsigned integers by their bytes: a least-significant-
// digit radix sort, several times faster than a comparison sort on the
// packed keys (an offset above an index) that the stores sort their writes
// by.
package radix

// Sort sorts keys, whose values are all below 1<<width (width at most 64),
// in ascending order, using scratch (at least as long as keys) as the other
// buffer; it returns the one of the two that holds the result. A byte
// every key shares costs one counting pass and no move.
func Sort(keys, scratch []uint64, width uint) []uint64 { return SortFrom(keys, scratch, 0, width) }

// SortFrom is Sort by the bits of keys from bit from up (below 1<<width),
// keeping the order of keys that agree there: keys whose low from bits
// ascend in slice order (an index packed below an offset) come out sorted
// by their whole value, and the passes over those bits are saved.
func SortFrom(keys, scratch []uint64, from, width uint) []uint64 {
	if len(keys) < 2 {
		return keys
	}
	scratch = scratch[:len(keys)]
	for shift := from; shift < width; shift += 8 {
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
