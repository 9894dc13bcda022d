package hwmodel

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// Batch is the number of verbs per lane in one warp step that the backend
// asks of the executor. The k-th verbs of the lanes of a step form the
// warp's k-th instruction of the step (lanes doing different kinds of verb
// at that position are issued one kind after the other, as divergent
// paths), and the lane accesses of an instruction coalesce into lines.
const Batch = 8

// FineBatch is Batch where a fence waits for every SM's writes
// (gpu.fence_waits_all) and steps are timed whole (gpu.whole_steps). A
// store that waits long for its SM's outstanding-write slot then carries
// its warp's clock far ahead of the others, whose earlier writes are
// booked after its later ones and queue behind them on the link; a fence
// that waits for every earlier write then waits for those too. At Batch,
// 32 SMs of 32 warps streaming to host memory put 2.9 times Little's law
// in front of such a fence; at FineBatch, 1.0. Timed in clock order, 1.0
// at Batch (TestWriteBufferInFrontOfTheLink).
const FineBatch = 2

// faultHooks break a model's promise on purpose, per backend, so that the
// refinement tests can show they fail (refine_internal_test.go sets them).
type faultHooks struct {
	// brokenMerge: under SBRP a store merges into a buffered line even
	// across an order marker of its warp.
	brokenMerge bool
	// earlyFence: under Epoch and GPM a DFence starts its write-backs but
	// returns at once.
	earlyFence bool
	// earlyPCTMemBar: under WriteBackPCT a MemBar waits for its warp's
	// write-backs to reach the WPQs but not for its PCommits to drain
	// them, as if the queues were durable.
	earlyPCTMemBar bool
}

// noAck marks a persist entry that has not been flushed yet.
const noAck = math.MaxUint64

// Stats are the backend's statistics, summed over the launches since
// Attach (Backend.Stats) or for the last launch (Backend.LastLaunch).
type Stats struct {
	Launches     uint64 // kernel launches
	Cycles       uint64 // simulated cycles, Begin to End (including the final L1 flush)
	Retired      uint64 // cycles from Begin until the last warp retired its last verb, before the kernel-end drain (what a clock read in the kernel sees)
	Instructions uint64 // warp instructions (a group of lanes doing one kind of verb in one step)
	Verbs        uint64 // thread verbs

	Persists        uint64 // PM stores (persist records), atomics that wrote PM and PRels of PM flags included
	Flushes         uint64 // lines written towards the persistence point
	CoalescedWrites uint64 // persists that joined a line already pending (same instruction or buffered)

	Loads      uint64 // line accesses by loads, atomics and acquires
	SmemPasses uint64 // shared-memory passes: one per distinct word of an access's busiest bank
	L1Misses   uint64 // of which missed in the L1
	L1PMMisses uint64 // of which missed in the L1 on PM data
	L2Misses   uint64 // of which missed in the L2 too

	DRAMReadBytes uint64 // bytes read from device memory
	NVMReadBytes  uint64 // bytes read from NVM
	NVMWriteBytes uint64 // bytes written to NVM
	PCIeBytes     uint64 // bytes over PCIe (both directions)

	Stalls StallStats // warp stall cycles by cause
}

// StallStats are warp stall cycles by cause: cycles a warp could not issue
// its next instruction because of the named wait (memory latency of loads
// is counted under Memory).
type StallStats struct {
	Memory     uint64 // loads and atomics waiting for data
	Strict     uint64 // Strict: PM stores waiting for their ack
	BufferFull uint64 // SBRP: persist buffer full
	Evict      uint64 // SBRP: evicting a buffered PM line had to wait for its order
	NVWFull    uint64 // ScopedBarrier: NVW-FIFO full
	Epoch      uint64 // Epoch/GPM: write-back and acks at an ordering verb
	DFence     uint64 // DFence and EpochBarrier waiting for durability
	Release    uint64 // device-scope PRel (and ScopedBarrier PRel) waiting for durability
	PBarrier   uint64 // PBarrier waiting for drains
	Barrier    uint64 // waiting for other warps at a barrier
	Work       uint64 // Work(cycles), and waiting for the SM's ALUs to take it
}

// LanesPerInstruction returns the mean number of lanes that issued each
// warp instruction: the warp size when lanes stay converged, less when
// divergence splits instructions.
func (s *Stats) LanesPerInstruction() float64 {
	if s.Instructions == 0 {
		return 0
	}
	return float64(s.Verbs) / float64(s.Instructions)
}

func (s *Stats) add(o *Stats) {
	s.Launches += o.Launches
	s.Cycles += o.Cycles
	s.Retired += o.Retired
	s.Instructions += o.Instructions
	s.Verbs += o.Verbs
	s.Persists += o.Persists
	s.Flushes += o.Flushes
	s.CoalescedWrites += o.CoalescedWrites
	s.Loads += o.Loads
	s.SmemPasses += o.SmemPasses
	s.L1Misses += o.L1Misses
	s.L1PMMisses += o.L1PMMisses
	s.L2Misses += o.L2Misses
	s.DRAMReadBytes += o.DRAMReadBytes
	s.NVMReadBytes += o.NVMReadBytes
	s.NVMWriteBytes += o.NVMWriteBytes
	s.PCIeBytes += o.PCIeBytes
	a, b := &s.Stalls, &o.Stalls
	a.Memory += b.Memory
	a.Strict += b.Strict
	a.BufferFull += b.BufferFull
	a.Evict += b.Evict
	a.NVWFull += b.NVWFull
	a.Epoch += b.Epoch
	a.DFence += b.DFence
	a.Release += b.Release
	a.PBarrier += b.PBarrier
	a.Barrier += b.Barrier
	a.Work += b.Work
}

// Event is one warp instruction as the model timed it, passed to the
// function set with SetTrace.
type Event struct {
	Warp  int       // global warp id of the launch
	SM    int       // SM the warp ran on
	Kind  pm.OpKind // the verb
	Scope pm.Scope  // its scope, where it has one
	Lanes int       // lanes that issued it
	Issue uint64    // cycle it issued
	Done  uint64    // cycle the warp can issue again
}

// entry is one line write towards the persistence point: an SBRP persist
// buffer entry, a dirty PM line of an L1, or a write-through.
type entry struct {
	line  uint64
	dirty uint64 // Epoch/GPM/None, ScopedBarrier and the re-study's write-back models: cycle of the first store into the dirty line
	last  uint64 // ScopedBarrier: cycle of the latest store into it
	start uint64 // cycle its flush started (noAck: not yet)
	pbi   int64  // SBRP: its item in its SM's persist buffer
	ack   uint64 // cycle it is durable (noAck: not yet)
	// sectors are the line's written sectors (persist.sector_bytes), one
	// bit each; 0 sends the whole line.
	sectors uint64
}

// record is one persist: bytes at an address, durable with its entry.
// release is the last PRel of a flag: its value and the cycle it was
// visible at.
type release struct{ value, at uint64 }

// pendOp is a verb of the warp being stepped.
//
// The fields are ordered so that the struct packs into 56 bytes: the
// steps' ops are copied and scanned several times (Op, sortPending,
// timePending).
type pendOp struct {
	kind  pm.OpKind
	scope pm.Scope
	pm    bool
	// shared: an access to the block's shared memory (pm.Op.Shared),
	// timed on the SM (sharedAccess).
	shared bool
	wrote  bool
	done   bool
	// gather: a load of a group of independent loads (pm.Op.Gather).
	gather bool
	size   uint32
	idx    int32 // the lane's verb index in the step
	addr   pm.Addr
	value  uint64
	old    uint64
	rec0   int32 // first record of a persist (records rec0..rec1-1)
	rec1   int32
	lane   int32
	seq    int32 // the verb's place among the launch's Op calls
}

type warpState struct {
	init    bool
	retired bool // the engine said its last thread ended
	id      int32
	sm      int
	clock   uint64 // the cycle the warp can issue again
	lastAck uint64 // latest ack of this warp's flushed persists
	front   uint64 // ordering frontier: the warp's later flushes start no earlier
	// SBRP (pbuffer.go): the warp's latest persist-buffer item (a persist
	// of its or one it merged into, or an ordering point), its latest
	// ordering point, and the frontier its drained ordering points set.
	lastItem, orderItem int64
	drainFront          uint64
	// wait is a DFence or epoch barrier whose end the persist buffers'
	// drain decides, or a fence that waits for every SM's earlier writes
	// (pm.Waker): the warp is blocked until the wait's item of its SM's
	// buffer has left it, or until every other warp has caught up with
	// the fence.
	wait  *pbWait
	stamp uint64 // Sync de-duplication
	bar   pm.OpKind
	barS  pm.Scope
	// owned are the dirty PM entries the warp stored into since its last
	// Epoch/GPM fence (persist.epoch_own_acks).
	owned []int32
	// rsOwn are, under the re-study's write-back models, the L2 lines the
	// warp stored into since it last wrote them back (CLWB, L2WB), the
	// latest few (writeback.go).
	rsOwn []ownLine
	// relDone is when the dirty volatile lines a persist barrier of the
	// warp wrote to the L2 are there (sfifo.go); its barrier waits for it.
	relDone uint64
	// loadsBack is when the data of the warp's gathered loads is back:
	// its next instruction that is not a gathered load issues no earlier.
	loadsBack uint64
	// rest holds the ops of the warp's last step not timed yet, from
	// restAt on (timed in clock order), with the step's first record and
	// whether it accessed shared memory.
	rest        []pendOp
	restAt      int
	restRec0    int32
	restShared  bool
	restCouples bool
	// bw is a barrier the warp passed that is not applied yet (syncWait);
	// bwTimed: the warp's ops up to it are timed; bwBlocked: Step returned
	// pm.Blocked for it until the barrier applies. ready is the cycle Step
	// last returned for it.
	bw        *syncWait
	bwTimed   bool
	bwBlocked bool
	ready     uint64
}

// syncWait is a barrier of one block that its members passed (Sync)
// before all their instructions up to it were timed: it is applied once
// they are, and the members' later instructions wait for it.
type syncWait struct {
	agents []pm.Agent
	ptrs   []*pm.Agent
	warps  []int32 // the members' warps, each once
	seqs   []int32 // with SetVerbTimes: per agent, its barrier verb
	kind   pm.OpKind
	sc     pm.Scope
	left   int // members whose ops up to the barrier are not all timed
}

type smState struct {
	l1      *cache
	issue   resource   // warp schedulers: Schedulers instructions per cycle
	alu     resource   // the schedulers' execution units: Schedulers cycles of Work per cycle
	smem    resource   // shared memory: one bank-conflict pass per cycle
	lsu     []resource // per scheduler, its load/store path: gpu.lsu_line_cycles a line (nil: no such limit)
	log     []span     // recent flushes of the SM (those not known to be over)
	pruneAt int
	pb      pbState          // SBRP: the persist buffer's drain (pbuffer.go)
	pbLine  map[uint64]int32 // SBRP: newest buffer entry per line
	dirty   []int32          // Epoch/GPM/None: dirty PM entries in order
	wc      []wcLine         // mem.sfifo_l1: the write-combining L1's dirty volatile lines (sfifo.go)
}

// span is one flush: it is outstanding from start until ack. dirty is when
// its entry was first stored to (Epoch, GPM and None's L1 entries; 0 for
// the others).
type span struct{ start, ack, dirty uint64 }

