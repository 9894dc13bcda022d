package hwmodel

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// CPUConfig is the CPU core that times CPU runs (package coro's tasks):
// the out-of-order core of COSPlay Table 2 with its store queue (SQ),
// write-back buffer (WBB), Store-Clwb Tracker, caches and persistent
// memory. Latencies are in cycles of the CPU clock.
//
// The core is abstracted by its widths and queue sizes: every verb is an
// instruction (a byte-slice access one per 8-byte word; Work and a
// coroutine switch are that many cycles of dispatch-width instructions),
// instructions dispatch and retire in order, at most DispatchWidth a
// cycle, and at most ROBEntries are in flight, so a long-latency load or a
// blocked fence stalls the core only once the reorder buffer is full.
//
// Stores and CLWBs take an SQ entry from dispatch (none is allocated
// before a pending SFence or CFence completes, nor while the SQ is full)
// until they leave its head in order after retiring: a store then writes
// the L1d (its read-for-ownership on a miss issued when it executed), one
// entry per SQDrainCycles; a
// CLWB moves to the WBB when no CLWB to its line is pending there and the
// WBB has room (COSPlay §4.3; with SameLineInWBB it moves to the WBB
// anyway and is durable no earlier than the pending one). A WBB entry writes its line back to the
// memory controller: it arrives PM.WriteLatencyCycles plus the BMO latency
// (BMOCycles) later and is durable once the controller's write pending
// queue (WPQEntries) takes it (ADR: the queue is the persistence domain);
// then the entry leaves, and the line holds its queue entry until the PM's
// write bus has taken it. WBB entries complete out of order. An SFence completes when the SQ and the
// WBB hold nothing older; a CFence(cid) when the Store-Clwb Tracker
// counter of context cid mod Contexts is zero (contexts beyond the
// hardware's share counters, §4.3). Under StrandWeaver a CLWB goes to the
// strand buffer of its strand instead of the WBB (coro.Config's width and
// depth): it takes one of the buffer's depth entries, which are freed in
// order, and its write-back starts only once every CLWB of its strand
// before the strand's last PersistBarrier is durable; JoinStrand waits
// like an SFence. Under Unordered (pm.CPURun.Unordered; COSPlay §5's
// upper bound, "completely free of any persist-induced CPU stalls") a
// CLWB leaves the SQ head without waiting for a WBB entry or a pending
// CLWB of its line; its write-back is timed as above, off the core's
// critical path. Each configuration's part is a cpuPolicy (cpupolicy.go).
//
// A coroutine switch costs SwitchCycles of instructions (0 under
// FreeSwitch; a run's coro.Config.SwitchCycles, when set, overrides it).
// Loads and store misses walk the L1d, L2 and LLC (each level's latency
// added, the NoC before the LLC) and read PM after an LLC miss, within
// the PM read bandwidth. Volatile memory is timed like PM (Table 2 has
// no DRAM). PM lines no CLWB wrote back stay dirty in the caches until
// the run ends, when they are written back; the run lasts until its last
// persist is durable.
//
// A run may have several cores (pm.CPURun.Cores; a verb runs on core
// Agent.Unit mod Cores), each with this configuration's pipeline, SQ,
// WBB, Store-Clwb Tracker, L1d and L2, sharing one LLC and one memory
// controller (its write pending queue and PM buses); a core's LLC eviction
// drops the line from its own inner caches only.
type CPUConfig struct {
	ClockMHz      float64 `json:"clock_mhz"`       // core clock; converts bandwidth to bytes per cycle
	DispatchWidth int     `json:"dispatch_width"`  // instructions the core dispatches and retires per cycle (a verb is an instruction)
	ROBEntries    int     `json:"rob_entries"`     // reorder buffer: instructions in flight
	SQEntries     int     `json:"sq_entries"`      // store queue entries (stores and CLWBs, from dispatch until they leave its head)
	WBBEntries    int     `json:"wbb_entries"`     // write-back buffer entries (CLWBs until their line is durable)
	Contexts      int     `json:"contexts"`        // Store-Clwb Tracker counters (hardware persist contexts): COSPlay contexts cid share counter cid mod contexts
	SQDrainCycles int     `json:"sq_drain_cycles"` // cycles the SQ head takes per entry (a store's L1d write, a CLWB's move to the WBB)
	// SameLineInWBB lets a CLWB whose line has a CLWB pending in the WBB
	// move to the WBB anyway and send its write-back at once, durable no
	// earlier than the pending one (the path to the memory controller
	// keeps a line's writes in order), instead of waiting at the SQ head
	// for it (COSPlay §4.3's rule, the default), which holds up every SQ
	// entry behind it.
	SameLineInWBB bool `json:"same_line_in_wbb"`
	// L1D is the core's L1 data cache. The three caches' line sizes must
	// agree; a line is the CLWB granularity.
	L1D CacheConfig `json:"l1d"`
	// L2 is the core's private L2 cache.
	L2 CacheConfig `json:"l2"`
	// LLC is the inclusive last-level cache, across the NoC from the L2.
	LLC       CacheConfig `json:"llc"`
	NoCCycles int         `json:"noc_cycles"` // interconnect between the L2 and the LLC
	// PM is the CPU's memory, persistent and volatile alike: COSPlay
	// Table 2 has no DRAM. Its read latency is after an LLC miss, its
	// write latency from the WBB to the memory controller (the ADR
	// persistence domain).
	PM MemConfig `json:"pm"`
	// BMOCycles is the latency of the backend memory operations added to
	// every line reaching the memory controller (COSPlay §5: 0 plain ADR,
	// Enc 100, LD 200, HD 700, Comb 1000); latency only, never throughput.
	BMOCycles int `json:"bmo_cycles"`
	// WPQEntries is the memory controller's write pending queue, in
	// lines: a line written back is durable once it holds an entry (ADR:
	// the queue is the persistence domain) and holds it until the PM's
	// write bus has taken it, so the write bandwidth reaches persists
	// only through the queue's occupancy.
	WPQEntries int `json:"wpq_entries"`
	// SwitchCycles is the cost of one coroutine switch and the round-robin
	// scheduler (FreeSwitch: 0; a run's coro.Config.SwitchCycles overrides
	// it).
	SwitchCycles int `json:"switch_cycles"`
}

