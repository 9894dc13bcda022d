//go:build unix && !linux

package native

import (
	"golang.org/x/sys/unix"
)

// mapSyncFlags is zero where the kernel has no MAP_SYNC: dax mode is never
// available there and the log is used.
const mapSyncFlags = 0

// preallocate does nothing here: the file stays sparse.
func preallocate(uintptr, int64) error { return nil }

func fdatasyncFd(fd int) error { return unix.Fsync(fd) }

// adviseHugePages does nothing here.
func adviseHugePages([]byte) {}
