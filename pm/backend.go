package pm

// Backend decides when each verb completes and when each persist becomes
// durable. It is the one seam between the executors (package scope for GPU
// kernels, package coro for CPU tasks) and the machine below them: the
// functional reference backend, the hwmodel cycle model, the native backend on
// memory-mapped files, and wrappers such as the crash checker's recorder all
// implement it.
//
// The executor applies a verb's visible effect to Memory first and then
// reports it with Op, so a backend sees the program's verbs in the order they
// took effect, each thread's in program order. Calls come from one goroutine
// at a time.
//
// Embed Base to get no-op defaults for the optional parts.
type Backend interface {
	// Name identifies the backend and its configuration, e.g. "functional"
	// or "hwmodel/sbrp/pm-far".
	Name() string
	// Attach binds the backend to a machine's memory. It is called once,
	// before any other call, by NewMachine or Reopen; for Reopen, mem
	// already holds the image's regions. A backend serves one machine:
	// Attach on a backend that is already attached returns an error
	// (wrapping ErrBackend or the backend's own sentinel).
	Attach(mem *Memory) (Caps, error)
	// Host reports a host-side change: a region created or removed, a
	// volatile range allocated or freed, bytes copied in. Host changes to PM
	// (the namespace and CopyIn) are durable when the call returns.
	Host(ev HostEvent)
	// Begin starts a kernel launch or a CPU run.
	Begin(l Launch) error
	// Op reports one verb of agent a after its visible effect. It is called
	// only when Caps.Ops is set. Under a batching backend (Caps.Batch > 0)
	// the executor may report a warp's verbs after the verbs' effects and
	// from its own goroutine rather than the simulated thread's, but always
	// in the order they ran and before the Sync, Step, Residency call or End
	// that follows them; op.Data is valid only during the call.
	Op(a *Agent, op *Op)
	// Sync reports that the agents in group passed a barrier together (a
	// SyncThreads or a block or device PBarrier): none of them proceeds
	// before the last arrived. Called only when Caps.Ops is set.
	Sync(group []*Agent)
	// Step ends a step of GPU warp w: each of its runnable lanes ran up to
	// its next suspension point (or Caps.Batch verbs). It returns the cycle
	// at which the warp can issue again; the executor resumes warps in order
	// of (that cycle, warp id). Called only when Caps.Batch > 0.
	Step(w int) uint64
	// End finishes the run started by Begin and returns its statistics.
	End() (Stats, error)
	// Crash returns the durable image: every PM region as a crash now
	// would leave it. The machine is unusable afterwards.
	Crash() (*Image, error)
}

// Caps is what a backend asks of the executors.
type Caps struct {
	// Ops asks for every verb through Backend.Op and every barrier through
	// Backend.Sync. A backend that needs neither (the functional one) leaves
	// it false and the executors skip the calls.
	Ops bool
	// Batch > 0 makes the executor end a warp's step after Batch verbs per
	// lane at most, and before an atomic that is not a lane's first verb of
	// the step, and call Backend.Step; 0 means the backend has no notion of
	// time and threads run until they must wait.
	Batch int
	// GPU is the simulated GPU's shape and residency limits.
	GPU GPULimits
}

// GPULimits are the shape and residency limits of a simulated GPU.
type GPULimits struct {
	SMs                int // streaming multiprocessors
	WarpSize           int // threads per warp
	MaxThreadsPerSM    int // resident threads per SM
	MaxBlocksPerSM     int // resident blocks per SM
	MaxThreadsPerBlock int // threads in one block
	// SharedPerSM is the shared memory of an SM in bytes: the blocks
	// resident on an SM hold at most this much (scope.WithShared). 0: no
	// limit.
	SharedPerSM int
}

// DefaultGPU returns the shape the functional backend reports: 30 SMs (the
// SBRP baseline GPU of the SBRP paper) with CUDA's per-SM limits of 2048
// threads and 32 blocks and 1024 threads per block, and the SBRP artifact's
// 64 KB of shared memory per SM.
func DefaultGPU() GPULimits {
	return GPULimits{SMs: 30, WarpSize: 32, MaxThreadsPerSM: 2048, MaxBlocksPerSM: 32, MaxThreadsPerBlock: 1024, SharedPerSM: 64 << 10}
}

// HostEventKind is the kind of a HostEvent.
type HostEventKind uint8

// Host event kinds.
const (
	HostCreate HostEventKind = iota // a PM region was created (zero-filled)
	HostRemove                      // a PM region was removed
	HostAlloc                       // a volatile range was allocated (zero-filled)
	HostFree                        // a volatile range was freed
	HostWrite                       // the host copied Size bytes in at Addr
)