// BMO is a backend memory operation of COSPlay §5 and its latency.
type BMO struct {
	Name   string // "ADR", "Enc", "LD", "HD", "Comb"
	Cycles int    // added to every line reaching the memory controller
}

// BMOs returns the BMOs of COSPlay §5 in order of latency, plain ADR
// (no BMO) first: encryption (Enc, 100 cycles), light deduplication (LD,
// 200), heavy deduplication (HD, 700) and their hypothetical combination
// (Comb, 1000).
func BMOs() []BMO {
	return []BMO{{"ADR", 0}, {"Enc", 100}, {"LD", 200}, {"HD", 700}, {"Comb", 1000}}
}

// cosplayCPU is the core of COSPlay Table 2 (see cpuKeySources for each value's
// source).
func cosplayCPU() CPUConfig {
	return CPUConfig{
		ClockMHz: 2200, DispatchWidth: 4, ROBEntries: 224, SQEntries: 56, WBBEntries: 32,
		Contexts: 32, SQDrainCycles: 1,
		L1D:        CacheConfig{SizeBytes: 32 << 10, LineBytes: 64, Assoc: 8, LatencyCycles: 4},
		L2:         CacheConfig{SizeBytes: 1 << 20, LineBytes: 64, Assoc: 16, LatencyCycles: 10},
		LLC:        CacheConfig{SizeBytes: 16 << 20, LineBytes: 64, Assoc: 16, LatencyCycles: 30},
		NoCCycles:  8,
		PM:         MemConfig{ReadLatencyCycles: 600, WriteLatencyCycles: 200, ReadGBps: 4, WriteGBps: 2},
		WPQEntries: 32,
		// 165 instructions of coroutine library per switch at 4 a cycle:
		// COSPlay Table 3's (CII-1)*1000/SKI, the instructions the library
		// adds per sfence (229, 215, 234 and 217 for SPS, PC, TATP and
		// CQ; 220), spread over a task's switches, one per sfence and one
		// at its end: 3 sfences, 4 switches, 220*3/4.
		SwitchCycles: 41,
	}
}

// PresetCOSPlay is the machine of COSPlay (Table 2): one out-of-order core
// at 2.2 GHz with a 56-entry SQ and a 32-entry WBB, 32 KB L1d, 1 MB L2 and
// a 16 MB inclusive LLC of 64-byte lines, PM with 600-cycle reads,
// 200-cycle writes to the controller's 32-entry write pending queue and
// 4/2 GB/s read/write bandwidth, plain ADR (cpu.bmo_cycles=0; §5's BMOs
// set it). Its GPU is SBRP's PM-near machine, which a CPU run does not
// use; every preset has this CPU.
func PresetCOSPlay() Config {
	c := PresetPMNear()
	c.Name = "cosplay"
	return c
}