// ackDirtyBy returns the latest ack among the SM's flushes of entries first
// stored to by cycle t, whenever they started: a line a warp dirtied
// before t can have been written back, from a later cycle, by a warp the
// model ran ahead of the one fencing at t.
func (s *smState) ackDirtyBy(t uint64) uint64 {
	var m uint64
	for _, f := range s.log {
		if f.dirty <= t {
			m = max(m, f.ack)
		}
	}
	return m
}

// ackBy returns the latest ack among the SM's flushes started by cycle t.
func (s *smState) ackBy(t uint64) uint64 {
	var m uint64
	for _, f := range s.log {
		if f.start <= t {
			m = max(m, f.ack)
		}
	}
	return m
}

// Backend is the hwmodel backend. It is not safe for concurrent use; the
// executors call it from one goroutine.
type Backend struct {
	pm.Base
	cfg Config
	// cpuRun is set during a CPU run (Begin with no blocks); cpu times it
	// (cpu.go).
	cpuRun bool
	cpu    *cpuCore
	model  Model

	mem      *pm.Memory
	attached bool
	running  bool
	crashed  bool

	lineShift           uint
	lineBytes           uint64
	l1Lat, l2Lat, nvmWr uint64
	uncachedFar         bool // pcie.uncached_reads with PM far
	pmAsDRAM            bool

	ms *memSystem // the memory system every model's traffic crosses (memsys.go)
	l2 *cache
	// l2Dirty holds, per L2 way, the written sectors of a dirty volatile
	// line (bit 0 alone without sectors), 0 when clean.
	l2Dirty    []uint64
	dirtyWays  []int32 // the ways l2Dirty marked since the last flushL2 (some since cleaned)
	dirtyLimit int     // the length at which dirtyWays drops its cleaned ways
	sms        []smState
	warps      []warpState
	now        uint64         // issue cycle of the latest instruction
	start, end uint64         // of the current or last launch
	drained    uint64         // when the last launch's persists are all durable
	popTime    uint64         // latest cycle the engine resumed a warp at
	firstWave  int            // warps of the blocks resident from the launch's start
	globalAck  uint64         // latest ack of any flush
	pbQueue    pbHeap         // SBRP: SMs by their persist buffer head's start (pbuffer.go)
	woken      []pm.WarpReady // warps the drain woke since the last Wake
	fenceWait  []int32        // warps blocked at a fence that waits for every SM (fenceAll)
	endsStep   uint64         // bit k: a verb of kind k ends its lane's step (BeginWaking); 0: the executor does not handle pm.Blocked this launch
	wokenOut   []pm.WarpReady
	sent       uint64 // set by flush: when the write entered its PM queue
	left       uint64 // set by flush: when the write's bytes left the SM
	first      uint64 // the launch's first issue cycle: its start plus gpu.launch_latency_cycles
	steps      uint64
	batch      int  // verbs per lane in a step: gpu.step_verbs, else Batch, or FineBatch under gpu.fence_waits_all with gpu.whole_steps
	keepAll    bool // tests only: no periodic trim, so every write's completion stays readable after the run
	syncStamp  uint64

	pending []pendOp
	spare   []pendOp
	inOrder bool       // not gpu.whole_steps: Step times a step's instructions one at a time, in clock order (pm.Deferrer)
	bufs    [][]pendOp // empty pending buffers for steps left partly untimed
	// untimedW maps an address to the warp whose untimed ops (ws.rest)
	// write it by an atomic or a PRel: an atomic or PAcq of another warp
	// that reads it is timed only after them (flushReaders).
	untimedW map[pm.Addr]int32
	swFree   []*syncWait // syncWaits applied, for reuse
	blockOK  bool        // the executor handles pm.Blocked this launch (BeginWaking)
	opSeq    int32       // Op calls so far in the launch
	stepRec0 int32       // the first record of the step being gathered
	verbDone []uint64    // with SetVerbTimes: per Op call of the launch, the cycle it returned
	retSeqs  []int32
	barSeq   []int32 // with SetVerbTimes: per thread, its last barrier verb
	timeVerb bool
	laneIdx  []int32 // verbs per lane so far in the step
	count    []int   // sortPending's counts
	inStep   bool    // a step has begun (an Op came) and not ended (Step)
	curWarp  int     // the warp the pending ops belong to
	lines    []uint64
	lsuSlot  uint64   // gpu.lsu_line_cycles, rounded up
	lineMask []uint64 // persistOps: the sectors written per line of lines; loads: the words asked for (loadWords)
	// sharedAccess's scratch: the words an instruction touches, and per
	// bank its first distinct word (-1: none) and their count, per word
	// the next of its bank; stepShared: a pending op of the step is a
	// shared-memory access (most steps have none, and skip the scan).
	smemWords  []uint64
	smemBanks  []int32
	smemCount  []int32
	smemNext   []int32
	stepShared bool
	// stepCouples: a pending op of the step couples warps (couples).
	stepCouples bool
	lineEnt     []int32
	secShift    uint // log2 of persist.sector_bytes; 0: whole lines
	entries     entryLog
	records     recordLog
	applied     int // records before this index are in durable
	relFront    map[pm.Addr]uint64
	released    map[pm.Addr]release // the last PRel of each flag
	atomics     map[pm.Addr]release // per address, the value and completion of the last atomic that wrote it
	durable     *pm.Image           // nil: none kept (KeepNoImage)
	noImage     bool                // KeepNoImage
	floor       uint64              // CrashAt accepts cycles >= floor

	st, last Stats
	trace    func(Event)
	rs       *writeBackHW // the re-study's write-back models (writeback.go), else nil
	pol      policy       // the persistency model's policy (policy.go)
	hooks    faultHooks   // tests only: broken promises
}

// New returns a backend for the machine cfg under model. It validates cfg.
// A machine whose PM is timed as device memory (Config.Persist.None, the
// dram preset) does no persist work and takes None only: New returns an
// error wrapping ErrPMAsDRAM for any other model.
func New(cfg Config, model Model) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !slices.Contains(timed, model) && !model.WriteBack() {
		return nil, fmt.Errorf("%w: %v (hwmodel times %v)", ErrModel, model, timed)
	}
	if cfg.Persist.None && model != None {
		return nil, fmt.Errorf("%w: configuration %q with model %v (pass hwmodel.None)", ErrPMAsDRAM, cfg.Name, model)
	}
	b := &Backend{cfg: cfg, model: model, batch: Batch, inOrder: !cfg.GPU.WholeSteps}
	if cfg.GPU.FenceWaitsAll && cfg.GPU.WholeSteps {
		b.batch = FineBatch
	}
	if cfg.GPU.StepVerbs > 0 {
		b.batch = cfg.GPU.StepVerbs
	}
	if model.WriteBack() {
		b.rs = newWriteBackHW(cfg, model.VolatileWPQ())
	}
	b.lineBytes = uint64(cfg.L1.LineBytes)
	for uint64(1)<<b.lineShift < b.lineBytes {
		b.lineShift++
	}
	if sb := cfg.Persist.SectorBytes; sb > 0 {
		b.secShift = uint(bits.TrailingZeros(uint(sb)))
	}
	b.l1Lat, b.l2Lat = uint64(cfg.L1.LatencyCycles), uint64(cfg.L2.LatencyCycles)
	b.uncachedFar = cfg.PCIe.PMFar && cfg.PCIe.UncachedReads && !cfg.Persist.None
	b.nvmWr = uint64(cfg.NVM.WriteLatencyCycles)
	b.pmAsDRAM = cfg.Persist.None
	b.ms = newMemSystem(cfg, b.lineShift)
	if b.pmAsDRAM {
		b.ms.far = false
	}
	b.l2 = newCache(cfg.L2)
	b.l2Dirty = make([]uint64, len(b.l2.tag))
	b.pol = newPolicy(b)
	b.sms = make([]smState, cfg.GPU.SMs)
	b.lsuSlot = uint64(math.Ceil(cfg.GPU.LSULineCycles))
	for i := range b.sms {
		b.sms[i] = smState{
			l1: newCache(cfg.L1), issue: perCycle(cfg.GPU.Schedulers), alu: perCycle(cfg.GPU.Schedulers), smem: perCycle(1),
			pbLine: map[uint64]int32{},
		}
		if c := cfg.GPU.LSULineCycles; c > 0 {
			b.sms[i].lsu = make([]resource, cfg.GPU.Schedulers)
			for k := range b.sms[i].lsu {
				b.sms[i].lsu[k] = perCycles(c)
			}
		}
	}
	b.relFront = map[pm.Addr]uint64{}
	b.released = map[pm.Addr]release{}
	b.atomics = map[pm.Addr]release{}
	return b, nil
}

// Config returns the backend's configuration.
func (b *Backend) Config() Config { return b.cfg }

// Model returns the backend's persistency model (None on a machine with
// persist.none set: New takes no other).
func (b *Backend) Model() Model { return b.model }

// Name returns "hwmodel/<model>/<config name>".
func (b *Backend) Name() string { return "hwmodel/" + b.model.String() + "/" + b.cfg.Name }

// SetTrace makes the backend call fn for every warp instruction it times;
// nil turns tracing off.
func (b *Backend) SetTrace(fn func(Event)) { b.trace = fn }

// Stats returns the statistics summed over every launch since Attach.
func (b *Backend) Stats() Stats { return b.st }

// LastLaunch returns the statistics of the last finished launch.
func (b *Backend) LastLaunch() Stats { return b.last }

// Now returns the current cycle: during a launch, the latest issue cycle;
// during a CPU run, the CPU core's; between launches, the cycle by which
// the last launch's persists are all durable (the host waits for the
// device to drain).
func (b *Backend) Now() uint64 {
	if b.cpuRun {
		return b.cpu.now()
	}
	if b.running {
		return b.now
	}
	return b.drained
}

// LastStart returns the cycle at which the current or last launch began;
// CrashAt accepts no earlier cycle.
func (b *Backend) LastStart() uint64 { return b.start }

// LaunchLatency returns the cycles every GPU launch waits before its first
// instruction (gpu.launch_latency_cycles).
func (b *Backend) LaunchLatency() uint64 { return uint64(b.cfg.GPU.LaunchLatencyCycles) }

// KeepNoImage makes the backend keep no durable image: it neither copies
// PM at Attach nor the bytes of each persist, and applies none, so a run
// that will never crash (a timing measurement) takes about half the memory
// a PM region needs and none of the copying. Timing is unchanged, and so
// is Durability (it reports addresses, sizes and cycles); CrashAt and
// Crash fail with ErrNoImage. It must be called before Attach (ErrState).
func (b *Backend) KeepNoImage() error {
	if b.attached {
		return fmt.Errorf("%w: KeepNoImage after Attach", ErrState)
	}
	b.noImage = true
	return nil
}

// Attach binds the backend to mem and asks for every verb, one instruction
// per step.
func (b *Backend) Attach(mem *pm.Memory) (pm.Caps, error) {
	if b.attached {
		return pm.Caps{}, fmt.Errorf("%w: attached twice", ErrState)
	}
	b.mem, b.attached = mem, true
	if !b.noImage {
		b.durable = mem.Snapshot()
	}
	return pm.Caps{Ops: true, Batch: b.batch, GPU: b.cfg.GPULimits()}, nil
}

