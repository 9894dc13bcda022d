//go:build unix && !linux

package native

// mapSyncFlags is zero where the kernel has no MAP_SYNC: dax mode is never
// available there and msync is used.
const mapSyncFlags = 0
