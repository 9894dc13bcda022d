package pm

import "errors"

// Sentinel errors. Functions wrap them with %w and context (the address, the
// region name, the thread); test for them with errors.Is.
var (
	// ErrUnmapped: an address lies in no allocated range.
	ErrUnmapped = errors.New("pm: address not mapped")
	// ErrOutOfRange: an access runs past the end of its range.
	ErrOutOfRange = errors.New("pm: access out of range")
	// ErrMisaligned: an access of n bytes at an address not a multiple of n.
	ErrMisaligned = errors.New("pm: misaligned access")
	// ErrNoRegion: no PM region has that name.
	ErrNoRegion = errors.New("pm: no such region")
	// ErrRegionExists: a PM region with that name already exists.
	ErrRegionExists = errors.New("pm: region exists")
	// ErrBadName: a region name is empty, too long or holds a NUL or '/'.
	ErrBadName = errors.New("pm: bad region name")
	// ErrBadSize: a size is zero, negative or too large.
	ErrBadSize = errors.New("pm: bad size")
	// ErrNotVolatile: Free was given an address that is not the base of a
	// volatile allocation.
	ErrNotVolatile = errors.New("pm: not a volatile allocation")
	// ErrCorrupt: bytes that should hold an encoded image do not.
	ErrCorrupt = errors.New("pm: corrupt image")
	// ErrCrashed: the machine has crashed; only its image is left.
	ErrCrashed = errors.New("pm: machine has crashed")
	// ErrBackend: a backend refused an operation.
	ErrBackend = errors.New("pm: backend error")
)
