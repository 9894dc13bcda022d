package scope

import "github.com/scopedpm/scopedpm/pm"

// The verbs of the GPU persistency re-study (GPGPU-Sim 4.0 re-study of
// "Exploring Memory Persistency Models for GPUs"): a GPU whose L2 is a
// write-back cache in front of the memory controllers' write-pending queues
// (WPQs), with explicit write-back instructions. Every model defines them
// (package persistency): under the re-study's models (persistency.WriteBackADR,
// persistency.WriteBackPCT) they are the only way a plain store reaches PM
// before an eviction; under the other models CLWB, L2WB and PCommit order
// nothing and MemBar acts as a DFence.

// CLWB writes the cache line holding a back to the memory controller if it
// is dirty; a clean line costs nothing. It does not wait: a later MemBar
// waits for the write's acknowledgement.
func (t *Thread) CLWB(a pm.Addr) {
	t.access(a, 1, 1) // fault on a bad address like any other verb
	if e := t.e; e.ops {
		e.op = verbRec{Kind: pm.OpCLWB, Scope: pm.Thread, Addr: a}
	}
	t.report()
}

// L2WB writes back every dirty PM line of the L2, whoever wrote it. The
// thread waits while the L2 is walked; a later MemBar waits for the
// write-backs' acknowledgements.
func (t *Thread) L2WB() { t.verb(pm.OpL2WB, pm.System, 0) }

// PCommit drains the write-pending queues of every memory controller to PM
// (needed only when the WPQs are outside the persistence domain, the
// re-study's "_pct" configurations). A later MemBar waits for its
// acknowledgement, after which every write that had reached a WPQ before
// the PCommit is durable.
func (t *Thread) PCommit() { t.verb(pm.OpPCommit, pm.System, 0) }

// MemBar is the re-study's membar: it returns when the thread's earlier
// memory operations (stores, write-throughs, CLWBs, L2WBs, PCommits) have
// been acknowledged. It orders the thread's written-back persists before
// its later ones.
func (t *Thread) MemBar() { t.verb(pm.OpMemBar, pm.Thread, 0) }

func (t *Thread) storeWT(a pm.Addr, size, v uint64) {
	b, sp := t.access(a, size, size)
	pm.PutLE(b, v)
	e := t.e
	e.wrote(a, size)
	if e.ops {
		e.op = verbRec{Kind: pm.OpStore, WT: true, Space: sp, Size: uint32(size), Addr: a, Value: v}
	}
	t.report()
}

// StoreWT32 stores v at a (4-byte aligned) with a write-through store (the
// re-study's store.wt): the line is written back towards PM at once, as if
// a CLWB followed. It does not wait; a later MemBar does.
func (t *Thread) StoreWT32(a pm.Addr, v uint32) { t.storeWT(a, 4, uint64(v)) }

// StoreWT16 is StoreWT32 for an aligned 2-byte value (st.global.wt.u16).
func (t *Thread) StoreWT16(a pm.Addr, v uint16) { t.storeWT(a, 2, uint64(v)) }

// StoreWT64 is StoreWT32 for an aligned 8-byte value, which persists
// atomically.
func (t *Thread) StoreWT64(a pm.Addr, v uint64) { t.storeWT(a, 8, v) }