func (c *CPUConfig) validate() error {
	bad := func(key string, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, key, fmt.Sprintf(format, args...))
	}
	for _, p := range []struct {
		k string
		v int
	}{
		{"cpu.dispatch_width", c.DispatchWidth}, {"cpu.rob_entries", c.ROBEntries}, {"cpu.sq_entries", c.SQEntries},
		{"cpu.wbb_entries", c.WBBEntries}, {"cpu.contexts", c.Contexts}, {"cpu.sq_drain_cycles", c.SQDrainCycles},
		{"cpu.l1d.latency_cycles", c.L1D.LatencyCycles}, {"cpu.l2.latency_cycles", c.L2.LatencyCycles},
		{"cpu.llc.latency_cycles", c.LLC.LatencyCycles}, {"cpu.pm.read_latency_cycles", c.PM.ReadLatencyCycles},
		{"cpu.pm.write_latency_cycles", c.PM.WriteLatencyCycles},
	} {
		if p.v <= 0 {
			return bad(p.k, "%d, want > 0", p.v)
		}
		if p.v > 1<<20 {
			return bad(p.k, "%d, want at most %d", p.v, 1<<20)
		}
	}
	if c.WPQEntries <= 0 || c.WPQEntries > maxQueueEntries {
		return bad("cpu.wpq_entries", "%d, want 1 to %d", c.WPQEntries, maxQueueEntries)
	}
	for _, p := range []struct {
		k string
		v int
	}{{"cpu.noc_cycles", c.NoCCycles}, {"cpu.bmo_cycles", c.BMOCycles}, {"cpu.switch_cycles", c.SwitchCycles}} {
		if p.v < 0 || p.v > 1<<20 {
			return bad(p.k, "%d, want 0 to %d", p.v, 1<<20)
		}
	}
	for _, p := range []struct {
		k string
		v float64
	}{{"cpu.clock_mhz", c.ClockMHz}, {"cpu.pm.read_gbps", c.PM.ReadGBps}, {"cpu.pm.write_gbps", c.PM.WriteGBps}} {
		if !(p.v > 0) || p.v > 1e9 {
			return bad(p.k, "%v, want a positive finite number", p.v)
		}
	}
	for _, cc := range []struct {
		name string
		c    CacheConfig
	}{{"cpu.l1d", c.L1D}, {"cpu.l2", c.L2}, {"cpu.llc", c.LLC}} {
		if cc.c.SizeBytes <= 0 || cc.c.Assoc <= 0 {
			return bad(cc.name+".size_bytes", "size %d and assoc %d, want > 0", cc.c.SizeBytes, cc.c.Assoc)
		}
		if lb := cc.c.LineBytes; lb < 8 || lb&(lb-1) != 0 {
			return bad(cc.name+".line_bytes", "%d, want a power of two >= 8", lb)
		}
		if cc.c.LineBytes != c.L1D.LineBytes {
			return bad(cc.name+".line_bytes", "%d differs from cpu.l1d.line_bytes %d", cc.c.LineBytes, c.L1D.LineBytes)
		}
		if cc.c.SizeBytes%(cc.c.LineBytes*cc.c.Assoc) != 0 {
			return bad(cc.name+".size_bytes", "%d is not a multiple of line_bytes*assoc = %d", cc.c.SizeBytes, cc.c.LineBytes*cc.c.Assoc)
		}
		if cc.c.SizeBytes > 1<<30 {
			return bad(cc.name+".size_bytes", "%d, want at most 1 GiB", cc.c.SizeBytes)
		}
	}
	return nil
}

// CPUStats are a CPU run's statistics (Backend.LastCPU): instructions and
// the cycles the core could not dispatch an instruction for, by the cause
// that held it longest.
type CPUStats struct {
	Cycles       uint64 // Begin to the last persist durable
	Instructions uint64 // dispatched, switches and Work included
	Verbs        uint64 // task verbs
	Persists     uint64 // persist records (one per CPU line a PM store touched)
	CLWBs        uint64
	WriteBacks   uint64 // lines written to PM (CLWBs of dirty lines, and the run's end)
	Loads        uint64 // line accesses by loads, atomics and store misses
	L1Misses     uint64
	L2Misses     uint64
	LLCMisses    uint64
	Switches     uint64 // coroutine switches charged
	SwitchCycles uint64 // cycles of them
	// Stall cycles: dispatch waited for a free SQ entry, for an SFence
	// (or JoinStrand) or a CFence to complete before allocating an SQ
	// entry, or for the reorder buffer; the SQ head waited for a WBB
	// entry, a strand-buffer entry or a pending CLWB of the same line.
	SQFull, SFence, CFence, ROBFull uint64
	WBBFull, StrandFull, SameLine   uint64
	// WPQWait is the cycles written-back lines waited at the memory
	// controller for a write pending queue entry (not a core stall).
	WPQWait uint64
}

// LastCPU returns the statistics of the last CPU run.
func (b *Backend) LastCPU() CPUStats {
	if b.cpu == nil {
		return CPUStats{}
	}
	return b.cpu.last
}

// robGroup is a run of n instructions from first on that retire one slot
// (1/width cycle) after another from slot start.
type robGroup struct{ first, n, start uint64 }

