package workloads

import (
	"fmt"
	"strings"

	"github.com/scopedpm/scopedpm/pm/persistency"
)

// The persistency re-study's models (SP_wt, EP_C_clwb, undo_L+clwb, ...)
// are not separate machines but disciplines on one mechanism, the write-back
// GPU of persistency.WriteBackADR and WriteBackPCT: where a kernel writes
// back (Granularity) and with which instruction (Mechanism), on either
// write-pending queue (PCT). Scheme names one such configuration; the
// re-study's kernels (restudy*.go) place their verbs by it.

// Granularity is where a re-study scheme makes a kernel's persists durable.
type Granularity uint8

// Granularities.
const (
	// PerStore: strict persistency (SP): each PM store is written back
	// and fenced before the thread's next one.
	PerStore Granularity = iota
	// PerKernel: kernel-level epochs (EP_K): one L2WB when the kernel ends.
	PerKernel
	// PerCTA: CTA-level epochs (EP_C): each thread block's stores are
	// written back and fenced when the block ends.
	PerCTA
	// PerLoop: loop-level epochs (EP_L): a long-running block writes back
	// and fences at the end of every iteration of its main loop.
	PerLoop
	// Baseline: no persistency at all, the re-study's "nvm" baseline: PM
	// as plain memory, nothing written back, nothing fenced.
	Baseline
	numGrans
)

var granNames = [...]string{"SP", "EP_K", "EP_C", "EP_L", "nvm"}

// String returns the scheme prefix: "SP", "EP_K", "EP_C", "EP_L" or "nvm".
func (g Granularity) String() string {
	if g < numGrans {
		return granNames[g]
	}
	return fmt.Sprintf("granularity(%d)", uint8(g))
}

// Mechanism is how a re-study scheme writes persists back.
type Mechanism uint8

// Mechanisms.
const (
	// WT: write-through stores (store.wt).
	WT Mechanism = iota
	// CLWB: plain stores, then a CLWB of each line written.
	CLWB
	// L2WB: plain stores, then one L2WB of the whole L2.
	L2WB
	numMechs
)

var mechNames = [...]string{"wt", "clwb", "l2wb"}

// String returns "wt", "clwb" or "l2wb".
func (k Mechanism) String() string {
	if k < numMechs {
		return mechNames[k]
	}
	return fmt.Sprintf("mechanism(%d)", uint8(k))
}

// Scheme is one of the re-study's persistency models: a granularity, a
// write-back mechanism and the WPQ's place (PCT: volatile, so every epoch
// ends with PCommit). Kernel-level epochs always use L2WB.
type Scheme struct {
	Gran Granularity
	Mech Mechanism
	PCT  bool
	// Undo makes the scheme a durable transaction (the re-study's undo_K,
	// undo_C, undo_L): before a PM word is first overwritten in an epoch,
	// its old value is logged and the log entry made durable, so an epoch
	// cut short by a crash is rolled back before it is re-run. Log entries
	// are written back with Mech, or with CLWB when Mech is L2WB.
	Undo bool
	// Idem (with Undo) skips the log in kernels declared idempotent: those
	// are simply re-run (the re-study's "+idem", its idempotency analysis).
	Idem bool
}

// Model returns the hardware model the scheme runs on: WriteBackPCT if PCT,
// else WriteBackADR.
func (s Scheme) Model() persistency.Model {
	if s.PCT {
		return persistency.WriteBackPCT
	}
	return persistency.WriteBackADR
}

// String returns the re-study's name for the scheme: "SP_wt",
// "SP_clwb_pct", "EP_K", "EP_K_pct", "EP_C_l2wb", "EP_L_clwb_pct", ...
func (s Scheme) String() string {
	name := s.Gran.String()
	if s.Gran == Baseline {
		return name
	}
	if s.Undo {
		name = "undo_" + name[len("EP_"):]
		if s.Gran != PerKernel {
			name += "+" + s.Mech.String()
		}
		if s.PCT {
			name += "_pct"
		}
		if s.Idem {
			name += "+idem"
		}
		return name
	}
	if s.Gran != PerKernel {
		name += "_" + s.Mech.String()
	}
	if s.PCT {
		name += "_pct"
	}
	return name
}

