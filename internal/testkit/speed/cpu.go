// Package speed holds what scopedpm's speed measurements share: the
// process's CPU time, the kernels BenchmarkEngine (scope) and
// BenchmarkHWModel (hwmodel) run, and a probe of the memory each resident
// simulated thread holds.
//
// Speed is measured in CPU time, not wall time, so that other processes on
// a shared machine do not distort it: a benchmark reads the process's
// user+system time (getrusage) before and after its loop. That time covers
// every thread of the process, including the garbage collector's
// background workers, which is the cost a simulation really has.
package speed

import (
	"time"

	"golang.org/x/sys/unix"
)

// CPUTime returns the user+system CPU time the process has used so far,
// over all its threads (getrusage RUSAGE_SELF), or 0 if it cannot be read.
func CPUTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ChildrenCPUTime returns the user+system CPU time of the processes this
// one started and waited for (getrusage RUSAGE_CHILDREN), or 0 if it
// cannot be read.
func ChildrenCPUTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