// Host applies host-side changes to the durable image: regions created or
// removed and bytes copied into PM are durable at once.
func (b *Backend) Host(ev pm.HostEvent) {
	if !b.attached || b.crashed {
		return
	}
	if b.rs != nil && (ev.Kind == pm.HostCreate || ev.Kind == pm.HostRemove || ev.Kind == pm.HostWrite && ev.Range.Kind == pm.PMem) {
		b.wbHostFlush() // the host flushes the GPU's caches (writeback.go)
	}
	switch ev.Kind {
	case pm.HostCreate:
		b.compact()
		if b.durable == nil {
			return
		}
		r := ev.Range
		regs := append(b.durable.Regions, pm.RegionImage{Name: r.Name, Base: r.Base, Data: make([]byte, r.Size)})
		slices.SortFunc(regs, func(x, y pm.RegionImage) int {
			switch {
			case x.Name < y.Name:
				return -1
			case x.Name > y.Name:
				return 1
			}
			return 0
		})
		b.durable.Regions = regs
	case pm.HostRemove:
		b.compact()
		if b.durable == nil {
			return
		}
		b.durable.Regions = slices.DeleteFunc(b.durable.Regions, func(x pm.RegionImage) bool { return x.Name == ev.Range.Name })
	case pm.HostWrite:
		if ev.Range.Kind != pm.PMem {
			return
		}
		b.compact()
		if b.durable == nil {
			return
		}
		data, _, err := b.mem.Bytes(ev.Addr, ev.Size, 1)
		if err == nil {
			_ = b.durable.Write(ev.Addr, data) // the range is one of the image's regions
		}
	}
}

// Begin starts a launch at the end of the previous one.
func (b *Backend) Begin(l pm.Launch) error {
	switch {
	case !b.attached || b.crashed:
		return fmt.Errorf("%w: Begin before Attach or after Crash", ErrState)
	case b.running:
		return fmt.Errorf("%w: Begin during a launch", ErrState)
	case l.Blocks == 0 && l.Threads > 0:
		// A CPU run (package coro), timed by the CPU core (cpu.go). It
		// is host code: under the re-study's models the GPU's caches are
		// flushed first (writeback.go).
		if b.rs != nil {
			b.wbHostFlush()
		}
		b.cpuBegin(l.CPU)
		return nil
	case l.Blocks <= 0:
		return fmt.Errorf("%w: a run of %d blocks", ErrGeometry, l.Blocks)
	case l.Threads <= 0 || l.Threads > b.cfg.GPU.MaxThreadsPerBlock:
		return fmt.Errorf("%w: %d threads per block, gpu.max_threads_per_block is %d", ErrGeometry, l.Threads, b.cfg.GPU.MaxThreadsPerBlock)
	}
	b.compact()
	b.running = true
	// The warps issue from first: the launch latency after the launch.
	first := b.drained + uint64(b.cfg.GPU.LaunchLatencyCycles)
	b.start, b.now, b.popTime, b.first = b.drained, b.drained, first, first
	if l.Blocks > 0 && l.Threads > 0 {
		// The blocks resident from the start, and their warps.
		g := b.cfg.GPU
		perSM := min(g.MaxBlocksPerSM, g.MaxThreadsPerSM/l.Threads)
		wave := min(l.Blocks, perSM*g.SMs)
		b.firstWave = wave * ((l.Threads + g.WarpSize - 1) / g.WarpSize)
	}
	b.floor = b.start
	b.warps = b.warps[:0]
	b.last = Stats{Launches: 1}
	b.opSeq, b.verbDone = 0, b.verbDone[:0]
	for i := range b.barSeq {
		b.barSeq[i] = -1
	}
	for i := range b.sms {
		s := &b.sms[i]
		s.l1.invalidate()
		clear(s.pbLine)
		s.dirty = s.dirty[:0]
		s.wc = s.wc[:0]
		s.pb.reset()
	}
	clear(b.relFront)
	b.pbQueue = pbHeap{keys: b.pbQueue.keys[:0], n: len(b.sms)}
	b.woken, b.fenceWait, b.endsStep, b.blockOK = b.woken[:0], b.fenceWait[:0], 0, false
	clear(b.released)
	clear(b.atomics)
	b.pending = b.pending[:0]
	clear(b.untimedW)
	b.stepShared = false
	b.ms.reset(b.start)
	b.ms.drained = b.start
	for i := range b.sms {
		b.sms[i].issue.reset(b.start)
		b.sms[i].alu.reset(b.start)
		b.sms[i].smem.reset(b.start)
		for k := range b.sms[i].lsu {
			b.sms[i].lsu[k].reset(b.start)
		}
		b.sms[i].log = b.sms[i].log[:0]
	}
	if b.rs != nil {
		b.wbBegin()
	}
	return nil
}

// warp returns the state of warp w, creating it at the current cycle.
func (b *Backend) warp(w int) *warpState {
	if w >= len(b.warps) {
		b.warps = slices.Grow(b.warps, w+1-len(b.warps))
		b.warps = b.warps[:w+1]
	}
	ws := &b.warps[w]
	if !ws.init {
		// A warp starts when its block became resident: at the launch for
		// the first wave of blocks, else at the engine's current time (a
		// block retired and freed the slot).
		at := b.popTime
		if w < b.firstWave {
			at = b.first
		}
		*ws = b.newWarp(w, 0, at)
	}
	return ws
}

// Op records one verb of the warp being stepped; Step times them.
func (b *Backend) Op(a *pm.Agent, op *pm.Op) {
	if b.cpuRun && a.Kind == pm.CPUTask {
		done := b.cpuOp(a, op)
		if b.timeVerb {
			b.verbDone = append(b.verbDone, done)
		}
		return
	}
	seq := b.opSeq
	b.opSeq++
	if b.timeVerb {
		b.verbDone = append(b.verbDone, math.MaxUint64)
	}
	if !b.running || a.Warp < 0 {
		return
	}
	ws := b.warp(a.Warp)
	if !b.inStep {
		// The first verb of a step: the engine resumed this warp at its
		// clock, which is the engine's current time.
		b.inStep = true
		b.popTime = max(b.popTime, ws.clock)
		b.stepRec0 = int32(b.records.len())
	}
	ws.sm = max(a.Unit, 0) % len(b.sms)
	sc := op.Scope
	// The op is made in place at the end of pending, with its lane set
	// at once: writerIdx, below, skips the lane's own ops.
	lane := a.Lane
	b.pending = append(b.pending, pendOp{kind: op.Kind, scope: sc, pm: op.PM && !b.pmAsDRAM, shared: op.Shared && !op.PM, wrote: op.Wrote, addr: op.Addr, size: op.Size, value: op.Value, old: op.Old, rec0: -1, rec1: -1,
		gather: op.Gather && op.Kind == pm.OpLoad && !b.cfg.GPU.SerialLoads, lane: int32(lane), seq: seq})
	p := &b.pending[len(b.pending)-1]
	if op.WT {
		p.scope = pm.System // a write-through store is an instruction of its own
	}
	switch op.Kind {
	case pm.OpStore, pm.OpAtomic, pm.OpPRel:
		if op.PM && (op.Kind != pm.OpAtomic || op.Wrote) {
			p.rec0 = int32(b.records.len())
			b.addRecords(op)
			p.rec1 = int32(b.records.len())
		}
	case pm.OpSyncThreads, pm.OpPBarrier, pm.OpSyncWarp:
		ws.bar, ws.barS = op.Kind, op.Scope
		if b.timeVerb {
			// It returns when its barrier opens (Sync).
			for a.ID >= len(b.barSeq) {
				b.barSeq = append(b.barSeq, -1)
			}
			b.barSeq[a.ID] = seq
		}
	}
	if lane >= len(b.laneIdx) {
		b.laneIdx = append(b.laneIdx, make([]int32, lane+1-len(b.laneIdx))...)
	}
	if op.Kind == pm.OpAtomic || op.Kind == pm.OpPAcq {
		// A lane that reads what another lane of the warp wrote in this
		// step (a lock handed from lane to lane) issues after that write:
		// the lanes took turns, as a divergent warp does. An atomic that
		// read what the same instruction's atomic of another lane wrote
		// (lanes adding to one counter) stays in that instruction: the
		// memory serialises the lanes' atomics a cycle apart (instruction).
		d, atomic, v := b.writerIdx(op.Addr, lane)
		chained := op.Kind == pm.OpAtomic && atomic && v == op.Old && d == b.laneIdx[lane]
		if d >= b.laneIdx[lane] && !chained {
			b.laneIdx[lane] = d + 1
		}
	}
	p.idx = b.laneIdx[lane]
	b.laneIdx[lane]++
	b.curWarp = a.Warp
	b.stepShared = b.stepShared || p.shared
	b.stepCouples = b.stepCouples || couples(op.Kind)
}

// writerIdx returns the verb index of the latest pending write to addr by
// another lane than lane in the current step (or -1), whether it was an
// atomic, and the value it wrote.
func (b *Backend) writerIdx(addr pm.Addr, lane int) (idx int32, atomic bool, v uint64) {
	for i := len(b.pending) - 1; i >= 0; i-- {
		q := &b.pending[i]
		if q.addr != addr || int(q.lane) == lane {
			continue
		}
		if q.kind == pm.OpStore || q.kind == pm.OpPRel || q.kind == pm.OpAtomic && q.wrote {
			return q.idx, q.kind == pm.OpAtomic, q.value
		}
	}
	return -1, false, 0
}

// opBytes returns the bytes a persist writes: op.Data, or op.Value's
// little-endian bytes in buf.
func opBytes(op *pm.Op, buf *[8]byte) []byte {
	if op.Data != nil {
		return op.Data
	}
	n := min(int(op.Size), 8)
	switch n {
	case 1, 2, 4, 8:
		pm.PutLE(buf[:n], op.Value)
	}
	return buf[:n]
}

// addRecords copies a persist into the arena, one record per line.
func (b *Backend) addRecords(op *pm.Op) {
	var buf [8]byte
	data := opBytes(op, &buf)
	a := op.Addr
	for len(data) > 0 {
		n := min(uint64(len(data)), b.lineBytes-uint64(a)&(b.lineBytes-1))
		b.records.add(a, data[:n], b.durable != nil)
		a += pm.Addr(n)
		data = data[n:]
		b.last.Persists++
	}
}