// Valid reports whether s is a scheme the re-study's hardware can run:
// known fields, kernel-level epochs by L2WB only, strict persistency by
// write-through or CLWB, and the baseline as Scheme{Gran: Baseline} alone.
func (s Scheme) Valid() bool {
	if s.Gran >= numGrans || s.Mech >= numMechs {
		return false
	}
	if s.Idem && !s.Undo || s.Undo && (s.Gran == PerStore || s.Gran == Baseline) {
		return false
	}
	if s.Gran == PerKernel {
		return s.Mech == L2WB
	}
	if s.Gran == Baseline {
		return s.Mech == WT && !s.PCT
	}
	return !(s.Gran == PerStore && s.Mech == L2WB)
}

// ParseScheme returns the scheme named name (as String prints it, case
// insensitive); the error wraps persistency.ErrModel.
func ParseScheme(name string) (Scheme, error) {
	for g := range numGrans {
		for k := range numMechs {
			for _, pct := range []bool{false, true} {
				for _, undo := range []bool{false, true} {
					for _, idem := range []bool{false, true} {
						s := Scheme{Gran: g, Mech: k, PCT: pct, Undo: undo, Idem: idem}
						if s.Valid() && strings.EqualFold(s.String(), name) {
							return s, nil
						}
					}
				}
			}
		}
	}
	return Scheme{}, fmt.Errorf("%w: scheme %q (want nvm, SP_wt, SP_clwb, EP_K, EP_C_wt, EP_C_clwb, EP_C_l2wb, EP_L_wt, EP_L_clwb, optionally with _pct, or undo_K, undo_C+wt, undo_L+clwb, ... optionally with +idem)", persistency.ErrModel, name)
}

// NVM returns the baseline every figure of the re-study normalises to.
func NVM() Scheme { return Scheme{Gran: Baseline} }

// The re-study's schemes as its figures group them; each call returns a
// fresh slice.

// StrictSchemes returns the strict persistency schemes (Figures 1, 2, 4, 6).
func StrictSchemes() []Scheme {
	return []Scheme{{Gran: PerStore, Mech: WT}, {Gran: PerStore, Mech: CLWB}, {Gran: PerStore, Mech: CLWB, PCT: true}}
}

// KernelSchemes returns the kernel-level epoch schemes (Figures 1 and 5).
func KernelSchemes() []Scheme {
	return []Scheme{{Gran: PerKernel, Mech: L2WB}, {Gran: PerKernel, Mech: L2WB, PCT: true}}
}

// CTASchemes returns the CTA-level epoch schemes (Figures 2 and 6).
func CTASchemes() []Scheme {
	return []Scheme{{Gran: PerCTA, Mech: WT}, {Gran: PerCTA, Mech: CLWB}, {Gran: PerCTA, Mech: L2WB}}
}

// LoopSchemes returns the loop-level epoch schemes (Figure 4).
func LoopSchemes() []Scheme {
	return []Scheme{{Gran: PerLoop, Mech: WT}, {Gran: PerLoop, Mech: CLWB}, {Gran: PerLoop, Mech: CLWB, PCT: true}}
}

// UndoSchemes returns the durable-transaction schemes (Figure 3 and
// Table V), each without and with the idempotency analysis.
func UndoSchemes() []Scheme {
	return []Scheme{
		{Gran: PerKernel, Mech: L2WB, Undo: true}, {Gran: PerKernel, Mech: L2WB, Undo: true, Idem: true},
		{Gran: PerCTA, Mech: WT, Undo: true}, {Gran: PerCTA, Mech: WT, Undo: true, Idem: true},
		{Gran: PerCTA, Mech: CLWB, Undo: true}, {Gran: PerCTA, Mech: CLWB, Undo: true, Idem: true},
		{Gran: PerLoop, Mech: CLWB, Undo: true}, {Gran: PerLoop, Mech: CLWB, Undo: true, Idem: true},
	}
}
