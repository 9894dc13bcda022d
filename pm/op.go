package pm

import "fmt"

// AgentKind says whether an agent is a simulated GPU thread or a CPU task.
type AgentKind uint8

// Agent kinds.
const (
	GPUThread AgentKind = iota // a thread of a kernel launch
	CPUTask                    // a coroutine task on a CPU core
)

// Agent identifies the issuer of a verb. For a GPU thread, ID is the global
// thread id, Block the block id, Warp the global warp id (block-major), Lane
// the lane in the warp and Unit the SM the block is resident on. For a CPU
// task, ID is the task id, Unit the core and the other fields are zero.
//
// Executors keep one Agent per thread for the life of the thread and pass a
// pointer to it with every verb; a backend may use the pointer as a key while
// the launch runs but must copy what it keeps beyond it.
type Agent struct {
	Kind  AgentKind
	ID    int
	Block int
	Warp  int
	Lane  int
	Unit  int
}

// String returns "thread 37 (block 1, warp 1, lane 5)" or "task 2 (core 0)".
func (a *Agent) String() string {
	if a.Kind == CPUTask {
		return fmt.Sprintf("task %d (core %d)", a.ID, a.Unit)
	}
	return fmt.Sprintf("thread %d (block %d, warp %d, lane %d)", a.ID, a.Block, a.Warp, a.Lane)
}

// OpKind is the kind of a verb.
type OpKind uint8

// The verbs an executor reports to a backend.
const (
	OpLoad         OpKind = iota // Addr, Size: a load
	OpStore                      // Addr, Size, Value or Data: a store (a persist if Addr is PM)
	OpAtomic                     // Addr, Size, Scope, Value (the value written), Old (read): a read-modify-write; Wrote says whether it stored
	OpFence                      // Scope: a scoped memory fence (visibility only)
	OpOFence                     // an ordering fence: earlier persists before later ones
	OpDFence                     // a durability fence: earlier persists durable on return
	OpPRel                       // Addr, Scope, Value: a scoped persist release of a 32-bit flag
	OpPAcq                       // Addr, Scope, Value (read): a scoped persist acquire of a 32-bit flag
	OpPBarrier                   // Scope: a scoped persist barrier (scoped persist barrier paper)
	OpEpochBarrier               // a system-scope persist barrier (GPM's gpm_persist)
	OpSyncThreads                // a block execution barrier (arrival)
	OpWork                       // Value: compute cycles the model cannot see
	OpCLWB                       // Addr: write back the cache line holding Addr (CPU task or GPU thread)
	OpSFence                     // CPU store fence: earlier CLWBs complete first
	OpSetCtx                     // Value: select the persist context for later stores (COSPlay)
	OpCFence                     // Value: order the persists of one context (COSPlay)
	OpYield                      // Value: a CPU task yields its core; Value is the switch's cost in cycles
	OpSyncWarp                   // a warp execution barrier (arrival): the lanes reconverge
	OpL2WB                       // write back every dirty PM line of the GPU's L2 (the re-study)
	OpPCommit                    // drain the memory controllers' write-pending queues to PM (the re-study)
	OpMemBar                     // wait until the thread's earlier memory operations are acknowledged (the re-study's membar)

	// StrandWeaver's strand persistency, for CPU tasks.
	OpNewStrand      // Value: later persists of the task belong to a new strand, numbered Value per core
	OpPersistBarrier // order the current strand's earlier persists before its later ones
	OpJoinStrand     // order every strand's earlier persists before all later ones, and wait for them
	numOpKinds
)

var opNames = [...]string{
	OpLoad: "Load", OpStore: "Store", OpAtomic: "Atomic", OpFence: "Fence",
	OpOFence: "OFence", OpDFence: "DFence", OpPRel: "PRel", OpPAcq: "PAcq",
	OpPBarrier: "PBarrier", OpEpochBarrier: "EpochBarrier", OpSyncThreads: "SyncThreads",
	OpWork: "Work", OpCLWB: "CLWB", OpSFence: "SFence", OpSetCtx: "SetCtx",
	OpCFence: "CFence", OpYield: "Yield", OpSyncWarp: "SyncWarp",
	OpL2WB: "L2WB", OpPCommit: "PCommit", OpMemBar: "MemBar",
	OpNewStrand: "NewStrand", OpPersistBarrier: "PersistBarrier", OpJoinStrand: "JoinStrand",
}

// String returns the verb's API name ("OFence", "PRel", ...).
func (k OpKind) String() string {
	if k < numOpKinds {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one verb as reported to a backend. Which fields mean something
// depends on Kind (see the OpKind constants). Data, when set, aliases the
// program's buffer and is valid only during the Backend.Op call.
type Op struct {
	Kind  OpKind
	Scope Scope
	Wrote bool // OpAtomic: whether the atomic stored (a failed CAS does not)
	WT    bool // OpStore: a write-through store (the re-study's store.wt): written back at once
	// Gather marks an OpLoad as one of a group of independent loads
	// (scope.Thread.Gather32): the thread issues the group's loads back to
	// back and waits for their data at its next verb that is not one of
	// them, as a GPU's scoreboard lets independent loads of a warp
	// overlap. Functionally it is a plain load.
	Gather bool
	PM     bool // Addr lies in a PM region: a store here is a persist
	// Shared marks an access to a block's on-chip shared memory
	// (pm.SharedMem): a timing backend times it on the SM, not through the
	// caches. Functionally it is a volatile access like any other.
	Shared bool
	Size   uint32 // bytes accessed
	Addr   Addr
	Value  uint64 // stored or released value, cycles for OpWork, context for OpSetCtx/OpCFence
	Old    uint64 // OpAtomic, OpPAcq: the value read
	Data   []byte // byte-slice loads and stores
}

// String formats the op for traces and error messages.
func (o *Op) String() string {
	switch o.Kind {
	case OpLoad, OpStore:
		if o.WT {
			return fmt.Sprintf("%s.wt %d@%v", o.Kind, o.Size, o.Addr)
		}
		return fmt.Sprintf("%s %d@%v", o.Kind, o.Size, o.Addr)
	case OpAtomic:
		return fmt.Sprintf("Atomic.%s %d@%v old=%d new=%d", o.Scope, o.Size, o.Addr, o.Old, o.Value)
	case OpPRel:
		return fmt.Sprintf("PRel.%s %v=%d", o.Scope, o.Addr, o.Value)
	case OpPAcq:
		return fmt.Sprintf("PAcq.%s %v->%d", o.Scope, o.Addr, o.Old)
	case OpFence, OpPBarrier:
		return fmt.Sprintf("%s.%s", o.Kind, o.Scope)
	case OpWork, OpSetCtx, OpCFence, OpNewStrand:
		return fmt.Sprintf("%s(%d)", o.Kind, o.Value)
	case OpCLWB:
		return fmt.Sprintf("CLWB %v", o.Addr)
	}
	return o.Kind.String()
}
