//go:build unix && !linux

package native

import "os"

// mapSyncFlags is zero where the kernel has no MAP_SYNC: dax mode is never
// available there and msync is used.
const mapSyncFlags = 0

// preallocate does nothing here: the file stays sparse.
func preallocate(*os.File, int64) error { return nil }