// cpuCore is the state of the CPU core during and between runs.
type cpuCore struct {
	cfg                       CPUConfig
	w, rob, sqN, wbbN, ctxN   uint64
	drain                     uint64
	l1Lat, l2Lat, llcLat, noc uint64
	rdLat, wrLat, bmo         uint64
	lineShift                 uint
	lineBytes                 uint64
	l1, l2, llc               *cache   // the LLC is the cores' (see home)
	ctl                       *channel // the memory controller: its write pending queue and PM buses; the cores'
	wpqN                      int

	// home is core 0, which holds the run's cores (all, core k at k):
	// they share its LLC, its memory controller (ctl) and the
	// lines' pending records; each has its own pipeline, SQ, WBB, L1d
	// and L2.
	home *cpuCore
	all  []*cpuCore

	switchCy uint64
	// pol is the run's configuration's persist path (cpupolicy.go), one
	// of the core's wbbPol, strandPol or Unordered's.
	pol       cpuPolicy
	wbbPol    wbbCPU
	strandPol strandCPU

	start      uint64 // the run's first cycle
	dispPos    uint64 // next dispatch slot (cycle*w + k)
	retPos     uint64 // next retire slot
	n          uint64 // instructions dispatched
	groups     []robGroup
	gHead      int
	lastRetire uint64

	sq      []uint64 // leave cycle of SQ entry k at k % sqN
	nSQ     uint64
	sqHead  uint64 // the SQ head is free for its next entry from this cycle
	sqBlock uint64 // no SQ entry is allocated before this cycle (fences)

	lineAck  *lineMap[uint64] // line -> ack of its latest write-back
	ctxDrain []uint64         // per hardware context: when its SQ/WBB entries are gone
	allDrain uint64           // when every entry so far is gone
	cur      uint64           // context register, as a hardware context

	pending    *lineMap[[]pendRec] // PM line -> its records no write-back carries yet
	wordBuf    []uint64            // words' scratch
	dirtyOrder []uint64            // lines in the order they were first made dirty

	st, last CPUStats
}

// pendRec is a persist record waiting for a write-back, with the ordering
// frontier of the strand it was stored in (StrandWeaver): the write-back
// that carries it starts no earlier.
type pendRec struct {
	rec   int32
	front uint64
}

// newCPUCore returns a core of configuration c: the run's first, with its
// own LLC, memory controller and pending records, or with home set one
// that shares home's.
func newCPUCore(c CPUConfig, home *cpuCore) *cpuCore {
	k := &cpuCore{cfg: c,
		w: uint64(c.DispatchWidth), rob: uint64(c.ROBEntries), sqN: uint64(c.SQEntries), wbbN: uint64(c.WBBEntries),
		ctxN: uint64(c.Contexts), drain: uint64(c.SQDrainCycles),
		l1Lat: uint64(c.L1D.LatencyCycles), l2Lat: uint64(c.L2.LatencyCycles), llcLat: uint64(c.LLC.LatencyCycles),
		noc: uint64(c.NoCCycles), rdLat: uint64(c.PM.ReadLatencyCycles), wrLat: uint64(c.PM.WriteLatencyCycles),
		bmo: uint64(c.BMOCycles), lineBytes: uint64(c.L1D.LineBytes),
		l1: newCache(c.L1D), l2: newCache(c.L2), wpqN: c.WPQEntries,
		lineAck: newLineMap[uint64](),
	}
	if home != nil {
		k.llc, k.ctl, k.pending, k.home = home.llc, home.ctl, home.pending, home
	} else {
		k.llc, k.pending = newCache(c.LLC), newLineMap[[]pendRec]()
		// The controller: its queue holds a line until the write bus has
		// taken it (the write latency lies before the queue, not after).
		mc := c.PM
		mc.WriteLatencyCycles = 0
		k.ctl = &newChannels(mc, 1, c.ClockMHz)[0]
		k.home, k.all = k, []*cpuCore{k}
	}
	k.lineShift = uint(bits.TrailingZeros64(k.lineBytes))
	k.sq = make([]uint64, k.sqN)
	k.ctxDrain = make([]uint64, k.ctxN)
	k.wbbPol.n = k.wbbN
	return k
}

// cpuBegin starts a CPU run at the cycle the previous run or launch
// drained.
func (b *Backend) cpuBegin(run pm.CPURun) {
	b.compact()
	b.cpuRun = true
	if b.cpu == nil {
		b.cpu = newCPUCore(b.cfg.CPU, nil)
	}
	h := b.cpu.home
	b.cpu = h
	t := b.drained
	b.start, b.floor = t, t
	b.last = Stats{}
	h.pending.reset()
	h.ctl.reset(t)
	// The run's cores (pm.CPURun.Cores): core 0 and more sharing its LLC,
	// memory controller and pending records.
	n := max(run.Cores, 1)
	for len(h.all) < n {
		h.all = append(h.all, newCPUCore(b.cfg.CPU, h))
	}
	h.all = h.all[:n]
	for _, c := range h.all {
		c.begin(t, run)
	}
	b.opSeq, b.verbDone = 0, b.verbDone[:0]
}

