//go:build unix && !race

package native

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// The visible image of a region (its bytes in log and unsafe-nosync
// modes, its private copy in dax mode) lives in an anonymous mapping, not
// in the Go heap: the garbage collector neither scans it nor counts it
// toward its heap goal, which would otherwise let the heap grow to twice
// the image before a collection; and pages never written (most of a new
// region) take no memory (in units of 2 MiB where the kernel grants the
// huge pages it asks for). Close and RemoveStored unmap it, after the
// machine has closed or removed the region (pm.Memory.ClosePM), so that no access
// reaches unmapped memory. Under the race detector (image_race.go) images
// are ordinary slices instead, since it does not watch memory outside the
// Go heap: a data race on an image is then still found.

// newImage returns size zero bytes in a new anonymous mapping, in huge
// pages where the kernel grants them.
func newImage(size uint64) ([]byte, error) {
	b, err := newMapping(size)
	if err != nil {
		return nil, err
	}
	// Huge pages where the kernel allows them: a store's random reads of a
	// large image (a gpKVS table) then miss the TLB far less.
	adviseHugePages(b)
	return b, nil
}

// newMapping returns size zero bytes in a new anonymous mapping of small
// pages: memory is taken a page at a time as it is first written.
func newMapping(size uint64) ([]byte, error) {
	if size > uint64(int(^uint(0)>>1)) {
		return nil, fmt.Errorf("%w: %w: region of %d bytes does not fit the address space", ErrIO, ErrSizeMismatch, size)
	}
	b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("%w: map an image of %d bytes: %w", ErrIO, size, err)
	}
	return b, nil
}

// freeImage unmaps an image newImage or newMapping returned; nil is no
// image.
func freeImage(b []byte) error {
	if b == nil {
		return nil
	}
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("%w: unmap an image: %w", ErrIO, err)
	}
	return nil
}
