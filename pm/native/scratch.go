//go:build unix

package native

import "unsafe"

// mapped returns a zeroed slice of n values of T (a type without
// pointers) in an anonymous mapping of small pages (newMapping), and the
// function that unmaps it, for a checkpoint's transient index: the
// collector never sees it, so it neither counts toward the heap goal (a
// checkpoint of a large log would otherwise make collections of
// everything else less frequent and then more) nor leaves garbage; and
// pages never written take no memory, so n may be a bound rather than a
// count (huge pages, which images ask for, would round each array up to
// 2 MiB resident). The slice must not be used after the release.
func mapped[T any](n int) ([]T, func() error, error) {
	if n <= 0 {
		return nil, func() error { return nil }, nil
	}
	var z T
	b, err := newMapping(uint64(n) * uint64(unsafe.Sizeof(z)))
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), func() error { return freeImage(b) }, nil
}
