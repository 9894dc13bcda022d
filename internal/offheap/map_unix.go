//go:build unix && !race

package offheap

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapWords maps n words and unmaps them when owner is unreachable; nil
// when the kernel refuses the mapping.
func mapWords[T any](owner *T, n int) []uint64 {
	if n > int(^uint(0)>>4) {
		return nil
	}
	b, err := unix.Mmap(-1, 0, 8*n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	runtime.AddCleanup(owner, func(b []byte) { _ = unix.Munmap(b) }, b)
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