// Step times the instructions of warp w gathered since its last step and
// returns the cycle at which it can issue again. Unless gpu.whole_steps,
// it times one instruction and keeps the rest for the warp's next Step
// (pm.Deferrer), and a warp past a barrier not yet applied (syncWait)
// gets pm.Blocked until it is.
func (b *Backend) Step(w int) uint64 {
	if !b.running {
		return b.end
	}
	ws := b.warp(w)
	b.inStep = false
	if ws.bw != nil && ws.bwTimed {
		// Past a barrier not applied yet: its ops wait for it.
		if len(b.pending) > 0 {
			if ws.rest != nil {
				panic("hwmodel: a warp ran again with ops of its last step untimed")
			}
			b.preparePending()
			b.stash(w, ws, 0)
		}
		ws.bwBlocked = true // until the barrier applies (arrivalTimed)
		return pm.Blocked
	}
	lo := 0
	if ws.rest != nil {
		if ws.clock > ws.ready {
			return b.readyAt(ws, ws.clock) // a barrier moved its clock: due later
		}
		// The rest of an earlier step, now that the warp is due again.
		b.popTime = max(b.popTime, ws.clock)
		lo = ws.restAt
		b.resumeRest(w, ws)
	} else {
		b.preparePending()
	}
	b.timeFrom(w, ws, lo, b.inOrder)
	if ws.rest != nil {
		return b.readyAt(ws, ws.clock) // more to time when it is due (Untimed)
	}
	b.arrivalTimed(ws)
	if ws.wait != nil {
		if ws.wait.reads != nil {
			b.stepped() // a run of far loads blocks at every one
		}
		if ws.wait.fence {
			b.fenceWait = append(b.fenceWait, ws.id)
			return pm.Blocked
		}
		if !b.pbBlock(ws) {
			return pm.Blocked
		}
	}
	b.stepped()
	return b.readyAt(ws, ws.clock)
}

// readyAt notes and returns the cycle Step returns for warp ws.
func (b *Backend) readyAt(ws *warpState, at uint64) uint64 {
	ws.ready = at
	return at
}

// stepped counts a step and trims the calendars every 4,096.
func (b *Backend) stepped() {
	if b.steps++; b.steps%4096 == 0 && !b.keepAll {
		b.trim()
	}
}

// sortPending orders the pending ops by verb index, keeping the order of
// ops with the same index (a counting sort).
func (b *Backend) sortPending() {
	sorted := true
	most := int32(0)
	for i := range b.pending {
		most = max(most, b.pending[i].idx)
		if i > 0 && b.pending[i].idx < b.pending[i-1].idx {
			sorted = false
		}
	}
	if sorted {
		return
	}
	count := b.count[:0]
	for range most + 2 {
		count = append(count, 0)
	}
	b.count = count
	for i := range b.pending {
		count[b.pending[i].idx+1]++
	}
	for k := 1; k < len(count); k++ {
		count[k] += count[k-1]
	}
	// Scatter into the spare array and swap: one copy of the ops.
	out := slices.Grow(b.spare[:0], len(b.pending))[:len(b.pending)]
	for i := range b.pending {
		p := &b.pending[i]
		out[count[p.idx]] = *p
		count[p.idx]++
	}
	b.pending, b.spare = out, b.pending
}

// convergeAtStepEnd gives the verbs that end their lane's step
// (BeginWaking) the index after every other verb of the step, so that the
// lanes reaching one such verb are timed as one instruction, as a warp
// issues a fence once for all its lanes, however many verbs each lane ran
// before it (one lane's store before a fence of the whole warp is one
// store and one fence, not two fences).
func (b *Backend) convergeAtStepEnd() {
	if b.endsStep == 0 {
		return
	}
	last, any := int32(0), false
	for i := range b.pending {
		if p := &b.pending[i]; !b.endsItsStep(p) {
			last = max(last, p.idx)
		} else {
			any = true
		}
	}
	if !any {
		return
	}
	for i := range b.pending {
		if p := &b.pending[i]; b.endsItsStep(p) {
			p.idx = last + 1
		}
	}
}

// endsItsStep reports whether op p ended its lane's step (BeginWaking): a
// verb of a kind that does, a load only where it read PM.
func (b *Backend) endsItsStep(p *pendOp) bool {
	return b.endsStep&(1<<uint(p.kind)) != 0 && (p.kind != pm.OpLoad || p.pm && !p.shared)
}

// Untimed reports whether warp w has ops of its last step that Step has
// not timed yet (pm.Deferrer).
func (b *Backend) Untimed(w int) bool {
	return w < len(b.warps) && b.warps[w].rest != nil
}

// timePending times the pending ops of warp w as instructions: the k-th
// verbs of the lanes together.
func (b *Backend) timePending(w int, ws *warpState) {
	b.preparePending()
	b.timeFrom(w, ws, 0, false)
}

// preparePending makes the gathered ops of a step into instructions:
// ordered by verb index, the verbs that end their lane's step last.
func (b *Backend) preparePending() {
	if len(b.pending) == 0 {
		return
	}
	b.convergeAtStepEnd()
	b.sortPending()
	clear(b.laneIdx)
}

// resumeRest makes the untimed rest of warp w's last step pending again.
func (b *Backend) resumeRest(w int, ws *warpState) {
	if len(b.pending) > 0 {
		panic("hwmodel: a warp's untimed ops resumed while another's step is pending")
	}
	if b.pending != nil {
		b.bufs = append(b.bufs, b.pending[:0])
	}
	b.pending, ws.rest = ws.rest, nil
	b.stepRec0, b.stepShared, b.stepCouples, b.curWarp = ws.restRec0, ws.restShared, ws.restCouples, w
}

// stash keeps the prepared pending ops of warp w from lo on as the warp's
// rest, for a later Step, and gives the engine an empty pending buffer.
func (b *Backend) stash(w int, ws *warpState, lo int) {
	ws.rest, ws.restAt, ws.restRec0, ws.restShared, ws.restCouples = b.pending, lo, b.stepRec0, b.stepShared, b.stepCouples
	for i := lo; i < len(ws.rest); i++ {
		if p := &ws.rest[i]; flagWrite(p) {
			if b.untimedW == nil {
				b.untimedW = map[pm.Addr]int32{}
			}
			b.untimedW[p.addr] = int32(w)
		}
	}
	if n := len(b.bufs); n > 0 {
		b.pending, b.bufs = b.bufs[n-1], b.bufs[:n-1]
	} else {
		b.pending = make([]pendOp, 0, cap(ws.rest)) // a step's size: no regrowth from empty
	}
	b.stepShared, b.stepCouples = false, false
}

// flushRest times all that is left of warp w's last step.
func (b *Backend) flushRest(w int, ws *warpState) {
	if ws.rest == nil {
		return
	}
	if sw := ws.bw; sw != nil && ws.bwTimed {
		b.applyNow(sw) // its ops wait for a barrier: time the members it waits for first
	}
	cur, rec0, shared, cpl := b.curWarp, b.stepRec0, b.stepShared, b.stepCouples
	held := b.pending
	b.pending = nil
	at := ws.restAt
	b.resumeRest(w, ws)
	b.timeFrom(w, ws, at, false)
	b.bufs = append(b.bufs, b.pending[:0])
	b.pending = held
	b.curWarp, b.stepRec0, b.stepShared, b.stepCouples = cur, rec0, shared, cpl
	b.arrivalTimed(ws)
}

// couples reports whether an op of kind k ties its timing to every other
// warp's (a whole-machine persist barrier, write-back or drain): a step
// with one is timed up to it at once, in the order the warps ran, as every
// step is with gpu.whole_steps.
func couples(k pm.OpKind) bool {
	switch k {
	case pm.OpEpochBarrier, pm.OpL2WB, pm.OpPCommit:
		return true
	}
	return false
}

// flagWrite reports whether p writes a value a later atomic or PAcq of
// another warp orders itself after (b.atomics, b.released, b.relFront).
func flagWrite(p *pendOp) bool {
	return p.kind == pm.OpPRel || p.kind == pm.OpAtomic && p.wrote
}

// flushReaders times, before the ops of seg (warp w's) are, the untimed
// ops of any other warp that write what an atomic or PAcq of seg reads:
// that warp made them before w read the value they wrote, and the reader
// must see their completion. The writes of seg leave untimedW.
func (b *Backend) flushReaders(w int, seg []pendOp) {
	for i := range seg {
		p := &seg[i]
		if p.kind != pm.OpAtomic && p.kind != pm.OpPAcq && p.kind != pm.OpPRel {
			continue
		}
		if v, ok := b.untimedW[p.addr]; ok {
			if int(v) == w {
				if flagWrite(p) {
					delete(b.untimedW, p.addr)
				}
				continue
			}
			if p.kind != pm.OpPRel {
				b.flushRest(int(v), &b.warps[v])
			}
		}
	}
}

// timeFrom times the prepared pending ops of warp w from index lo on.
// With split, it stops after the first instruction after which no op that
// couples warps (couples) is left and keeps the rest for the warp's next
// Step (ws.rest), so that the warp's next instruction is timed when the
// warp is the earliest again.
func (b *Backend) timeFrom(w int, ws *warpState, lo int, split bool) {
	if len(b.pending) == 0 {
		return
	}
	hold := lo - 1 // the ops up to hold are timed now
	if split && b.stepCouples {
		for i := len(b.pending) - 1; i >= lo; i-- {
			if couples(b.pending[i].kind) {
				hold = i
				break
			}
		}
	}
	for first := true; lo < len(b.pending); first = false {
		if split && !first && lo > hold && ws.wait == nil {
			b.stash(w, ws, lo) // for the warp's next Step
			return
		}
		hi := lo + 1
		for hi < len(b.pending) && b.pending[hi].idx == b.pending[lo].idx {
			hi++
		}
		if len(b.untimedW) > 0 {
			b.flushReaders(w, b.pending[lo:hi])
		}
		seg := b.pending[lo:hi]
		for i := range seg {
			p := &seg[i]
			if p.done {
				continue
			}
			// One instruction: the lanes doing this kind of verb at this scope.
			lanes := 0
			for j := i; j < len(seg); j++ {
				if q := &seg[j]; !q.done && q.kind == p.kind && q.scope == p.scope {
					lanes++
				}
			}
			b.instruction(w, ws, p.kind, p.scope, seg[i:], lanes)
			if ws.wait != nil && b.opsLeft() {
				b.endWait(ws) // more of the step to time after it: wait now
			}
		}
		b.last.Verbs += uint64(hi - lo)
		lo = hi
	}
	b.pending = b.pending[:0]
	b.stepShared, b.stepCouples = false, false
}

// Admit starts warp w of a block that became resident on sm at cycle at
// (pm.Residency): its clock starts there, not at the latest cycle seen.
func (b *Backend) Admit(w, sm int, at uint64) {
	if !b.running {
		return
	}
	b.warp(w) // grow the table
	ws := &b.warps[w]
	*ws = b.newWarp(w, sm%len(b.sms), max(at, b.first))
}

// newWarp returns the state of warp w starting on SM sm at cycle at.
func (b *Backend) newWarp(w, sm int, at uint64) warpState {
	return warpState{init: true, id: int32(w), sm: sm, clock: at, lastAck: b.start, front: b.start, lastItem: -1, orderItem: -1}
}

// Resume notes that warp w, swapped out at a device barrier, is back in a
// slot free from cycle at (pm.Residency): it issues no earlier. A warp the
// executor moved to another SM is still timed on the SM it started on,
// whose persist buffer, FIFOs and L1 hold its state.
func (b *Backend) Resume(w, _ int, at uint64) {
	if b.running && w < len(b.warps) && b.warps[w].init {
		ws := &b.warps[w]
		ws.clock = max(ws.clock, at)
	}
}

// Retire notes that warp w has finished (pm.Residency).
func (b *Backend) Retire(w int) {
	if b.running && w < len(b.warps) {
		b.warps[w].retired = true
	}
}

