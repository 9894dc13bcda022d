package hwmodel

import (
	"fmt"
	"slices"

	"github.com/scopedpm/scopedpm/pm/persistency"
)

// Model is a persistency model, defined once in package persistency; the
// backend times the GPU models among them (Models). Every model defines
// every verb; a model that lacks a verb maps it to its nearest primitive.
//
// How each is timed:
//   - Strict: every PM store is written through to the persistence point
//     and the warp waits for its ack; ordering verbs then cost nothing more.
//   - Epoch: PM stores are buffered in the L1; every ordering verb (OFence,
//     DFence, PRel, PAcq, PBarrier, EpochBarrier, SyncThreads) writes back
//     the SM's dirty PM lines, invalidates the L1 and stalls the warp until
//     every ack has returned.
//   - GPM: Epoch plus a device-scope fence (an L2 round trip) after every
//     persistency verb, as GPM runs on unmodified hardware.
//   - SBRP: a per-SM persist buffer drained in order through a window of
//     outstanding flushes; OFence and block-scope PRel/PAcq are buffered
//     markers, device-scope PRel and DFence block only the issuing warp
//     until its persists are durable, device-scope PAcq invalidates the L1.
//   - ScopedBarrier: PM stores are written through NVW-FIFOs (per L1 and in
//     the L2); PBarrier(s) waits for the members of s, then for the FIFOs
//     covering s to drain.
//   - None: no ordering; PM lines are written back on eviction and at the
//     end of the kernel, and no verb waits for a persist.
//   - WriteBackADR, WriteBackPCT: the persistency re-study's write-back GPU (see
//     writeback.go): PM stores stay dirty in the L2 until a write-through
//     store, CLWB, L2WB or eviction; MemBar waits for write-backs; the
//     write-pending queues are durable, or (PCT) durable only after a
//     PCommit.
type Model = persistency.Model

// The models hwmodel times (see package persistency for their rules).
const (
	Strict        = persistency.Strict
	Epoch         = persistency.Epoch
	GPM           = persistency.GPM
	SBRP          = persistency.SBRP
	ScopedBarrier = persistency.ScopedBarrier
	None          = persistency.None
	// WriteBackADR and WriteBackPCT are the persistency re-study's write-back
	// GPU with durable or volatile write-pending queues (writeback.go). New
	// accepts them; Models leaves them out, since they run the re-study's
	// kernels rather than every model's.
	WriteBackADR = persistency.WriteBackADR
	WriteBackPCT = persistency.WriteBackPCT
)

var timed = []Model{Strict, Epoch, GPM, SBRP, ScopedBarrier, None}

// Models returns the models the backend times, in a fixed order.
func Models() []Model { return slices.Clone(timed) }

// Models returns the models of Models that New accepts on the machine c:
// None alone where c's PM is timed as device memory (Persist.None, the
// dram preset; ErrPMAsDRAM), every one elsewhere.
func (c Config) Models() []Model {
	if c.Persist.None {
		return []Model{None}
	}
	return Models()
}

// ParseModel returns the model named name (persistency.Parse) if the
// backend times it; the error wraps ErrModel.
func ParseModel(name string) (Model, error) {
	m, err := persistency.Parse(name)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrModel, err)
	}
	if !slices.Contains(timed, m) && !m.WriteBack() {
		return 0, fmt.Errorf("%w: %v is a CPU model; hwmodel times %v", ErrModel, m, timed)
	}
	return m, nil
}
