package hwmodel

import (
	"fmt"
	"strings"
)

// Model is a persistency model: the rules for when a persist may become
// durable and which warps wait for it. Every model defines every verb; a
// model that lacks a verb maps it to its nearest primitive.
type Model uint8

// The persistency models (see DESIGN.md, "Persistency models").
const (
	// Strict: every PM store is written through to the persistence point
	// and the warp waits for its ack; ordering verbs then cost nothing more.
	Strict Model = iota
	// Epoch: PM stores are buffered in the L1; every ordering verb (OFence,
	// DFence, PRel, PAcq, PBarrier, EpochBarrier, SyncThreads) writes back
	// the SM's dirty PM lines, invalidates the L1 and stalls the warp until
	// every ack has returned.
	Epoch
	// GPM: Epoch plus a device-scope fence (an L2 round trip) after every
	// persistency verb, as GPM runs on unmodified hardware.
	GPM
	// SBRP: scoped buffered release persistency (seed 001): a per-SM
	// persist buffer drained in order through a window of outstanding
	// flushes; OFence and block-scope PRel/PAcq are buffered markers,
	// device-scope PRel and DFence block only the issuing warp until its
	// persists are durable, device-scope PAcq invalidates the L1.
	SBRP
	// ScopedBarrier: scoped persist barriers (seed 000): PM stores are
	// written through NVW-FIFOs (per L1 and in the L2); PBarrier(s) waits
	// for the members of s, then for the FIFOs covering s to drain.
	ScopedBarrier
	// None: no ordering; PM lines are written back on eviction and at the
	// end of the kernel, and no verb waits for a persist.
	None
	numModels
)

var modelNames = [...]string{"strict", "epoch", "gpm", "sbrp", "scoped-barrier", "none"}

// String returns the model's lower-case name ("sbrp", "scoped-barrier").
func (m Model) String() string {
	if m < numModels {
		return modelNames[m]
	}
	return fmt.Sprintf("model(%d)", uint8(m))
}

// Models returns every model in a fixed order.
func Models() []Model {
	out := make([]Model, numModels)
	for i := range out {
		out[i] = Model(i)
	}
	return out
}

// ParseModel returns the model named name (as printed by String, case
// insensitive).
func ParseModel(name string) (Model, error) {
	for i, n := range modelNames {
		if strings.EqualFold(n, name) {
			return Model(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q (have %s)", ErrModel, name, strings.Join(modelNames[:], ", "))
}
