//go:build unix

package native

import "golang.org/x/sys/unix"

// mapSyncFlags are the mmap flags of a DAX mapping whose stores are
// durable once flushed from the CPU caches (MAP_SYNC needs
// MAP_SHARED_VALIDATE).
const mapSyncFlags = unix.MAP_SHARED_VALIDATE | unix.MAP_SYNC
