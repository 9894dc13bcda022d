//go:build unix

package native

import (
	"errors"

	"golang.org/x/sys/unix"
)

// mapSyncFlags are the mmap flags of a DAX mapping whose stores are
// durable once flushed from the CPU caches (MAP_SYNC needs
// MAP_SHARED_VALIDATE).
const mapSyncFlags = unix.MAP_SHARED_VALIDATE | unix.MAP_SYNC

// preallocate reserves the file's blocks, so that a store through the
// mapping never meets a hole on a full filesystem (a SIGBUS) and a sync
// need not allocate. Filesystems without fallocate are left sparse.
func preallocate(fd uintptr, size int64) error {
	err := unix.Fallocate(int(fd), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	return err
}

func fdatasyncFd(fd int) error { return unix.Fdatasync(fd) }

// adviseHugePages asks for huge pages for the mapping b. Advice only: a
// kernel that has none (or refuses) maps small pages.
func adviseHugePages(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
