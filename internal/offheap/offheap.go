// Package offheap gives memory that the Go garbage collector neither scans
// nor counts toward its heap goal, for long-lived caches of plain words.
// The collector lets the heap grow to about twice what is live before it
// collects (GOGC=100), so every byte a cache holds on the heap costs about
// two of the process's resident memory; in an anonymous mapping it costs
// one, and pages never written cost none.
//
// The memory belongs to an owner object: it is unmapped once the owner is
// unreachable (runtime.AddCleanup), so it must be reached only through the
// owner, never through a slice kept after the owner is dropped. Under the
// race detector, and where mappings are not available, it is an ordinary
// slice, which the detector watches.
package offheap

import "unsafe"

// Words returns n zero words that live as long as owner does. The owner
// must not be of zero size, and should be an object of its own (at least
// 16 bytes, or holding a pointer): the collector may keep a smaller
// pointer-free object, and so its words, alive with its neighbours. For a
// zero-size owner the words are on the heap.
func Words[T any](owner *T, n int) []uint64 {
	if n <= 0 {
		return nil
	}
	if unsafe.Sizeof(*owner) == 0 {
		return make([]uint64, n)
	}
	if w := mapWords(owner, n); w != nil {
		return w
	}
	return make([]uint64, n)
}
