// Package persistency defines each persistency model once: which verb, at
// which scope, orders a thread's persists, makes them durable, releases or
// acquires them, or joins a barrier's members. The crash checker (package
// crash) builds its persist memory order (PMO) graph from these rules,
// and the timing backend (package hwmodel) implements the same models; the
// checker's refinement test (crash.Refines) verifies that every crash image
// the timing model produces is one these rules allow.
//
// The models: Strict, Epoch, GPM, SBRP (scoped buffered release
// persistency), ScopedBarrier (scoped persist barriers), the CPU models X86
// and COSPlay, None, and the write-back GPU's WriteBackADR and WriteBackPCT.
package persistency

import (
	"errors"
	"fmt"
	"strings"

	"github.com/scopedpm/scopedpm/pm"
)

// ErrModel: an unknown persistency model name.
var ErrModel = errors.New("persistency: unknown model")

// Model is a persistency model. The zero Model is no model (Valid reports
// false): a configuration that forgets to name one is an error, never a
// silent Strict.
type Model uint8

// The models.
const (
	// Unset is the zero Model: no model was chosen. It is not Valid.
	Unset Model = iota
	// Strict: persists follow happens-before: each thread's persists in
	// program order, and a thread's persists after a synchronization
	// (acquire, atomic, barrier) after the persists the other side made
	// before it. Scopes are ignored.
	Strict
	// Epoch: every ordering verb (OFence, DFence, PRel, PAcq, PBarrier,
	// EpochBarrier) and every block barrier is a full, durable barrier
	// for the issuing thread; a PAcq that reads a PRel orders the
	// releaser's earlier persists before the acquirer's later ones,
	// whatever their scopes.
	Epoch
	// GPM: as Epoch (volatile write-backs change time, not order).
	GPM
	// SBRP: scoped buffered release persistency (SBRP, ASPLOS 2023):
	// OFence orders the thread's persists, DFence makes them durable, and
	// a PRel read by a PAcq orders the releaser's earlier persists before
	// the acquirer's later ones only when both scopes cover both threads.
	// A PRel does not order the releaser's later persists, nor a PAcq the
	// acquirer's earlier ones.
	SBRP
	// ScopedBarrier: scoped persist barriers (the scoped persist barrier
	// paper, GPGPU 2018): PBarrier(s) orders the persists of the members of
	// scope s before the barrier before their persists after it; OFence,
	// DFence, PRel and PAcq act as thread-scope barriers (PRel durable).
	ScopedBarrier
	// X86: a CPU task's stores persist in order only across an SFence
	// that follows their line's CLWB; GPU threads follow the thread rules
	// of ScopedBarrier.
	X86
	// COSPlay: as X86 per persist context: CFence(c) orders only the
	// persists stored under context c (SetCtx).
	COSPlay
	// None: no order but each byte's own write order ("Unordered").
	None
	// WriteBackADR: the write-back GPU of the persistency re-study (see
	// writeback.go): PM stores sit in a write-back L2 until a
	// write-through store, a CLWB of their line or an L2WB writes them
	// back; a MemBar orders the thread's written-back persists, which are
	// durable once acknowledged (the write-pending queues are in the
	// persistence domain, ADR).
	WriteBackADR
	// WriteBackPCT: WriteBackADR with volatile write-pending queues (the
	// re-study's "_pct" variants): a written-back persist is durable only
	// after a PCommit that follows its acknowledgement.
	WriteBackPCT
	numModels
)

var names = [...]string{"strict", "epoch", "gpm", "sbrp", "scoped-barrier", "x86", "cosplay", "none", "writeback-adr", "writeback-pct"}

// String returns the model's name as Parse accepts it.
func (m Model) String() string {
	if m == Unset {
		return "unset"
	}
	if m < numModels {
		return names[m-1]
	}
	return fmt.Sprintf("model(%d)", uint8(m))
}

// Valid reports whether m is a defined model (not Unset, not out of range).
func (m Model) Valid() bool { return m > Unset && m < numModels }

// Parse returns the model called name (as String prints it, case
// insensitive). It also takes the write-back models' former names,
// "restudy" and "restudy-pct".
func Parse(name string) (Model, error) {
	for i, n := range names {
		if strings.EqualFold(n, name) {
			return Model(i + 1), nil
		}
	}
	// Former names: the write-back models were named after the paper
	// that studied them.
	switch strings.ToLower(name) {
	case "restudy":
		return WriteBackADR, nil
	case "restudy-pct":
		return WriteBackPCT, nil
	}
	return 0, fmt.Errorf("%w: %q (have %s)", ErrModel, name, strings.Join(names[:], ", "))
}

// Models returns every model in a fixed order.
func Models() []Model {
	out := make([]Model, numModels-1)
	for i := range out {
		out[i] = Model(i + 1)
	}
	return out
}

// CPU reports whether the model orders a CPU task's persists by CLWB and
// SFence (X86) or CFence (COSPlay) rather than by the GPU verbs.
func (m Model) CPU() bool { return m == X86 || m == COSPlay }

// Contexts reports whether persist contexts (SetCtx/CFence) order CPU
// persists separately (COSPlay).
func (m Model) Contexts() bool { return m == COSPlay }