// HostEvent is a host-side change reported to Backend.Host.
type HostEvent struct {
	Kind  HostEventKind
	Range Range // the range concerned
	Addr  Addr  // HostWrite: first byte written
	Size  uint64
}

// Launch describes a run reported to Backend.Begin.
type Launch struct {
	Name    string // kernel or run name, for statistics
	Blocks  int    // GPU: blocks in the grid; 0 for a CPU run
	Threads int    // GPU: threads per block; CPU: tasks
	CPU     CPURun // a CPU run's scheduling; zero for a GPU launch
}

// CPURun is what a backend that times a CPU run needs to know of how the
// run schedules its tasks; package coro fills it in from its configuration.
// The zero value is a run at the backend's own switch cost, without strands.
type CPURun struct {
	// SwitchCycles, when not zero, is the cost of one coroutine switch and
	// of the scheduler, in cycles, in place of the backend's own.
	SwitchCycles uint64
	// FreeSwitch makes switches cost nothing; it wins over SwitchCycles.
	FreeSwitch bool
	// Strands sends the run's persists through a strand buffer
	// (StrandWeaver) of StrandWidth strands of StrandDepth entries each;
	// 0 means 4.
	Strands                  bool
	StrandWidth, StrandDepth int
	// Unordered runs the tasks on a core free of every persist-induced
	// stall (COSPlay §5's Unordered, its upper bound): a CLWB never waits
	// for a write-back buffer entry or for a pending write-back of its
	// line; its write-back still happens, in the background.
	Unordered bool
	// Cores is the number of cores the run's tasks run on (0 means 1):
	// each verb runs on core Agent.Unit mod Cores.
	Cores int
}

// Stats are a run's statistics as a backend counts them. Untimed backends
// leave Cycles zero. Backends with more to say return it through their own
// API; these are the counts every backend can give.
type Stats struct {
	Cycles   uint64 // simulated cycles from Begin to End
	Persists uint64 // PM stores (persist records)
}

// Base gives a backend no-op defaults for Host, Begin, Op, Sync, Step and
// End. Embed it and implement Name, Attach and Crash.
type Base struct{}

// Host does nothing.
func (Base) Host(HostEvent) {}

// Begin does nothing.
func (Base) Begin(Launch) error { return nil }

// Op does nothing.
func (Base) Op(*Agent, *Op) {}

// Sync does nothing.
func (Base) Sync([]*Agent) {}

// Step returns 0: no time passes.
func (Base) Step(int) uint64 { return 0 }

// End returns zero statistics.
func (Base) End() (Stats, error) { return Stats{}, nil }

// HostErrer is implemented by backends whose host changes can fail, such as
// the native backend, whose durability is file I/O. After every Host call
// for a PM range (CreateRegion, RemoveRegion, CopyIn into PM) the machine
// calls HostErr and returns its error, wrapped, from the call: nil means
// the change is durable. A backend without it cannot fail a host change.
type HostErrer interface {
	// HostErr returns the error of the last Host call (nil if it is
	// durable) and forgets it.
	HostErr() error
}

// HostWriter is implemented by backends that take a run of host writes in
// one call, such as the native backend, which then checks its health once
// instead of once per write. Machine.CopyInMany uses it when the machine's
// own backend implements it (a wrapper that watches Host must implement it
// too, or its writes go through Host one by one).
type HostWriter interface {
	// HostWrites reports ws, in order, after the machine copied them all
	// into the visible image: each must have the effect of a Host call
	// for a HostWrite of w.Data at w.Addr (volatile ones included, which
	// a backend may ignore), taking the bytes from w.Data, since a later
	// write may overlap an earlier one. It returns the number of writes
	// that are durable and, when that is less than len(ws), the error of
	// the next one (what HostErr would have returned for it); it reports
	// none after that one.
	HostWrites(ws []Write) (int, error)
}

// Storage is implemented by backends that keep the PM namespace and region
// bytes themselves, such as the native backend, whose regions are
// memory-mapped files. For such a backend the machine's PM regions are the
// backend's: NewMachine maps the regions Stored lists, and CreateRegion and
// RemoveRegion go through it. Other backends leave the namespace to the
// machine, which keeps it in memory and in crash images.
type Storage interface {
	// Stored lists the regions the backend holds, in name order.
	Stored() ([]StoredRegion, error)
	// CreateStored makes a zero-filled region and returns its bytes, which
	// become the region's visible image. The namespace change is durable
	// on return.
	CreateStored(name string, base Addr, size uint64) ([]byte, error)
	// RemoveStored removes a region; durable on return.
	RemoveStored(name string) error
}