// begin resets the core for a run from cycle t.
func (c *cpuCore) begin(t uint64, run pm.CPURun) {
	c.st = CPUStats{}
	c.start = t
	c.dispPos, c.retPos, c.lastRetire = t*c.w, t*c.w, t
	c.n, c.groups, c.gHead = 0, c.groups[:0], 0
	c.nSQ, c.sqHead, c.sqBlock = 0, t, t
	c.lineAck.reset()
	clear(c.ctxDrain)
	c.allDrain, c.cur = t, 0
	c.dirtyOrder = c.dirtyOrder[:0]
	// The run's scheduling (pm.Launch.CPU).
	c.switchCy = uint64(c.cfg.SwitchCycles)
	switch {
	case run.FreeSwitch:
		c.switchCy = 0
	case run.SwitchCycles != 0:
		c.switchCy = run.SwitchCycles
	}
	c.pol = c.newCPUPolicy(run)
}

// now is the core's current cycle: when its next instruction can
// dispatch, or its last one retired if that is later.
func (c *cpuCore) now() uint64 { return max(c.dispPos/c.w, c.lastRetire) }

// retiredAt returns the cycle instruction j retired (or will).
func (c *cpuCore) retiredAt(j uint64) uint64 {
	for c.gHead < len(c.groups)-1 && j >= c.groups[c.gHead].first+c.groups[c.gHead].n {
		c.gHead++
	}
	if c.gHead > 256 && c.gHead > len(c.groups)/2 {
		c.groups = append(c.groups[:0], c.groups[c.gHead:]...)
		c.gHead = 0
	}
	g := c.groups[c.gHead]
	if j < g.first {
		return 0
	}
	return (g.start + min(j-g.first, g.n-1)) / c.w
}

// dispatch dispatches n instructions, the first no earlier than cycle e,
// and returns the cycle of the first. The reorder buffer holds at most
// rob of them: an instruction dispatches no earlier than the cycle the
// one rob before it retired.
func (c *cpuCore) dispatch(n, e uint64) uint64 {
	pos := max(c.dispPos, e*c.w)
	want := pos
	first := c.n
	if first >= c.rob {
		pos = max(pos, c.retiredAt(first-c.rob)*c.w)
	}
	if last := first + n - 1; n > 1 && last >= c.rob && last-c.rob < first {
		if need := c.retiredAt(last-c.rob) * c.w; pos+n-1 < need {
			pos = need - (n - 1)
		}
	}
	c.st.ROBFull += (pos - want) / c.w
	c.dispPos = pos + n
	c.n += n
	c.st.Instructions += n
	return pos / c.w
}

// retire retires the n instructions dispatched last, all complete by cycle
// done, in order after the earlier ones, and returns the last one's retire
// cycle.
func (c *cpuCore) retire(n, done uint64) uint64 {
	pos := max(c.retPos, done*c.w)
	c.groups = append(c.groups, robGroup{first: c.n - n, n: n, start: pos})
	c.retPos = pos + n
	c.lastRetire = (pos + n - 1) / c.w
	return c.lastRetire
}

// alu times n instructions that complete the cycle after they dispatch
// (Work, a coroutine switch, SetCtx, NewStrand, PersistBarrier).
func (c *cpuCore) alu(n uint64) {
	if n == 0 {
		return
	}
	d := c.dispatch(n, 0)
	c.retire(n, d+1)
}

// access reads the line at cycle t through the caches and returns its
// latency, filling the levels it missed.
func (c *cpuCore) access(line, t uint64) uint64 {
	c.st.Loads++
	if c.l1.lookup(line) >= 0 {
		return c.l1Lat
	}
	c.st.L1Misses++
	lat := c.l1Lat + c.l2Lat
	if c.l2.lookup(line) < 0 {
		c.st.L2Misses++
		lat += c.noc + c.llcLat
		if c.llc.lookup(line) < 0 {
			c.st.LLCMisses++
			at := t + lat
			done := max(at+c.rdLat, c.ctl.rd.transfer(at, c.lineBytes))
			lat = done - t
			if _, v, _, ev := c.llc.insert(line); ev {
				// Inclusive: the line leaves the inner levels too.
				c.l2.drop(v)
				c.l1.drop(v)
			}
		}
		c.l2.insert(line)
	}
	c.l1.insert(line)
	return lat
}

// drop invalidates line if the cache holds it.
func (k *cache) drop(line uint64) {
	if w := k.lookup(line); w >= 0 {
		k.tag[w] = 0
	}
}

// sqAlloc returns the earliest cycle an SQ entry can be allocated: after
// the fences before it and once the entry sqN before it has left.
func (c *cpuCore) sqAlloc() uint64 {
	e := c.sqBlock
	if c.nSQ >= c.sqN {
		if l := c.sq[c.nSQ%c.sqN]; l > e {
			if now := max(e, c.dispPos/c.w); l > now {
				c.st.SQFull += l - now
			}
			e = l
		}
	}
	return e
}

// sqLeave records that the entry dispatched last left the SQ head at
// cycle leave, for hardware context h, and is gone from the SQ/WBB at
// gone.
func (c *cpuCore) sqLeave(leave, gone uint64) {
	c.sqHead = leave
	c.sq[c.nSQ%c.sqN] = leave
	c.nSQ++
	c.ctxDrain[c.cur] = max(c.ctxDrain[c.cur], gone)
	c.allDrain = max(c.allDrain, gone)
}

