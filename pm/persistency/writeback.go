package persistency

import "github.com/scopedpm/scopedpm/pm"

// The persistency re-study (a GPGPU-Sim 4.0 re-study of "Exploring Memory
// Persistency Models for GPUs") runs GPU kernels on a machine whose L1 is
// write-through and whose L2 is a write-back cache in front of the memory
// controllers' write-pending queues (WPQs). A PM store reaches PM only when
// it is written back: by a write-through store, by a CLWB of its line, by an
// L2WB of the whole L2, or by an eviction no program can rely on. A MemBar
// waits for the thread's earlier write-backs to be acknowledged by a WPQ.
// Whether the WPQ is in the persistence domain is the one hardware switch:
// WriteBackADR (ADR, an acknowledged write-back is durable) or WriteBackPCT (a
// volatile WPQ, durable only after a PCommit).
//
// A kernel's end is no persistency event: it writes nothing back and
// orders nothing, so a persist left dirty in the L2 (or uncommitted in a
// WPQ) by one launch stays so into the next, until a write-back (and a
// PCommit) of a later launch covers it; an L2WB or PCommit covers every
// persist of the earlier launches. The rules below have no launch-boundary
// rule for any model (neither does the crash checker's PMO): hwmodel's
// write-back GPU keeps such persists not durable across launches, and only
// a host event that touches PM (the host flushing the GPU's caches) makes
// them durable without a verb.
//
// The paper's persistency models (SP_wt, EP_C_clwb, ...) are not separate
// machines but disciplines on this one mechanism: where a kernel writes back
// and with which instruction, on either WPQ. Package workloads names them
// (workloads.Scheme) and places its kernels' verbs by them; every scheme
// runs on the same two models, so the crash checker and the timing model
// treat all of them alike.

// WriteBack reports whether PM stores stay in a write-back cache until a
// write-through store, CLWB or L2WB writes them back (WriteBackADR, WriteBackPCT).
func (m Model) WriteBack() bool { return m == WriteBackADR || m == WriteBackPCT }

// VolatileWPQ reports whether the memory controllers' write-pending queues
// are outside the persistence domain, so that a written-back persist is
// durable only after a PCommit (WriteBackPCT).
func (m Model) VolatileWPQ() bool { return m == WriteBackPCT }

// wbVerb is what the re-study's verbs do under m.
func (m Model) wbVerb(k pm.OpKind) Effect {
	switch {
	case m == None:
		return 0
	case m.WriteBack():
		switch k {
		case pm.OpCLWB, pm.OpL2WB:
			return WritesBack
		case pm.OpPCommit:
			if m.VolatileWPQ() {
				return Commits
			}
			return 0
		}
		return Orders | Durable // MemBar
	}
	// Models without write-back caches: the write-back verbs have nothing
	// to do and the membar, which waits for every earlier memory operation,
	// is the model's DFence.
	if k == pm.OpMemBar {
		return Orders | Durable
	}
	return 0
}

// wbLegacy maps the other verbs onto the write-back machine. The
// persistency verbs of the other models (OFence, DFence, PRel, PAcq,
// PBarrier, EpochBarrier, SFence, CFence, PersistBarrier, JoinStrand) act
// as under Epoch, after writing back and committing the thread's own
// persists, so a program written for another model stays crash-consistent;
// block and warp barriers order what is already durable-ordered but write
// nothing back.
func (m Model) wbLegacy(k pm.OpKind, s pm.Scope) Effect {
	const full = Orders | Durable | WritesBack | Commits
	switch k {
	case pm.OpOFence, pm.OpDFence, pm.OpEpochBarrier, pm.OpSFence, pm.OpCFence, pm.OpPersistBarrier, pm.OpJoinStrand:
		return full
	case pm.OpPRel:
		return full | Releases
	case pm.OpPAcq:
		return full | Acquires
	case pm.OpPBarrier:
		if s == pm.Thread {
			return full
		}
		return full | Joins
	case pm.OpSyncThreads, pm.OpSyncWarp:
		return Orders | Joins
	}
	return 0
}