// StoredRegion is a region held by a Storage backend.
type StoredRegion struct {
	Name string
	Base Addr
	Data []byte // the region's bytes (a mapping for the native backend)
}

// Residency is implemented by timing backends that want to know when warps
// come and go. The executor calls Admit for each warp of a block that
// becomes resident, with the cycle its SM slot became free (when the block
// it replaces finished or was swapped out at a device barrier; 0 for the
// first wave), Resume for each warp of a swapped-out block that comes back
// once the barrier has opened, with its SM (its own, or another with room)
// and the cycle the slot it takes became free, and Retire when a warp's
// last thread has ended. A backend can then start and resume warps at the
// right cycle and know the earliest cycle any live warp may still issue at.
type Residency interface {
	Admit(warp, sm int, at uint64)
	Resume(warp, sm int, at uint64)
	Retire(warp int)
}

// Blocked is what a Waker's Step returns for a warp whose step ended at a
// wait the backend has not timed yet.
const Blocked = ^uint64(0)

// WarpReady is a blocked warp whose wait has ended, and the cycle it is
// ready at.
type WarpReady struct {
	Warp int
	At   uint64
}

// Waker is implemented by timing backends that time some work lazily, in
// time order across warps, because it depends on warps not yet run
// (hwmodel's SBRP persist buffers drain so, and its fences that wait for
// every SM's earlier writes are timed so). A batching executor that
// handles Blocked calls BeginWaking after each Begin; it returns the verbs
// that end a lane's step, so such a verb is the last its warp's step
// times (OpLoad among them: a load of PM, whose far read waits for the
// writes other warps posted before it). Step may then return Blocked for a warp whose step ended at such a
// verb; the executor keeps that warp out of its ready queue and, before
// resuming any warp at cycle c, calls Wake(c), which times the deferred
// work up to c and returns the warps whose waits ended, with their ready
// cycles (valid until the next call). Wake(Blocked) times all of it: no
// warp is ready to run. A backend whose executor never calls BeginWaking
// never returns Blocked.
type Waker interface {
	BeginWaking() (endsStep []OpKind)
	Wake(at uint64) []WarpReady
}

// Deferrer is implemented by a timing backend whose Step may time only the
// first instructions of a warp's step and leave the rest for later, so
// that each instruction is timed when its warp is the earliest of all,
// while the executor still runs a warp Caps.Batch verbs at a time. After
// Step(w), when Untimed(w) reports true, the executor queues w at the
// cycle Step returned even if none of its lanes can run, and when it is
// next due calls Step(w) again without running any lane, until Untimed(w)
// is false; only then does it run w's lanes again.
type Deferrer interface {
	Untimed(w int) bool
}

// DurabilityBound is how many verbs the agents that can run may report,
// after an agent began to wait at a durability point (see Durability),
// before the executor serves the waiting agents, if it has not sooner:
// the default of scope.WithDurabilityBound and coro.WithDurabilityBound.
// 65,536 is far more than a round of every resident agent reaching a
// durability point takes (1,024 GPU threads that each store and fence
// report 2,048 verbs), so group commit still shares one sync among them,
// and few enough that an agent that never waits (a loop of stores, or a
// spin loop that stores while it waits for a waiting agent's flag) holds
// the waiting ones back for a bounded time, a few milliseconds of native
// stores.
const DurabilityBound = 1 << 16

// Durability is implemented by backends whose durability verbs cost an
// I/O that agents reaching them together can share, such as the native
// backend, whose durability point is one sync of its persist log. After
// Op reports a verb, an executor that knows the interface (package scope
// for GPU threads, package coro for CPU tasks) calls WaitDurable; when it
// returns true the verb is a durability point with persists still to make
// durable, and the agent must not go on until MakeDurable has returned.
// The executor may first run the other agents that can run and then call
// MakeDurable once for every agent waiting (group commit), but it serves
// the waiting agents within bounded progress of the others (packages scope
// and coro: once no agent can run, or once the others have run
// DurabilityBound verbs since the first began to wait), so that an agent
// that never waits cannot hold them back for ever. An executor that does
// not know the interface leaves durability to End.
type Durability interface {
	// WaitDurable reports whether op, just reported by a's Op, must wait
	// for MakeDurable before a goes on.
	WaitDurable(a *Agent, op *Op) bool
	// MakeDurable makes every persist reported so far durable. An error
	// fails the run: the waiting verbs never returned.
	MakeDurable() error
}