// ProgramOrder reports whether each thread's persists are ordered in
// program order without any verb (Strict).
func (m Model) ProgramOrder() bool { return m == Strict }

// Unordered reports whether no verb orders persists (None).
func (m Model) Unordered() bool { return m == None }

// Scoped reports whether a release synchronizes with an acquire only when
// both scopes cover both threads (SBRP). Under the other models scopes
// change timing, not order.
func (m Model) Scoped() bool { return m == SBRP }

// AtomicsSync reports whether an atomic that reads another thread's write
// orders that thread's earlier persists before the reader's later ones
// (Strict, where persist order follows happens-before).
func (m Model) AtomicsSync() bool { return m == Strict }

// Effect is what one verb does to the persist order of the thread issuing
// it. Effects combine as a bit set.
type Effect uint8

// Effects.
const (
	// Orders: the thread's earlier persists are ordered before its later
	// ones.
	Orders Effect = 1 << iota
	// Durable: the thread's earlier persists (those Orders covers) are
	// durable when the verb returns.
	Durable
	// Releases: an acquire that reads this verb's write orders the
	// thread's persists before it before the acquirer's later persists
	// (see Model.Scoped for when scopes must cover both threads).
	Releases
	// Acquires: the verb reads a release and orders the releaser's
	// earlier persists before the thread's later ones.
	Acquires
	// Joins: the verb arrives at a barrier; once every member has
	// arrived, every member's persists before it are ordered before every
	// member's persists after it.
	Joins
	// WritesBack: under a write-back model (Model.WriteBack) the verb
	// writes persists back towards the persistence point: CLWB its line,
	// L2WB every line, and any other verb with this effect the thread's
	// own persists.
	WritesBack
	// Commits: under a volatile write-pending queue (Model.VolatileWPQ)
	// the verb makes the written-back persists it covers durable-capable
	// (PCommit; the other verbs with this effect commit the thread's own).
	Commits
)

// Has reports whether e includes every effect of f.
func (e Effect) Has(f Effect) bool { return e&f == f }

// String lists the effects ("orders+durable").
func (e Effect) String() string {
	var parts []string
	for i, n := range []string{"orders", "durable", "releases", "acquires", "joins", "writes-back", "commits"} {
		if e&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Verb returns what verb k at scope s does under m for a GPU thread (and
// for a CPU task under the non-CPU models). CPU verbs under X86 and
// COSPlay follow their own line and context rules (see CPU); stores and
// loads have no effect here (Strict's program order is ProgramOrder).
func (m Model) Verb(k pm.OpKind, s pm.Scope) Effect {
	switch k {
	case pm.OpCLWB, pm.OpL2WB, pm.OpPCommit, pm.OpMemBar:
		return m.wbVerb(k)
	}
	switch m {
	case None:
		return 0
	case WriteBackADR, WriteBackPCT:
		return m.wbLegacy(k, s)
	case Strict:
		switch k {
		case pm.OpDFence, pm.OpEpochBarrier, pm.OpSFence, pm.OpCFence, pm.OpJoinStrand:
			return Orders | Durable
		case pm.OpPRel:
			return Orders | Releases
		case pm.OpPAcq:
			return Orders | Acquires
		case pm.OpPBarrier, pm.OpSyncThreads, pm.OpSyncWarp:
			if s == pm.Thread {
				return Orders
			}
			return Orders | Joins
		case pm.OpOFence, pm.OpPersistBarrier:
			return Orders
		}
		return 0
	}
	epoch := m == Epoch || m == GPM
	switch k {
	case pm.OpOFence, pm.OpPersistBarrier:
		return Orders
	case pm.OpDFence, pm.OpEpochBarrier, pm.OpSFence, pm.OpCFence, pm.OpJoinStrand:
		return Orders | Durable
	case pm.OpPRel:
		if m == SBRP {
			return Releases
		}
		// Epoch-like models and scoped barriers drain before the flag is
		// written: a full, durable fence.
		return Orders | Durable | Releases
	case pm.OpPAcq:
		if m == SBRP {
			return Acquires
		}
		return Orders | Acquires
	case pm.OpPBarrier:
		if s == pm.Thread {
			return Orders
		}
		return Orders | Joins
	case pm.OpSyncThreads:
		if epoch {
			return Orders | Durable | Joins
		}
	}
	return 0
}

// Promotion widens the scope of persist releases and acquires from From to
// To: Promotion{pm.Block, pm.Device} runs a kernel "without scopes" (SBRP
// Figure 7). Barriers, fences and atomics keep their scopes, since those
// say who waits for whom, not how far persists are ordered. The executor
// applies it where verbs are issued (scope.WithPromotion), so the timing
// backend and the crash checker see the same, promoted, scopes.
type Promotion struct{ From, To pm.Scope }

// Apply returns the scope verb k of scope s has under p.
func (p Promotion) Apply(k pm.OpKind, s pm.Scope) pm.Scope {
	if (k == pm.OpPRel || k == pm.OpPAcq) && s == p.From {
		return p.To
	}
	return s
}