// writeLine writes a line back from cycle t and returns when it is durable:
// it reaches the memory controller after the write latency and the BMO's
// (COSPlay §5: added to a line's way to the controller; latency, never
// throughput), and is durable once the controller's write pending queue
// takes it (ADR). It holds its entry until the PM's write bus has taken
// it, so a burst of write-backs is durable at the latency while the queue
// has room, and a stream at the write bandwidth.
func (c *cpuCore) writeLine(t uint64) uint64 {
	c.st.WriteBacks++
	at := t + c.wrLat + c.bmo
	in, _ := c.ctl.write(at, c.lineBytes, c.wpqN)
	c.st.WPQWait += in - at
	return in
}

// earlySFence is a test hook that breaks an SFence's promise on purpose: a
// CPU task's SFence (and DFence, EpochBarrier, JoinStrand) completes the
// cycle after it dispatches, whatever the store queue and the write-back
// buffer still hold. The refiner's return-time check sets it to show that
// it can fail.
var earlySFence = false

// cpuOp times one verb of a CPU task and returns the cycle it returned at:
// when its last instruction retired (the core's current cycle for a verb
// of no instruction, a free coroutine switch).
func (b *Backend) cpuOp(a *pm.Agent, op *pm.Op) uint64 {
	h := b.cpu.home
	c := h.all[max(a.Unit, 0)%len(h.all)]
	b.cpu = c // Now is this core's
	n := c.n
	c.st.Verbs++
	b.last.Verbs++
	if c.st.Verbs&4095 == 0 {
		// Forget the controller's reservations before every core's
		// current cycle.
		t := c.dispPos / c.w
		for _, k := range h.all {
			t = min(t, k.dispPos/k.w)
		}
		c.ctl.trim(t)
	}
	switch op.Kind {
	case pm.OpLoad:
		for _, line := range c.words(op.Addr, op.Size) {
			d := c.dispatch(1, 0)
			c.retire(1, d+c.access(line, d))
		}
	case pm.OpStore:
		if op.PM {
			b.cpuRecords(op)
		}
		for _, line := range c.words(op.Addr, op.Size) {
			c.store(line)
		}
	case pm.OpAtomic:
		if op.PM && op.Wrote {
			b.cpuRecords(op)
		}
		// A locked read-modify-write: after the older stores have left
		// the SQ (and after pending fences), read-for-ownership, write.
		line := c.lineOf(op.Addr)
		d := c.dispatch(1, 0)
		x := max(d, c.sqHead, c.sqBlock)
		done := x + c.access(line, x)
		c.retire(1, done)
		if op.Wrote {
			c.sqHead = max(c.sqHead, done)
			c.ctxDrain[c.cur] = max(c.ctxDrain[c.cur], done)
			c.allDrain = max(c.allDrain, done)
		}
	case pm.OpCLWB:
		b.clwb(c.lineOf(op.Addr))
	case pm.OpSFence, pm.OpDFence, pm.OpEpochBarrier, pm.OpJoinStrand:
		drain := c.allDrain
		if earlySFence {
			drain = 0
		}
		c.fence(drain, &c.st.SFence)
	case pm.OpCFence:
		c.fence(c.ctxDrain[op.Value%c.ctxN], &c.st.CFence)
	case pm.OpSetCtx:
		c.cur = op.Value % c.ctxN
		c.alu(1)
	case pm.OpNewStrand:
		c.pol.newStrand(op.Value)
		c.alu(1)
	case pm.OpPersistBarrier:
		c.pol.persistBarrier()
		c.alu(1)
	case pm.OpYield:
		if c.switchCy > 0 {
			c.st.Switches++
			c.st.SwitchCycles += c.switchCy
			c.alu(c.switchCy * c.w)
		}
	case pm.OpWork:
		c.alu(min(op.Value, 1<<40) * c.w)
	default:
		c.alu(1)
	}
	if c.n == n {
		return c.now()
	}
	return c.lastRetire
}

// lineOf returns the line holding a, as the caches see it: the address
// space puts every range at a multiple of 2^pm.OffsetBits, so that the
// same offset of every range would fall in the same cache set; a real
// machine's physical pages do not line up so, and the line's offset bits
// are XORed with a hash of its range index (a bijection within each
// range, so lines stay distinct).
func (c *cpuCore) lineOf(a pm.Addr) uint64 {
	line := uint64(a) >> c.lineShift
	r := uint64(a) >> pm.OffsetBits
	colour := (r * 0x9e3779b97f4a7c15) >> 24 // the product's high bits: well mixed
	return line ^ colour&(1<<(pm.OffsetBits-c.lineShift)-1)
}

// words returns the line of each 8-byte word an access of size bytes at a
// touches (one instruction each), in scratch space valid until the next
// call.
func (c *cpuCore) words(a pm.Addr, size uint32) []uint64 {
	c.wordBuf = c.wordBuf[:0]
	for off := uint64(0); off < max(uint64(size), 1); off += 8 {
		c.wordBuf = append(c.wordBuf, c.lineOf(a+pm.Addr(off)))
	}
	return c.wordBuf
}

