// Package functional is the reference backend: no timing, every verb
// completes at once and every persist is durable the moment it is stored.
// The hwmodel and native backends must end every program with the same
// memory contents as this one.
package functional

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// Backend is the functional backend. The zero value is not ready; use New.
type Backend struct {
	pm.Base
	mem *pm.Memory
	gpu pm.GPULimits
}

// New returns a functional backend that reports the GPU shape gpu, or
// pm.DefaultGPU if gpu is the zero value.
func New(gpu pm.GPULimits) *Backend {
	if gpu == (pm.GPULimits{}) {
		gpu = pm.DefaultGPU()
	}
	return &Backend{gpu: gpu}
}

// Name returns "functional".
func (b *Backend) Name() string { return "functional" }

// Attach binds the backend to mem. It asks for no per-verb calls and no
// batching: threads run until they must wait. A backend serves one machine:
// attaching it to a second one is an error.
func (b *Backend) Attach(mem *pm.Memory) (pm.Caps, error) {
	if b.mem != nil {
		return pm.Caps{}, fmt.Errorf("%w: functional backend attached to a second machine", pm.ErrBackend)
	}
	b.mem = mem
	return pm.Caps{GPU: b.gpu}, nil
}

// Crash returns the visible PM contents: every persist is already durable.
func (b *Backend) Crash() (*pm.Image, error) { return b.mem.Snapshot(), nil }
