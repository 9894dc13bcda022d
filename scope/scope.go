// Package scope runs GPU kernels on a pm.Machine: scopes, launch geometry,
// the per-thread handle with every GPU verb, and the deterministic execution
// engine that runs each simulated thread as a coroutine.
//
// # Execution
//
// A kernel is a func(*Thread). Launch runs it once per thread of a grid of
// blocks; only the blocks that fit the GPU's per-SM limits are resident at
// once, and new blocks start as old ones finish. Threads are grouped in
// warps. The engine resumes warps in order of (ready cycle, warp id), the
// ready cycle coming from the backend (always 0 for an untimed backend); in a
// warp's step each runnable lane runs, in lane order, until it must wait.
//
// A thread suspends only where another thread's progress can matter: at a
// barrier, on a spin (a read of the address it read last with no write
// anywhere in between: it parks until someone writes that word), and, for a
// timing backend, after the backend's batch of verbs. Plain loads and stores
// take effect at once on the visible image, so a data-race-free kernel sees
// what it would on hardware. Same inputs, same schedule, same results.
//
// A launch that can make no more progress fails with ErrDeadlock naming the
// blocked threads and what each waits on; a panic in a kernel or a bad
// address becomes a *KernelError naming the thread; an impossible grid is
// ErrGeometry before anything runs.
package scope

import (
	"errors"

	"github.com/scopedpm/scopedpm/pm"
)

// Scope is a group of threads that a verb covers. It is pm.Scope; the
// scopes are pm.Thread, pm.Warp, pm.Block, pm.Device and pm.System.
type Scope = pm.Scope

// Sentinel errors of package scope.
var (
	// ErrGeometry: a grid the GPU cannot run (no blocks, a block larger than
	// an SM or than the per-block limit).
	ErrGeometry = errors.New("scope: impossible launch geometry")
	// ErrDeadlock: no thread can make progress.
	ErrDeadlock = errors.New("scope: deadlock")
	// ErrPanic: a kernel panicked.
	ErrPanic = errors.New("scope: kernel panicked")
	// ErrFault: a kernel made a bad access (see the wrapped pm error).
	ErrFault = errors.New("scope: memory fault")
	// ErrBadArg: a verb or a launch option was given an invalid argument
	// (an unknown scope, a negative size).
	ErrBadArg = errors.New("scope: bad argument")
	// ErrStale: a *Thread was used outside its kernel call (kept after the
	// kernel returned, or passed to another thread's kernel).
	ErrStale = errors.New("scope: Thread used outside its kernel")
)

// Grid is a launch shape: Blocks blocks of Threads threads each.
type Grid struct {
	Blocks  int
	Threads int
}

// Total returns the number of threads in the grid, g.Blocks * g.Threads.
func (g Grid) Total() int { return g.Blocks * g.Threads }
