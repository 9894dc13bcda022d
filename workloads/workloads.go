// Package workloads holds scopedpm's PM applications as crash-checkable
// workloads (crash.Workload): each sets up its inputs and PM regions, runs
// its kernels, recovers from PM alone after a crash, and checks its
// invariant. bench/cmd/pmcheck explores their crash states.
//
// The GPU persistency re-study's kernels (RestudyWorkloads, NewRestudy,
// files restudy*.go) are written once against a Persister and run under any
// Scheme (SP_wt, EP_K, EP_C_clwb, undo_C+wt+idem, ...): the
// scheme decides where write-backs, MemBars and PCommits go. Each workload
// reports the time of each of its kernels (RestudyWorkload.Kernels), named
// as in the re-study (histo2, sad1, ...). A kernel declares whether it is
// idempotent; "+idem" durable transactions skip the undo log of the kernels
// that say they are, and the crash checker tests the declaration (see
// restudy_undo.go).
package workloads

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/scopedpm/scopedpm/crash"
)

// ErrUnknown is returned for a workload name that is not registered.
var ErrUnknown = errors.New("workloads: unknown workload")

// ErrInconsistent is returned by a recovery that finds a durable state the
// program's persist order should have made impossible.
var ErrInconsistent = errors.New("workloads: inconsistent durable state")

// Size selects a workload's input size.
type Size uint8

// Sizes.
const (
	Tiny  Size = iota // for exhaustive crash checking: a handful of threads
	Quick             // seconds
	Paper             // the paper's input size
)

type entry struct {
	name, desc string
	make       func(Size) crash.Workload
	scaled     func(Size, float64) (crash.Workload, error) // nil: does not scale
}

var registry []entry

func register(name, desc string, f func(Size) crash.Workload) {
	registry = append(registry, entry{name: name, desc: desc, make: f})
	slices.SortFunc(registry, func(a, b entry) int {
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
}

// registerScaled lets the registered workload name scale (NewScaled).
func registerScaled(name string, f func(Size, float64) (crash.Workload, error)) {
	for i := range registry {
		if registry[i].name == name {
			registry[i].scaled = f
			return
		}
	}
	panic("workloads: registerScaled of unregistered " + name)
}

// Names returns the registered workloads with their descriptions.
func Names() [][2]string {
	out := make([][2]string, len(registry))
	for i, e := range registry {
		out[i] = [2]string{e.name, e.desc}
	}
	return out
}

// New returns the workload called name at the given size.
func New(name string, size Size) (crash.Workload, error) {
	for _, e := range registry {
		if e.name == name {
			return e.make(size), nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknown, name)
}

// NewScaled returns the workload called name at size s with its problem
// scaled by factor (0.25, 1, 4, ...): factor times the blocks, each doing
// what it does at size s, so that the work grows in proportion while every
// thread's program stays the same. It is for measuring how the simulator's
// cost grows with problem size; NewScaled(name, s, 1) is New(name, s).
// Workloads that do not scale (Scalable reports which do), and factors that
// do not give a whole number of blocks or give a shape the workload cannot
// run, are an ErrConfig.
func NewScaled(name string, s Size, factor float64) (crash.Workload, error) {
	for _, e := range registry {
		if e.name != name {
			continue
		}
		if e.scaled == nil {
			return nil, fmt.Errorf("%w: workload %q does not scale", ErrConfig, name)
		}
		if !(factor > 0) {
			return nil, fmt.Errorf("%w: scale factor %v", ErrConfig, factor)
		}
		return e.scaled(s, factor)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknown, name)
}

// Scalable reports whether NewScaled scales the workload called name.
func Scalable(name string) bool {
	for _, e := range registry {
		if e.name == name {
			return e.scaled != nil
		}
	}
	return false
}

// scaleCount returns n times factor if that is a whole positive number.
func scaleCount(what string, n int, factor float64) (int, error) {
	v := float64(n) * factor
	if v < 1 || v != math.Trunc(v) || v > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %d %s scaled by %v is not a whole positive number", ErrConfig, n, what, factor)
	}
	return int(v), nil
}