// safeTime returns a cycle no live warp can issue before: the least clock
// of the warps not retired or with ops still to time. Warps run a few instructions out of time order,
// so the latest cycle seen (popTime) is not safe to forget history at.
func (b *Backend) safeTime() uint64 {
	at := b.popTime
	for i := range b.warps {
		if ws := &b.warps[i]; ws.init && (!ws.retired || ws.rest != nil) {
			at = min(at, ws.clock)
		}
	}
	return at
}

// trim drops calendar history no live warp can reach any more.
func (b *Backend) trim() {
	at := b.safeTime()
	b.ms.trim(at)
	for i := range b.sms {
		b.sms[i].issue.trim(at)
		b.sms[i].alu.trim(at)
		b.sms[i].smem.trim(at)
		for k := range b.sms[i].lsu {
			b.sms[i].lsu[k].trim(at)
		}
	}
}

// issue takes a scheduler slot of the warp's SM and returns the issue cycle.
func (b *Backend) issue(ws *warpState) uint64 {
	s := &b.sms[ws.sm]
	t := max(ws.clock, s.issue.transfer(ws.clock, 1)-1)
	b.now = max(b.now, t)
	return t
}

// instruction times one warp instruction: the not yet done ops of group of
// the given kind and scope.
func (b *Backend) instruction(w int, ws *warpState, kind pm.OpKind, sc pm.Scope, group []pendOp, lanes int) {
	b.last.Instructions++
	gather := kind == pm.OpLoad && gathered(group, kind, sc)
	if !gather && ws.loadsBack > ws.clock {
		// The warp's gathered loads are used here: wait for their data.
		b.last.Stalls.Memory += ws.loadsBack - ws.clock
		ws.clock = ws.loadsBack
	}
	if b.timeVerb {
		defer b.noteReturn(ws, kind, sc, group)()
	}
	t := b.issue(ws)
	done := t + 1
	if b.rs != nil {
		b.rs.wt = kind == pm.OpStore && sc == pm.System
	}
	switch kind {
	case pm.OpLoad:
		back := b.loads(ws, t, kind, sc, group, false)
		if ws.wait != nil && ws.wait.reads != nil {
			ws.wait.gather = gather // its far reads are timed when the wait ends
		} else if gather {
			// Independent loads: the next one issues at once; the data
			// is waited for by the first instruction that is not one.
			ws.loadsBack = max(ws.loadsBack, back)
		} else {
			b.last.Stalls.Memory += back - t - 1
			done = back
		}
	case pm.OpStore:
		done = b.stores(ws, t, kind, sc, group)
	case pm.OpAtomic:
		ready := b.loads(ws, t, kind, sc, group, true)
		b.last.Stalls.Memory += ready - t - 1
		// An atomic that read the value the last atomic on its address
		// wrote completes after it (a lock handed from warp to warp costs
		// time). Only a value actually observed orders them: warps run a
		// few instructions out of time order, and unrelated atomics must
		// not wait for one that is ahead in simulated time.
		for i := range group {
			if p := &group[i]; !p.done && p.kind == kind && p.scope == sc {
				at := ready
				if last, ok := b.atomics[p.addr]; ok && last.value == p.old {
					at = max(at, last.at+1)
				}
				if r, ok := b.released[p.addr]; ok && r.value == p.old {
					// It read a PRel's flag (a lock released with PRel).
					at = max(at, r.at+1)
				}
				if p.wrote {
					b.atomics[p.addr] = release{value: p.value, at: at}
				}
				ready = max(ready, at)
			}
		}
		done = max(ready, b.persistOps(ws, ready, kind, sc, group))
		b.markDone(group, kind, sc)
	case pm.OpWork:
		// The warp's compute occupies one of the SM's execution units for
		// the cycles of its busiest lane; the SM has Schedulers of them,
		// so warps sharing an SM take turns (a fluid share: the SM's
		// units do Schedulers cycles of work per cycle).
		var most uint64
		for i := range group {
			if p := &group[i]; !p.done && p.kind == kind {
				most = max(most, p.value)
			}
		}
		most = max(most, 1)
		done = max(t+most, b.sms[ws.sm].alu.transfer(t, most))
		b.last.Stalls.Work += done - t
		b.markDone(group, kind, sc)
	default:
		done = b.verb(ws, t, kind, sc, group)
	}
	switch kind {
	case pm.OpPRel:
		for i := range group {
			if p := &group[i]; p.kind == kind && p.scope == sc {
				// The flag is visible in the L1 to the block at once, to the
				// device once the store has reached the L2.
				vis := done
				if sc >= pm.Device {
					vis += b.l2Lat
				}
				b.released[p.addr] = release{value: p.value, at: vis}
			}
		}
	case pm.OpPAcq:
		// An acquire that read a released value completes no earlier than
		// the release made it visible.
		for i := range group {
			if p := &group[i]; p.kind == kind && p.scope == sc {
				if r, ok := b.released[p.addr]; ok && r.value == p.old {
					done = max(done, r.at)
				}
				if r, ok := b.atomics[p.addr]; ok && r.value == p.old {
					done = max(done, r.at) // a flag set by an atomic
				}
			}
		}
	}
	ws.clock = max(done, t+1)
	if b.trace != nil {
		ev := Event{Warp: w, SM: ws.sm, Kind: kind, Scope: sc, Lanes: lanes, Issue: t, Done: ws.clock}
		if ws.wait != nil {
			ws.wait.ev, ws.wait.traced = ev, true // traced when it ends
		} else {
			b.trace(ev)
		}
	}
}

// opsLeft reports whether the step has ops not yet timed.
func (b *Backend) opsLeft() bool {
	for i := range b.pending {
		if !b.pending[i].done {
			return true
		}
	}
	return false
}

// noteReturn notes the verbs of the instruction about to be timed (the
// not yet done ops of group of kind and scope) and returns the function that
// records, once it is timed, the cycle they returned at: when the warp can
// issue again (SetVerbTimes).
func (b *Backend) noteReturn(ws *warpState, kind pm.OpKind, sc pm.Scope, group []pendOp) func() {
	first := len(b.retSeqs)
	for i := range group {
		if p := &group[i]; !p.done && p.kind == kind && p.scope == sc {
			b.retSeqs = append(b.retSeqs, p.seq)
		}
	}
	return func() {
		for _, q := range b.retSeqs[first:] {
			b.verbDone[q] = ws.clock
		}
		if ws.wait != nil {
			ws.wait.seqs = append(ws.wait.seqs, b.retSeqs[first:]...) // set when it ends
		}
		b.retSeqs = b.retSeqs[:first]
	}
}

// SetVerbTimes makes the backend note, from the next launch on, the cycle
// at which each verb returned (VerbTimes). It costs 8 bytes per verb; the
// crash checker's refiner uses it to check durable verbs' return times.
func (b *Backend) SetVerbTimes(on bool) { b.timeVerb = on }

// VerbTimes calls fn for each verb of the current or last GPU launch or
// CPU run, in the order the verbs were reported to Op, with the cycle at
// which it returned (the issuing warp could go on; a CPU task's verb: its
// last instruction retired, so an SFence once the store queue and the
// write-back buffer held nothing older, a CFence once its context's
// Store-Clwb Tracker counter was zero), or math.MaxUint64 for a verb not
// timed (on a backend that was not asked with SetVerbTimes, every verb).
func (b *Backend) VerbTimes(fn func(seq int, done uint64)) {
	for i, d := range b.verbDone {
		fn(i, d)
	}
}

func (b *Backend) markDone(group []pendOp, kind pm.OpKind, sc pm.Scope) {
	for i := range group {
		if p := &group[i]; p.kind == kind && p.scope == sc {
			p.done = true
		}
	}
}

// collect gathers the distinct lines of the ops of one instruction into
// b.lines, in first-touch order; pmOnly/volOnly filter by memory kind.
func (b *Backend) collect(group []pendOp, kind pm.OpKind, sc pm.Scope, wantPM bool) {
	b.lines = b.lines[:0]
	for i := range group {
		p := &group[i]
		if p.done || p.kind != kind || p.scope != sc || p.pm != wantPM || p.shared {
			continue
		}
		first := uint64(p.addr) >> b.lineShift
		last := (uint64(p.addr) + uint64(max(p.size, 1)) - 1) >> b.lineShift
		for l := first; l <= last; l++ {
			if !slices.Contains(b.lines, l) {
				b.lines = append(b.lines, l)
			}
		}
	}
}

// loads times the line reads of a load-like instruction (at the L2 for
// atomics) and returns when the data is back.
func (b *Backend) loads(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp, atL2 bool) uint64 {
	done := t + 1
	if end := b.sharedAccess(ws, t, kind, sc, group); end > 0 {
		done = end + uint64(b.cfg.GPU.SmemLatencyCycles)
	}
	data := !atL2 && b.ms.wordsMax > 0
	var lsu *resource
	if s := &b.sms[ws.sm]; s.lsu != nil && !atL2 {
		lsu = &s.lsu[int(ws.id)%len(s.lsu)]
	}
	for _, isPM := range [2]bool{false, true} {
		b.collect(group, kind, sc, isPM)
		b.last.Loads += uint64(len(b.lines))
		if data {
			b.loadWords(group, kind, sc, isPM)
		}
		deferred := isPM && !atL2 && b.uncachedFar && b.endsStep&(1<<uint(pm.OpLoad)) != 0
		for i, l := range b.lines {
			tl := t + uint64(i)
			if lsu != nil {
				// The line leaves as its slot on the path begins (the
				// latencies, measured end to end, include the path).
				tl = max(t, lsu.transfer(t, 1)-b.lsuSlot)
			}
			var r uint64
			switch {
			case deferred:
				var words uint64
				if data {
					words = b.wordsOf(b.lineMask[i])
				}
				b.deferRead(ws, t, farRead{line: l, at: tl, words: words})
				continue
			case atL2:
				r = b.l2Read(l, isPM, tl)
			case data:
				r = b.read(ws, l, isPM, tl, b.wordsOf(b.lineMask[i]))
			default:
				r = b.read(ws, l, isPM, tl, 0)
			}
			done = max(done, r)
		}
	}
	if kind == pm.OpLoad {
		b.markDone(group, kind, sc)
	}
	return done
}

// loadWords sets b.lineMask, for each line of b.lines (collected for the
// ops of group in memory kind wantPM), to the words of the line the ops
// ask for: bit i is the line's bytes [i*g, (i+1)*g), g = wordGrain().
// Lanes that read the same word share it.
func (b *Backend) loadWords(group []pendOp, kind pm.OpKind, sc pm.Scope, wantPM bool) {
	b.lineMask = append(b.lineMask[:0], make([]uint64, len(b.lines))...)
	g := b.wordGrain()
	for i := range group {
		p := &group[i]
		if p.done || p.kind != kind || p.scope != sc || p.pm != wantPM || p.shared {
			continue
		}
		for a, left := uint64(p.addr), uint64(max(p.size, 1)); left > 0; {
			n := min(left, b.lineBytes-a&(b.lineBytes-1))
			if k := slices.Index(b.lines, a>>b.lineShift); k >= 0 {
				off := a & (b.lineBytes - 1)
				first, last := off/g, (off+n-1)/g
				b.lineMask[k] |= (uint64(2)<<last - 1) &^ (uint64(1)<<first - 1)
			}
			a, left = a+n, left-n
		}
	}
}

// wordGrain is the bytes one bit of a loadWords mask stands for: a 4-byte
// register, or a 64th of a line longer than 256 bytes.
func (b *Backend) wordGrain() uint64 { return max(4, b.lineBytes/64) }