// store times one store instruction to line. Write-allocate: the line is
// read for ownership when the store executes (at dispatch), so the misses
// of stores waiting in the SQ overlap; the store leaves the SQ head once
// the line is in the L1d.
func (c *cpuCore) store(line uint64) {
	d := c.dispatch(1, c.sqAlloc())
	ready := d + c.access(line, d)
	r := c.retire(1, d+1)
	leave := max(max(c.sqHead, r)+c.drain, ready)
	c.sqLeave(leave, leave)
}

// fence times an SFence or CFence: it completes once drain (the cycle the
// entries it waits for are gone) has passed, and no SQ entry is allocated
// before it completes.
func (c *cpuCore) fence(drain uint64, stall *uint64) {
	d := c.dispatch(1, 0)
	done := max(d+1, drain)
	*stall += done - (d + 1)
	c.retire(1, done)
	c.sqBlock = max(c.sqBlock, done)
}

// clwb times a CLWB of line: from the SQ head to the WBB (or a strand
// buffer), then its write-back, which carries every record of the line
// stored before it that no earlier write-back carried.
func (b *Backend) clwb(line uint64) {
	c := b.cpu
	c.st.CLWBs++
	d := c.dispatch(1, c.sqAlloc())
	r := c.retire(1, d+1)
	start := max(c.sqHead, r)
	ai, _ := c.lineAck.slot(line)
	pendingAck := *c.lineAck.at(ai) // same-line order: write back after it
	if a := pendingAck; a > start && c.pol.sameLineWaits(c) {
		c.st.SameLine += a - start
		start = a
	}
	start = c.pol.admit(c, start)
	leave := start + c.drain
	ack := max(leave, pendingAck)
	if recs := c.pendingRecs(line); recs != nil {
		from := c.pol.writeFrom(leave, *recs)
		ack = max(c.writeLine(from), pendingAck)
		b.carry(line, recs, from, ack)
	}
	c.pol.held(leave, ack)
	*c.lineAck.at(ai) = ack
	c.sqLeave(leave, ack)
}

// pendingRecs returns line's records that no write-back carries yet, or
// nil if it has none; they stay valid until a record of a new line.
func (c *cpuCore) pendingRecs(line uint64) *[]pendRec {
	if i := c.pending.find(line); i >= 0 && len(*c.pending.at(i)) > 0 {
		return c.pending.at(i)
	}
	return nil
}

// carry makes the pending records *recs of line durable at ack with a
// write-back entry that started at from, and empties *recs.
func (b *Backend) carry(line uint64, recs *[]pendRec, from, ack uint64) {
	e := b.newEntry(line)
	b.entries.at(e).start, b.entries.at(e).ack = from, ack
	for _, r := range *recs {
		b.records.at(int(r.rec)).entry = e
	}
	b.last.Flushes++
	b.last.NVMWriteBytes += b.cpu.lineBytes
	*recs = (*recs)[:0]
}

// cpuRecords logs a PM store's persist records, one per CPU line, as
// pending on their lines.
func (b *Backend) cpuRecords(op *pm.Op) {
	c := b.cpu
	var buf [8]byte
	data := opBytes(op, &buf)
	a := op.Addr
	for len(data) > 0 {
		n := min(uint64(len(data)), c.lineBytes-uint64(a)&(c.lineBytes-1))
		line := c.lineOf(a)
		pi, ok := c.pending.slot(line)
		if !ok {
			c.dirtyOrder = append(c.dirtyOrder, line)
		}
		recs := c.pending.at(pi)
		*recs = append(*recs, pendRec{int32(b.records.len()), c.pol.front()})
		b.records.add(a, data[:n], b.durable != nil)
		a += pm.Addr(n)
		data = data[n:]
		b.last.Persists++
		c.st.Persists++
	}
}

// cpuEnd ends a CPU run: the lines no CLWB wrote back are written back
// (in the order they were first made dirty), and the run lasts until every
// persist is durable.
func (b *Backend) cpuEnd() pm.Stats {
	h := b.cpu.home
	b.cpu = h
	var t, end uint64
	for _, c := range h.all {
		t = max(t, c.now(), c.sqHead)
		end = max(end, c.allDrain)
	}
	end = max(end, t)
	for _, c := range h.all {
		for _, line := range c.dirtyOrder {
			if recs := c.pendingRecs(line); recs != nil {
				ai, _ := c.lineAck.slot(line)
				from := max(t, *c.lineAck.at(ai))
				ack := c.writeLine(from)
				b.carry(line, recs, from, ack)
				*c.lineAck.at(ai) = ack
				end = max(end, ack)
			}
		}
		c.dirtyOrder = slices.Delete(c.dirtyOrder, 0, len(c.dirtyOrder))
	}
	b.cpuRun = false
	b.end, b.now, b.drained = end, end, end
	// The run's statistics: the cores' counts added up.
	st := h.st
	for _, c := range h.all[1:] {
		st.add(&c.st)
	}
	st.Cycles = end - b.start
	h.last = st
	b.last.Cycles = st.Cycles
	b.last.Loads, b.last.L1Misses, b.last.L2Misses = st.Loads, st.L1Misses, st.L2Misses
	b.last.Instructions = st.Instructions
	b.st.add(&b.last)
	return pm.Stats{Cycles: b.last.Cycles, Persists: b.last.Persists}
}