// wordsOf returns the 4-byte words a loadWords mask asks for.
func (b *Backend) wordsOf(mask uint64) uint64 {
	return uint64(bits.OnesCount64(mask)) * b.wordGrain() / 4
}

// sharedAccess times the shared-memory accesses of an instruction (its not
// yet done ops of kind and scope that are shared) and returns the cycle
// after its last pass, or 0 if it has none: a store is done then, a load's
// or atomic's data is back SmemLatencyCycles later. The SM's shared memory
// has SmemBanks banks of 4-byte words and serves one pass per cycle: the
// access takes one pass per distinct word of its busiest bank (lanes on one
// word share it, as GPGPU-Sim's unlimited broadcast does; atomics of
// several lanes on one word then complete a cycle apart, as every atomic
// chain does: see instruction).
func (b *Backend) sharedAccess(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	if !b.stepShared {
		return 0
	}
	words := b.smemWords[:0]
	for i := range group {
		p := &group[i]
		if p.done || p.kind != kind || p.scope != sc || !p.shared {
			continue
		}
		first, last := uint64(p.addr)>>2, (uint64(p.addr)+uint64(max(p.size, 1))-1)>>2
		for w := first; w <= last; w++ {
			if n := len(words); n == 0 || words[n-1] != w {
				words = append(words, w)
			}
		}
	}
	b.smemWords = words
	if len(words) == 0 {
		return 0
	}
	// Distinct words: lanes on one word share its pass. Each bank keeps
	// a list of its distinct words (head, next: indices into words), so a
	// word is looked for only among its bank's.
	nb := b.cfg.GPU.SmemBanks
	head := slices.Grow(b.smemBanks[:0], nb)[:nb]
	for k := range head {
		head[k] = -1
	}
	count := slices.Grow(b.smemCount[:0], nb)[:nb]
	clear(count)
	next := slices.Grow(b.smemNext[:0], len(words))[:len(words)]
	b.smemBanks, b.smemCount, b.smemNext = head, count, next
	passes := uint64(0)
	for i, w := range words {
		k := w % uint64(nb)
		dup := false
		for j := head[k]; j >= 0; j = next[j] {
			if words[j] == w {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		next[i], head[k] = head[k], int32(i)
		count[k]++
		passes = max(passes, uint64(count[k]))
	}
	b.last.SmemPasses += passes
	return b.sms[ws.sm].smem.transfer(t, passes)
}

// farRead is a line read of PM-far memory at cycle at, bringing words
// 4-byte words, whose timing waits until every warp has run past its load
// (deferRead).
type farRead struct{ line, at, words uint64 }

// farReadsWait reports whether a load's far reads wait, before they are
// timed, until every other warp has run past the load: with
// pcie.tlp_bytes a read's request is a packet behind the writes posted
// before it, and only then are they all booked (the engine runs warps a
// step ahead of each other, so writes issued earlier may be booked later).
// Only where far reads go straight to the link (pcie.uncached_reads).
func (b *Backend) farReadsWait() bool {
	return b.uncachedFar && b.ms.far && b.ms.tlp > 0
}

// deferRead makes warp ws's load issued at t wait (pbWait, woken as a
// fence that waits for every SM is) with read among its far reads.
func (b *Backend) deferRead(ws *warpState, t uint64, read farRead) {
	if ws.wait == nil {
		ws.wait = &pbWait{fence: true, from: t}
	}
	ws.wait.reads = append(ws.wait.reads, read)
}

// timeDeferred times the far reads of warp ws's load wait wt, now that
// every warp has run past it: a gathered load's data is waited for by the
// warp's next other instruction, a plain load's by the load.
func (b *Backend) timeDeferred(ws *warpState, wt *pbWait) {
	back := wt.from + 1
	for _, r := range wt.reads {
		back = max(back, b.read(ws, r.line, true, r.at, r.words))
	}
	if wt.gather {
		ws.loadsBack = max(ws.loadsBack, back)
		return
	}
	b.last.Stalls.Memory += back - wt.from - 1
	ws.clock = max(ws.clock, back)
}

// gathered reports whether every op of the instruction (the not yet done
// ops of group of kind and scope) is a gathered load.
func gathered(group []pendOp, kind pm.OpKind, sc pm.Scope) bool {
	for i := range group {
		if p := &group[i]; !p.done && p.kind == kind && p.scope == sc && !p.gather {
			return false
		}
	}
	return true
}

// read times one line read through the L1 that brings words 4-byte words
// to its instruction's lanes, and returns when it is back. A miss holds
// one of the SM's miss-status entries (mem.sm_reads) and room for its
// words (mem.sm_read_bytes) until its data is back.
func (b *Backend) read(ws *warpState, line uint64, isPM bool, t, words uint64) uint64 {
	if isPM && b.uncachedFar {
		// pcie.uncached_reads: no cache keeps a PM-far line
		b.last.L1Misses++
		b.last.L1PMMisses++
		b.last.L2Misses++
		return b.ms.missRead(ws.sm, t, words, func(s uint64, book bool) uint64 {
			st := &b.last
			if !book {
				st = nil
			}
			return b.ms.readLine(line, b.lineBytes, s+b.l2Lat, true, st)
		})
	}
	s := &b.sms[ws.sm]
	if s.l1.lookup(line) >= 0 {
		return t + b.l1Lat
	}
	b.last.L1Misses++
	if isPM {
		b.last.L1PMMisses++
	}
	t = b.l1Fill(ws, line, t)
	inL2 := b.l2.has(line)
	return b.ms.missRead(ws.sm, t, words, func(s uint64, book bool) uint64 {
		switch {
		case book:
			return b.l2Read(line, isPM, s)
		case inL2:
			return s + b.l2Lat
		}
		return b.ms.readLine(line, b.lineBytes, s+b.l2Lat, isPM && !b.pmAsDRAM, nil)
	})
}

// l1Fill makes room for line in the warp's L1, writing back or waiting for
// the PM line it evicts, and returns when the warp may go on.
func (b *Backend) l1Fill(ws *warpState, line uint64, t uint64) uint64 {
	s := &b.sms[ws.sm]
	var pinned func(int32) bool
	if b.pol.ordersEvictions() {
		b.pbCatchUp()
		pinned = func(e int32) bool { return e >= 0 && b.entries.at(e).start > t }
	}
	_, _, ve, evicted := s.l1.insertAvoiding(line, pinned)
	if !evicted || ve < 0 {
		return t
	}
	e := b.entries.at(ve)
	if b.pol.ordersEvictions() {
		if e.start > t {
			// Evicting a buffered line (SBRP) must respect the buffer's
			// order: wait until its flush may start.
			start := b.pbEvict(ws.sm, ve, t)
			b.last.Stalls.Evict += start - t
			return start
		}
		return t
	}
	b.pol.evict(ws.sm, ve, t)
	return t
}

// l2Read times a line read at the L2 (and memory on a miss).
func (b *Backend) l2Read(line uint64, isPM bool, t uint64) uint64 {
	if b.l2.lookup(line) >= 0 {
		return t + b.l2Lat
	}
	b.last.L2Misses++
	// The miss is sent once the dirty line its way held has entered the
	// memory's queue (GPGPU-Sim's L2 sends both from one miss queue).
	x := t + b.l2Lat
	if _, v := b.l2Fill(line, x); v.n > 0 {
		x = b.ms.evict(v, x, true)
	}
	return b.ms.readLine(line, b.lineBytes, x, isPM && !b.pmAsDRAM, &b.last)
}

// stores times a store instruction: volatile lines go to the L2 without
// stalling the warp; PM lines follow the model.
func (b *Backend) stores(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	done := max(t+1, b.sharedAccess(ws, t, kind, sc, group))
	b.collect(group, kind, sc, false)
	b.volatileSectors(group, kind, sc)
	for i, l := range b.lines {
		tl := t + uint64(i)
		if b.cfg.Mem.SFIFOL1 > 0 {
			done = max(done, b.wcStore(ws, l, b.lineMask[i], tl)) // a write-combining L1 (sfifo.go)
			continue
		}
		// A volatile line goes to the L2 (write-back) over the SM's port,
		// which the warp waits for, and is dirty there.
		left, _ := b.volatileToL2(ws.sm, l, b.lineMask[i], tl)
		done = max(done, tl+1, left)
	}
	done = max(done, b.persistOps(ws, t, kind, sc, group))
	b.markDone(group, kind, sc)
	return done
}

// volatileSectors sets b.lineMask, for each line of b.lines (collected for
// the volatile ops of group), to the sectors the ops write (0 without
// sectors).
func (b *Backend) volatileSectors(group []pendOp, kind pm.OpKind, sc pm.Scope) {
	b.lineMask = append(b.lineMask[:0], make([]uint64, len(b.lines))...)
	if b.secShift == 0 {
		return
	}
	for i := range group {
		p := &group[i]
		if p.done || p.kind != kind || p.scope != sc || p.pm || p.shared {
			continue
		}
		for a, left := uint64(p.addr), uint64(max(p.size, 1)); left > 0; {
			n := min(left, b.lineBytes-a&(b.lineBytes-1))
			if k := slices.Index(b.lines, a>>b.lineShift); k >= 0 {
				b.lineMask[k] |= b.sectorsOf(pm.Addr(a), uint32(n))
			}
			a, left = a+n, left-n
		}
	}
}

// dirtyBytes returns the bytes writing back an L2 line with dirty mask
// mask sends: its written sectors, or the line.
func (b *Backend) dirtyBytes(mask uint64) uint64 {
	if b.secShift == 0 {
		return b.lineBytes
	}
	return uint64(bits.OnesCount64(mask)) << b.secShift
}

// persistOps times the persists of an instruction's ops (stores, atomics
// that wrote PM, PRels of PM flags) under the model, attaching each record
// to the entry that makes it durable, and returns when the warp may go on.
func (b *Backend) persistOps(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	b.lines, b.lineMask = b.lines[:0], b.lineMask[:0]
	nrec := 0
	for i := range group {
		p := &group[i]
		if p.done || p.kind != kind || p.scope != sc || p.rec0 < 0 {
			continue
		}
		for r := p.rec0; r < p.rec1; r++ {
			nrec++
			rec := b.records.at(int(r))
			l := uint64(rec.addr) >> b.lineShift
			k := slices.Index(b.lines, l)
			if k < 0 {
				k = len(b.lines)
				b.lines = append(b.lines, l)
				b.lineMask = append(b.lineMask, 0)
			}
			b.lineMask[k] |= b.sectorsOf(rec.addr, rec.size)
		}
	}
	if len(b.lines) == 0 {
		return t + 1
	}
	b.last.CoalescedWrites += uint64(nrec - len(b.lines))
	b.lineEnt = b.lineEnt[:0]
	done := t + 1
	for i, l := range b.lines {
		e, d, merged := b.persistLine(ws, l, b.lineMask[i], t+uint64(i))
		if merged {
			b.last.CoalescedWrites++
		}
		b.lineEnt = append(b.lineEnt, e)
		done = max(done, d)
	}
	for i := range group {
		p := &group[i]
		if p.done || p.kind != kind || p.scope != sc || p.rec0 < 0 {
			continue
		}
		for r := p.rec0; r < p.rec1; r++ {
			rec := b.records.at(int(r))
			k := slices.Index(b.lines, uint64(rec.addr)>>b.lineShift)
			rec.entry = b.lineEnt[k]
			if b.rs != nil {
				b.rs.wbStoreCycle(r, t+uint64(k))
				if !b.rs.wt {
					b.wbOwn(ws, b.lines[k], r)
				}
			}
		}
	}
	return done
}

// sectorsOf returns the sector bits (persist.sector_bytes) of the size
// bytes at a, which lie in one line; 0 without sectors.
func (b *Backend) sectorsOf(a pm.Addr, size uint32) uint64 {
	if b.secShift == 0 {
		return 0
	}
	off := uint64(a) & (b.lineBytes - 1)
	first, last := off>>b.secShift, (off+uint64(max(size, 1))-1)>>b.secShift
	return (uint64(2)<<last - 1) &^ (uint64(1)<<first - 1)
}

// flushBytes returns how many bytes flushing entry e sends: its written
// sectors (persist.sector_bytes, or the re-study's writeback.sector_bytes),
// else the line.
func (b *Backend) flushBytes(e int32) uint64 {
	if b.rs != nil {
		return b.rs.bytesOf(e, b.lineBytes) // the re-study's sectored L2 (writeback.go)
	}
	if m := b.entries.at(e).sectors; m != 0 {
		return uint64(bits.OnesCount64(m)) << b.secShift
	}
	return b.lineBytes
}

func (b *Backend) newEntry(line uint64) int32 {
	return b.entries.add(entry{line: line, start: noAck, ack: noAck})
}

// flush writes entry e towards the persistence point, starting at cycle
// start, and returns its ack cycle. Writes of one line are acked in order.
func (b *Backend) flush(e int32, start uint64, sm int) uint64 { return b.flushAt(e, start, start, sm) }

// flushAt is flush of a write that leaves at cycle start but was claimed
// (its line taken for it) at cycle claim, no later: the SM's flush log,
// which ackBy reads, has it outstanding from claim.
func (b *Backend) flushAt(e int32, claim, start uint64, sm int) uint64 {
	n := b.flushBytes(e)
	if b.rs == nil && b.l2.lookup(b.entries.at(e).line) < 0 {
		b.l2Insert(b.entries.at(e).line, start) // the write passes through the L2 (a re-study write-back leaves from it)
	}
	w := b.ms.writePM(sm, b.entries.at(e).line, n, start, &b.last)
	start, ack := w.start, w.ack
	b.sent, b.left = w.queued, w.left
	ent := b.entries.at(e)
	ent.start, ent.ack = start, ack
	b.last.Flushes++
	b.globalAck = max(b.globalAck, ack)
	s := &b.sms[sm]
	s.log = append(s.log, span{min(claim, start), ack, ent.dirty})
	if len(s.log) > s.pruneAt {
		// Forget flushes over before the engine's current time.
		safe := b.safeTime()
		s.log = slices.DeleteFunc(s.log, func(f span) bool { return f.ack <= safe })
		s.pruneAt = 2*len(s.log) + 64
	}
	return ack
}

// ackBy returns the latest ack among all flushes started by cycle t.
func (b *Backend) ackBy(t uint64) uint64 {
	var m uint64
	for i := range b.sms {
		m = max(m, b.sms[i].ackBy(t))
	}
	return m
}

// persistLine handles one PM line of a store instruction at cycle t and
// returns its entry, when the warp may go on, and whether the line joined a
// pending entry.
func (b *Backend) persistLine(ws *warpState, line, sectors uint64, t uint64) (int32, uint64, bool) {
	if b.pmAsDRAM {
		// persist.none: PM is device memory. The store goes to the L2
		// like a volatile one (no persist window, no NVM write path); its
		// record counts as durable at once, so images keep the data.
		if b.l2.lookup(line) < 0 {
			b.l2Insert(line, t)
		}
		e := b.newEntry(line)
		b.entries.at(e).start, b.entries.at(e).ack = t, t
		return e, t + 1, false
	}
	return b.pol.store(ws, line, sectors, t)
}

// moreSectors adds sectors add to entry e, whose flush is already
// scheduled (an SBRP persist-buffer entry a later store merged into): the
// flush sends them too, so their bytes take the write path's bandwidth
// from the flush's start. The entry's ack stays: persists ordered after it
// were scheduled from it, and the extra sectors travel in the same burst.
func (b *Backend) moreSectors(e int32, add uint64, sm int) {
	ent := b.entries.at(e)
	ent.sectors |= add
	n := uint64(bits.OnesCount64(add)) << b.secShift
	b.ms.moreBytes(sm, ent.line, n, ent.start, &b.last)
}

// writeBack flushes the SM's dirty PM lines without waiting and
// invalidates its L1 (a device-scope acquire under None); it returns the
// latest ack of the write-backs it issued.
func (b *Backend) writeBack(ws *warpState, t uint64) uint64 {
	ack := b.publish(ws, t)
	b.sms[ws.sm].l1.invalidate()
	return ack
}

// publish makes the SM's dirty PM lines visible device-wide (a
// device-scope release or fence under None, Epoch or GPM): they are written
// back without waiting for their acks. It returns the latest ack of the
// write-backs it issued.
//
// Lines first dirtied after cycle t (by a warp the model ran ahead) stay
// dirty.
func (b *Backend) publish(ws *warpState, t uint64) uint64 {
	s := &b.sms[ws.sm]
	kept := s.dirty[:0]
	var last uint64
	for _, e := range s.dirty {
		ent := b.entries.at(e)
		switch {
		case ent.ack != noAck:
		case ent.dirty <= t:
			last = max(last, b.flush(e, t, ws.sm))
		default:
			kept = append(kept, e)
		}
	}
	s.dirty = kept
	return last
}

// fenceAll is, with gpu.fence_waits_all, when a fence issued at t whose
// own round trip is rt ends at the earliest: once the writes any SM issued
// by t are complete (sys: of system scope) or have left the GPU's queues
// (device scope), and the way back (half rt). 0 without the key. A device
// fence does not wait for the host's ack of a write (measured: a
// __threadfence after a store to host memory costs what it costs alone),
// but it is queued behind every earlier write (measured: it waits as long
// as a system fence beside other SMs' streams).
//
// Warps run a step of several instructions ahead of each other, so at t
// other warps may not have issued all their writes before t yet. Where the
// executor can block a warp (pm.Waker), a fence ends its warp's step and
// the warp waits (fenceWait) until every other warp has run past t: then
// fenceAll is taken, and the fence's end is the later of it and done, the
// end without it. Otherwise it is taken at once, with what is booked.
func (b *Backend) fenceAll(ws *warpState, t, rt uint64, sys bool, done uint64) uint64 {
	if !b.cfg.GPU.FenceWaitsAll {
		return done
	}
	if b.waking() && ws.wait == nil {
		ws.wait = &pbWait{fence: true, from: t, rt: rt, sys: sys}
		return done
	}
	return max(done, b.fenceAllNow(t, rt, sys))
}

// fenceAllNow is fenceAll's bound from the writes booked so far: 0 if
// none issued by t.
func (b *Backend) fenceAllNow(t, rt uint64, sys bool) uint64 {
	if e := b.ms.earlier(t, sys); e > 0 {
		return e + rt/2
	}
	return 0
}

// fenceFloor returns done, the end of a fence issued at t, held to at
// least gpu.fence_latency_cycles after t; the cycles it adds count in
// stall (nil: none).
func (b *Backend) fenceFloor(t, done uint64, stall *uint64) uint64 {
	f := t + uint64(b.cfg.GPU.FenceLatencyCycles)
	if f <= done {
		return done
	}
	if stall != nil {
		*stall += f - done
	}
	return f
}

// waitAcks stalls the warp from t until ack and counts the stall.
func waitAcks(t, ack uint64, stall *uint64) uint64 {
	done := max(t+1, ack)
	*stall += done - t - 1
	return done
}

// verb times fences, persistency verbs and barriers.
func (b *Backend) verb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) (done uint64) {
	defer b.markDone(group, kind, sc)
	if b.rs != nil {
		return b.pol.verb(ws, t, kind, sc, group) // the write-back models time every verb themselves
	}
	if kind == pm.OpMemBar {
		kind = pm.OpDFence // the membar waits for every earlier access: the model's DFence
	}
	switch kind {
	case pm.OpFence:
		if sc >= pm.Device {
			defer func(t uint64) { done = max(done, b.wcRelease(ws, t, kind, sc)) }(t)
		}
		g := &b.cfg.GPU
		switch {
		case sc >= pm.System && g.FenceSystemCycles > 0:
			b.publish(ws, t)
			f := uint64(g.FenceSystemCycles)
			return b.fenceAll(ws, t, f, true, b.fenceFloor(t, max(t+f, ws.lastAck), nil))
		case sc >= pm.Device:
			b.publish(ws, t)
			rt := b.l2Lat
			if g.FenceDeviceCycles > 0 {
				rt = uint64(g.FenceDeviceCycles)
			}
			return b.fenceAll(ws, t, rt, false, b.fenceFloor(t, t+rt, nil))
		}
		return t + uint64(max(g.FenceBlockCycles, 1))
	case pm.OpCLWB, pm.OpSFence, pm.OpSetCtx, pm.OpCFence, pm.OpYield, pm.OpL2WB, pm.OpPCommit:
		return t + 1 // CPU verbs and the re-study's write-backs: nothing to do without write-back caches
	case pm.OpSyncWarp:
		return t + 1 // an execution barrier of the warp: no persist work
	}
	// A release of device or system scope also writes a write-combining
	// L1's dirty volatile lines to the L2 (sfifo.go): the release's own
	// round trip to the L2 covers their way there. A persist barrier's is
	// timed once its scope has arrived (Sync), and covers them there.
	rel := b.wcRelease(ws, t, kind, sc)
	if kind == pm.OpPBarrier {
		ws.relDone = max(ws.relDone, rel)
		rel = t
	}
	return max(b.pol.verb(ws, t, kind, sc, group), rel)
}

// acquire times a PAcq's flag read: block scope reads through the L1,
// device scope at the L2 and invalidates the L1 after it.
func (b *Backend) acquire(ws *warpState, t uint64, sc pm.Scope, group []pendOp) uint64 {
	if sc <= pm.Block {
		return b.loads(ws, t, pm.OpPAcq, sc, group, false)
	}
	done := b.loads(ws, t, pm.OpPAcq, sc, group, true)
	b.pol.acquireL1(ws, t)
	return done
}

// Sync makes the warps of group wait for each other and applies the
// ordering of the barrier they passed. The members of one block whose
// instructions up to the barrier are not all timed yet (clock order) pass
// it when they are (syncWait); other barriers time them all first.
func (b *Backend) Sync(group []*pm.Agent) {
	if !b.running || len(group) == 0 {
		return
	}
	// A member still waiting at an earlier barrier (a warp barrier in
	// the step after a block barrier) makes that one apply first: its
	// members' ops up to it are timed now.
	for _, a := range group {
		if a.Warp >= 0 && a.Warp < len(b.warps) && b.warps[a.Warp].bw != nil {
			b.applyNow(b.warps[a.Warp].bw)
		}
	}
	if b.inOrder && b.blockOK && b.deferSync(group) {
		return
	}
	// The stepping warp's verbs so far precede the barrier, and so do
	// the members' steps left partly untimed.
	if len(b.pending) > 0 {
		b.timePending(b.curWarp, b.warp(b.curWarp))
	}
	for _, a := range group {
		if a.Warp >= 0 && a.Warp < len(b.warps) {
			b.flushRest(a.Warp, &b.warps[a.Warp])
		}
	}
	var kind pm.OpKind
	var sc pm.Scope
	for _, a := range group {
		ws := b.warp(a.Warp)
		kind, sc = ws.bar, ws.barS
	}
	b.applySync(group, kind, sc, nil)
}

// deferSync makes a barrier of one block whose members are not all timed
// up to it a syncWait, and reports whether it did.
func (b *Backend) deferSync(group []*pm.Agent) bool {
	blk := group[0].Block
	untimed := false
	for _, a := range group {
		if a.Block != blk || a.Warp < 0 {
			return false
		}
		ws := b.warp(a.Warp)
		if ws.bw != nil {
			return false // never while a barrier before it waits; times it all
		}
		untimed = untimed || ws.rest != nil || a.Warp == b.curWarp && len(b.pending) > 0
	}
	if !untimed {
		return false
	}
	var sw *syncWait
	if n := len(b.swFree); n > 0 {
		sw, b.swFree = b.swFree[n-1], b.swFree[:n-1]
	} else {
		sw = &syncWait{}
	}
	sw.agents, sw.ptrs = sw.agents[:0], sw.ptrs[:0]
	sw.warps, sw.seqs, sw.left = sw.warps[:0], sw.seqs[:0], 0
	for _, a := range group {
		sw.agents = append(sw.agents, *a)
		if b.timeVerb {
			seq := int32(-1)
			if a.ID < len(b.barSeq) {
				seq = b.barSeq[a.ID]
			}
			sw.seqs = append(sw.seqs, seq)
		}
	}
	for i := range sw.agents {
		sw.ptrs = append(sw.ptrs, &sw.agents[i])
	}
	b.eachWarp(group, func(a *pm.Agent, ws *warpState) {
		sw.warps = append(sw.warps, int32(a.Warp))
		sw.kind, sw.sc = ws.bar, ws.barS
		ws.bw, ws.bwTimed, ws.bwBlocked = sw, true, false
		if ws.rest != nil || a.Warp == b.curWarp && len(b.pending) > 0 {
			ws.bwTimed = false
			sw.left++
		}
	})
	return true
}

// eachWarp calls fn once for each warp of group, with its first agent.
func (b *Backend) eachWarp(group []*pm.Agent, fn func(a *pm.Agent, ws *warpState)) {
	b.syncStamp++
	for _, a := range group {
		ws := b.warp(a.Warp)
		if ws.stamp == b.syncStamp {
			continue
		}
		ws.stamp = b.syncStamp
		fn(a, ws)
	}
}

// arrivalTimed notes that warp ws has no ops left to time before the
// barrier it waits at, and applies the barrier once no member has: the
// members Step blocked meanwhile wake at its end (Wake).
func (b *Backend) arrivalTimed(ws *warpState) {
	sw := ws.bw
	if sw == nil || ws.bwTimed || ws.rest != nil {
		return
	}
	ws.bwTimed = true
	if sw.left--; sw.left > 0 {
		return
	}
	for _, w := range sw.warps {
		m := &b.warps[w]
		m.bw, m.bwTimed = nil, false
	}
	b.applySync(sw.ptrs, sw.kind, sw.sc, sw.seqs)
	for _, w := range sw.warps {
		if m := &b.warps[w]; m.bwBlocked {
			m.bwBlocked, m.ready = false, m.clock
			b.woken = append(b.woken, pm.WarpReady{Warp: int(w), At: m.clock})
		}
	}
	b.swFree = append(b.swFree, sw)
}

// applyNow times the ops up to barrier sw of every member not yet timed
// up to it, which applies it.
func (b *Backend) applyNow(sw *syncWait) {
	for _, w := range sw.warps {
		if m := &b.warps[w]; m.bw == sw && !m.bwTimed {
			b.flushRest(int(w), m)
		}
	}
}

// applySync makes the warps of group wait for each other at a barrier of
// kind and scope sc. seqs, with SetVerbTimes, are the members' barrier
// verbs (nil: b.barSeq's).
func (b *Backend) applySync(group []*pm.Agent, kind pm.OpKind, sc pm.Scope, seqs []int32) {
	var at, acks, front, rel uint64
	b.eachWarp(group, func(_ *pm.Agent, ws *warpState) {
		at = max(at, ws.clock)
		front = max(front, b.warpAcks(ws))
		rel = max(rel, ws.relDone)
		ws.relDone = 0
	})
	acks = b.pol.barrier(group, kind, sc, at)
	if rel > at {
		acks = max(acks, rel) // the members' dirty volatile lines reach the L2 (verb)
	}
	if acks > at {
		b.last.Stalls.PBarrier += acks - at
		at = acks
	}
	if b.timeVerb {
		for i, a := range group {
			seq := int32(-1)
			switch {
			case seqs != nil:
				seq = seqs[i]
			case a.ID < len(b.barSeq):
				seq = b.barSeq[a.ID]
			}
			if seq >= 0 {
				b.verbDone[seq] = at
			}
		}
	}
	b.eachWarp(group, func(_ *pm.Agent, ws *warpState) {
		b.last.Stalls.Barrier += at - ws.clock
		ws.clock = at
		if kind == pm.OpPBarrier {
			// Persists of the scope before the barrier come before its
			// persists after it.
			ws.front = max(ws.front, front)
			b.orderPoint(ws)
		}
	})
}

// End writes back the L1s' dirty PM lines (the L1 is flushed at kernel
// end) and returns the launch's statistics. The launch ends when its last
// warp is done and the write-backs have reached the L2; the writes then
// drain to the persistence point in the background, and the next launch (and
// Crash) starts once they have.
func (b *Backend) End() (pm.Stats, error) {
	if b.cpuRun {
		return b.cpuEnd(), nil
	}
	if !b.running {
		return pm.Stats{}, fmt.Errorf("%w: End without Begin", ErrState)
	}
	for i := range b.warps {
		b.flushRest(i, &b.warps[i]) // an executor that stopped early (an error) may leave some
	}
	b.pbDrainAll() // SBRP: the persist buffers drain at kernel end
	end := b.start
	for i := range b.warps {
		if b.warps[i].init {
			end = max(end, b.warps[i].clock, b.warps[i].loadsBack)
		}
	}
	b.last.Retired = end - b.start
	for i := range b.sms {
		b.wcFlush(i, end) // a write-combining L1's dirty volatile lines (sfifo.go)
	}
	b.pol.finish(end)
	for i := range b.sms {
		s := &b.sms[i]
		for _, e := range s.dirty {
			if b.entries.at(e).ack == noAck {
				b.flush(e, end, i)
			}
		}
		s.dirty = s.dirty[:0]
	}
	if b.cfg.Mem.L2FlushAtEnd {
		b.flushL2(end)
	}
	// The kernel ends when its last warp is done and every write it made
	// is acknowledged and taken by the memory's queues: every model pays
	// for its writes.
	end = max(end, b.globalAck, b.ms.drained)
	b.end, b.now = end, end
	b.drained = end
	b.running = false
	b.last.Cycles = end - b.start
	b.st.add(&b.last)
	return pm.Stats{Cycles: b.last.Cycles, Persists: b.last.Persists}, nil
}

// flushL2 writes the L2's dirty volatile lines back to memory from cycle
// t, in way order.
func (b *Backend) flushL2(t uint64) {
	slices.Sort(b.dirtyWays)
	for _, w := range b.dirtyWays {
		if m := b.l2Dirty[w]; m != 0 {
			if b.l2.valid(int(w)) {
				b.ms.writeBackDRAM(b.l2.tag[w]-1, b.dirtyBytes(m), t)
			}
			b.l2Dirty[w] = 0
		}
	}
	b.dirtyWays = b.dirtyWays[:0]
}

// compact applies the records that are durable (every one, between
// launches) to the durable image and drops them. Under the re-study's
// write-back models it does so only once every record is durable, and
// otherwise keeps them all (wbCompact).
func (b *Backend) compact() {
	if b.rs != nil && !b.wbCompact() {
		return
	}
	if b.applied < b.records.len() && b.durable != nil {
		b.apply(b.durable, math.MaxUint64)
	}
	b.records.reset()
	b.entries.reset()
	b.applied = 0
}

// apply writes the records durable by cycle at into img, in the order the
// stores took effect: each byte holds the newest visible value among its
// durable writes. (Warps run a few instructions out of time order, so a
// store that took effect later can be acked earlier; applying in ack order
// would then let an older value overwrite a newer one.)
func (b *Backend) apply(img *pm.Image, at uint64) {
	for i := b.applied; i < b.records.len(); i++ {
		if ack := b.ackOf(i); ack <= at && (ack != noAck || at == math.MaxUint64) {
			r := b.records.at(i)
			_ = img.Write(r.addr, b.records.bytes(i)) // a region removed since: nothing to keep
		}
	}
}

func (b *Backend) ackOf(i int) uint64 {
	e := b.records.at(i).entry
	if e < 0 {
		return noAck
	}
	return b.entries.at(e).ack
}

// CrashAt returns the durable image at cycle at: the PM contents if power
// failed at that cycle. at must not precede the start of the last launch.
func (b *Backend) CrashAt(at uint64) (*pm.Image, error) {
	if !b.attached || b.crashed {
		return nil, fmt.Errorf("%w: CrashAt before Attach or after Crash", ErrState)
	}
	if at < b.floor {
		return nil, fmt.Errorf("%w: cycle %d precedes the last launch's start %d", ErrCrashTime, at, b.floor)
	}
	if b.durable == nil {
		return nil, fmt.Errorf("%w: CrashAt(%d)", ErrNoImage, at)
	}
	img := b.durable.Clone()
	if at == math.MaxUint64 {
		at--
	}
	b.apply(img, at)
	return img, nil
}

// Crash returns the durable image now (see Now) and makes the backend
// unusable.
func (b *Backend) Crash() (*pm.Image, error) {
	img, err := b.CrashAt(b.Now())
	if err != nil {
		return nil, err
	}
	b.crashed = true
	return img, nil
}

// Durability calls fn for each persist the backend still tracks, in the
// order the verbs were reported to Op, with the bytes it wrote and the
// cycle at which they became durable (math.MaxUint64: not yet): those of
// the current or last GPU launch or CPU run and, under the re-study's
// write-back models, those of the earlier launches since the first one that
// began with a persist not yet durable (a dirty L2 line or an uncommitted
// write-back outlives its launch; writeback.go). A persist that spans lines
// is reported once per line, in address order. CrashAt(c) is exactly the
// image before the first of those launches (or the run) with the persists
// durable by c
// applied in this order; the crash checker's refinement test uses it to
// check every timed image against the persistency model's ordering rules.
func (b *Backend) Durability(fn func(a pm.Addr, size int, ack uint64)) {
	for i := b.applied; i < b.records.len(); i++ {
		r := b.records.at(i)
		fn(r.addr, int(r.size), b.ackOf(i))
	}
}