// add adds o's counts to s (Cycles too).
func (s *CPUStats) add(o *CPUStats) {
	s.Cycles += o.Cycles
	s.Instructions += o.Instructions
	s.Verbs += o.Verbs
	s.Persists += o.Persists
	s.CLWBs += o.CLWBs
	s.WriteBacks += o.WriteBacks
	s.Loads += o.Loads
	s.L1Misses += o.L1Misses
	s.L2Misses += o.L2Misses
	s.LLCMisses += o.LLCMisses
	s.Switches += o.Switches
	s.SwitchCycles += o.SwitchCycles
	s.SQFull += o.SQFull
	s.SFence += o.SFence
	s.CFence += o.CFence
	s.ROBFull += o.ROBFull
	s.WBBFull += o.WBBFull
	s.StrandFull += o.StrandFull
	s.SameLine += o.SameLine
	s.WPQWait += o.WPQWait
}

// cpuKeySources says where each CPU key's value comes from (see
// keySources): every preset has the core of COSPlay Table 2.
var cpuKeySources = map[string]string{
	"cpu.clock_mhz":               "COSPlay Table 2 (2.2 GHz)",
	"cpu.dispatch_width":          "COSPlay Table 2 (4-wide dispatch/retirement)",
	"cpu.rob_entries":             "COSPlay Table 2 (224)",
	"cpu.sq_entries":              "COSPlay Table 2 (56)",
	"cpu.wbb_entries":             "COSPlay Table 2 (32)",
	"cpu.contexts":                "not in Table 2: COSPlay §4.3 caps persist concurrency at min(window, contexts) and Fig. 8's best windows reach 31, so 32",
	"cpu.same_line_in_wbb":        "off: COSPlay §4.3 (a clwb moves to the WBB if no clwb to the same address is pending there)",
	"cpu.sq_drain_cycles":         "not in Table 2: one store commits to the L1d per cycle",
	"cpu.l1d.size_bytes":          "COSPlay Table 2 (32 KB)",
	"cpu.l1d.line_bytes":          "COSPlay Table 2 (64 B blocks)",
	"cpu.l1d.assoc":               "COSPlay Table 2 (8-way)",
	"cpu.l1d.latency_cycles":      "COSPlay Table 2 (4 cycles)",
	"cpu.l2.size_bytes":           "COSPlay Table 2 (1 MB)",
	"cpu.l2.line_bytes":           "COSPlay Table 2 (64 B)",
	"cpu.l2.assoc":                "COSPlay Table 2 (16-way)",
	"cpu.l2.latency_cycles":       "COSPlay Table 2 (10 cycles)",
	"cpu.llc.size_bytes":          "COSPlay Table 2 (16 MB)",
	"cpu.llc.line_bytes":          "COSPlay Table 2 (64 B)",
	"cpu.llc.assoc":               "COSPlay Table 2 (16-way)",
	"cpu.llc.latency_cycles":      "COSPlay Table 2 (30 cycles)",
	"cpu.noc_cycles":              "COSPlay Table 2 (8 cycles)",
	"cpu.pm.read_latency_cycles":  "COSPlay Table 2 (600 cycles, Optane)",
	"cpu.pm.write_latency_cycles": "COSPlay Table 2 (200 cycles to the controller; §2.2's ADR persist latency)",
	"cpu.pm.read_gbps":            "COSPlay Table 2 (4 GB/s)",
	"cpu.pm.write_gbps":           "COSPlay Table 2 (2 GB/s)",
	"cpu.pm.shared_bus":           "off: COSPlay Table 2 gives a read and a write bandwidth",
	"cpu.bmo_cycles":              "COSPlay §5 (0 plain ADR; Enc 100, LD 200, HD 700, Comb 1000)",
	"cpu.wpq_entries":             "not in Table 2 (§5: ADR persists a line once it reaches the memory controller's write queue): an Intel memory controller's write pending queue, 32 lines (Xeon E5-2600 uncore performance monitoring guide, 327043-001: WPQ_OCCUPANCY adds at most 32 a cycle), the nearest documented bound; writes are durable once posted to it (same guide)",
	"cpu.switch_cycles":           "COSPlay Table 3: (CII-1)*1000/SKI is 215-234 instructions per sfence for SPS, PC, TATP, CQ (220); a task of 3 sfences switches 4 times (one at its end), so 220*3/4 = 165 per switch, 41 cycles at 4 a cycle",
}
