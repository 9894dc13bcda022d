package hwmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/scopedpm/scopedpm/pm"
)

// Config holds every physical parameter of the modelled machine. Latencies
// are in core-clock cycles (the unit of the SBRP artifact and of the
// GPGPU-Sim re-study; a table in nanoseconds is converted with the core
// clock), bandwidths in GB/s (10^9 bytes per second), sizes in bytes.
//
// The JSON keys, joined with dots, are the keys of Set: for example
// "nvm.write_latency_cycles=500" or "persist.window=8".
type Config struct {
	// Name names the configuration in Backend.Name ("pm-near", ...).
	Name string `json:"name"`
	// GPU is the shape of the GPU.
	GPU GPUConfig `json:"gpu"`
	// L1 is the per-SM L1 data cache.
	L1 CacheConfig `json:"l1"`
	// L2 is the shared L2 cache.
	L2 CacheConfig `json:"l2"`
	// DRAM is the GPU's device memory (GDDR/HBM).
	DRAM MemConfig `json:"dram"`
	// NVM is the persistent memory.
	NVM MemConfig `json:"nvm"`
	// Mem is the memory system's ports, queues and partitions (memsys.go),
	// which every model's traffic crosses.
	Mem MemSysConfig `json:"mem"`
	// PCIe is the link between the GPU and the host; PM crosses it when
	// PCIe.PMFar is set.
	PCIe LinkConfig `json:"pcie"`
	// Persist holds the persistence point and the persist hardware.
	Persist PersistConfig `json:"persist"`
	// WriteBack is the write-back hardware of the write-back models
	// (WriteBackADR, WriteBackPCT; writeback.go); only they use it.
	WriteBack WriteBackConfig `json:"writeback"`
	// CPU is the CPU core that times CPU runs (package coro; cpu.go).
	CPU CPUConfig `json:"cpu"`
}

// GPUConfig is the shape of the GPU and its clock.
type GPUConfig struct {
	ClockMHz           float64 `json:"clock_mhz"`             // core clock; converts cycles to time
	SMs                int     `json:"sms"`                   // streaming multiprocessors
	WarpSize           int     `json:"warp_size"`             // threads per warp
	Schedulers         int     `json:"schedulers"`            // warp schedulers per SM (instructions issued per cycle)
	MaxThreadsPerSM    int     `json:"max_threads_per_sm"`    // resident threads per SM
	MaxBlocksPerSM     int     `json:"max_blocks_per_sm"`     // resident blocks per SM
	MaxThreadsPerBlock int     `json:"max_threads_per_block"` // threads in one block
	// SerialLoads makes every load block its warp until its data is back,
	// even the loads a kernel gathers as independent (scope.Thread.Gather32):
	// no memory-level parallelism within a warp. Off, a warp issues its
	// gathered loads back to back and waits for them at its next other
	// instruction, as GPGPU-Sim's scoreboard (the simulator of the SBRP
	// artifact and the re-study) lets a warp's independent loads overlap.
	SerialLoads bool `json:"serial_loads"`
	// LaunchLatencyCycles is the time from a kernel's launch to its first
	// instruction (GPGPU-Sim's -gpgpu_kernel_launch_latency): launches run
	// one after another, each paying it. The SBRP and GPM artifacts and the
	// re-study's configuration set 5,000 cycles.
	LaunchLatencyCycles int `json:"launch_latency_cycles"`
	// SmemLatencyCycles is the latency of a shared-memory access on the
	// SM (GPGPU-Sim's -gpgpu_smem_latency), after its bank-conflict passes.
	SmemLatencyCycles int `json:"smem_latency_cycles"`
	// SmemBanks is the number of 4-byte-wide shared-memory banks (GPGPU-Sim's
	// -gpgpu_shmem_num_banks): a warp access takes one pass per distinct
	// word in its busiest bank, and the SM's shared memory serves one pass
	// per cycle.
	SmemBanks int `json:"smem_banks"`
	// LSULineCycles is what each line a load touches costs the load/store
	// path of its warp's scheduler (warps map to the SM's schedulers by
	// warp id): a line leaves for the L1 as its slot there begins, so a
	// scheduler's warps send at most one line per LSULineCycles. 0: the
	// lines of an instruction leave a cycle apart, with no path shared.
	LSULineCycles float64 `json:"lsu_line_cycles"`
	// SmemBytes is an SM's shared memory: the blocks resident on an SM
	// hold at most this much (GPGPU-Sim's -gpgpu_shmem_size).
	SmemBytes int `json:"smem_bytes"`
	// FenceBlockCycles, FenceDeviceCycles and FenceSystemCycles are what
	// a memory fence of block, device and system scope costs its warp
	// beyond waiting for what it orders. 0 keeps the simulators' costs: a
	// block fence takes an issue cycle, a device or system fence an L2
	// round trip (l2.latency_cycles) and at least FenceLatencyCycles, and
	// GPM's fence after every persistency verb adds that to the
	// write-backs' acks. Set (the h100 preset's measured costs), a system
	// fence and GPM's persist end at the later of their own round trip and
	// the last ack plus the ack's way back (half the round trip), as
	// measured: the fence waits for the last ack, not for one round trip
	// per line.
	FenceBlockCycles  int `json:"fence_block_cycles"`
	FenceDeviceCycles int `json:"fence_device_cycles"`
	FenceSystemCycles int `json:"fence_system_cycles"`
	// FenceLatencyCycles is the fewest cycles a fence of device or
	// system scope holds its warp from its issue: a floor under what it
	// waits for, as a simulator's fence opcode latency holds the warp
	// until the later of that latency and its writes' acks. It holds
	// plain fences under every model, and the ordering and durability
	// fences (OFence, DFence) of Strict, Epoch and GPM, GPM's fence
	// after every persistency verb included; not SBRP's persistency
	// verbs, which its persist buffer orders, nor None's, which are
	// free. 0: no floor.
	FenceLatencyCycles int `json:"fence_latency_cycles"`
	// FenceWaitsAll makes a fence of device or system scope, and GPM's
	// persist, wait for every write any SM issued before it, not only its
	// own warp's: it ends no earlier than the latest completion of those
	// writes (a PM write's ack, a volatile write's arrival at the L2) plus
	// the way back (half the fence's round trip), as a fence ordered
	// behind every earlier write in the memory system's queues does. Off,
	// a fence waits for its own warp's writes only, as GPGPU-Sim's does.
	FenceWaitsAll bool `json:"fence_waits_all"`
	// StepVerbs is how many verbs each lane runs in one step of the
	// engine: how far a warp runs ahead of the others in what it does
	// (a lane spinning on a flag spins that many times a step). Its
	// instructions are still timed one at a time, each when its warp is
	// the earliest (unless WholeSteps). 0: 8 (Batch), or 2 (FineBatch)
	// with FenceWaitsAll and WholeSteps.
	StepVerbs int `json:"step_verbs"`
	// WholeSteps times a warp's step as a whole when it ends, one verb
	// after another from the warp's clock before any other warp's, as
	// the engine did before it timed instructions in clock order. A line
	// the warp touches twice in one step then stays in its L1 whatever
	// the SM's other warps would have brought in between, and a store that
	// waits long carries the warp's clock ahead of the others
	// (TestStepKeepsNoFalseLocality). Only for measuring what clock order
	// changes.
	WholeSteps bool `json:"whole_steps"`
}

// CacheConfig is a set-associative cache.
type CacheConfig struct {
	SizeBytes     int `json:"size_bytes"`     // capacity
	LineBytes     int `json:"line_bytes"`     // line size (the GPU's L1's: warp accesses coalesce into lines of this size)
	Assoc         int `json:"assoc"`          // ways per set
	LatencyCycles int `json:"latency_cycles"` // hit latency (from the SM; a CPU cache's adds to the levels above it)
}

// MemConfig is a memory device with separate read and write latency and
// bandwidth.
type MemConfig struct {
	ReadLatencyCycles  int     `json:"read_latency_cycles"`  // read latency, from the last-level cache's miss to the data
	WriteLatencyCycles int     `json:"write_latency_cycles"` // write latency, from the last-level cache to the write's ack at the persistence point
	ReadGBps           float64 `json:"read_gbps"`            // read bandwidth
	WriteGBps          float64 `json:"write_gbps"`           // write bandwidth
	// SharedBus makes reads and writes share one bus, a read byte taking
	// it for 1/ReadGBps and a written byte for 1/WriteGBps, as a DRAM or
	// HBM channel's data bus is shared by both directions. Only NVM
	// traffic is timed against it (device-memory writes are not timed).
	SharedBus bool `json:"shared_bus"`
}

// MemSysConfig sizes the memory system every model's traffic crosses
// (memsys.go): ports, outstanding writes, partitions and their queues.
type MemSysConfig struct {
	// InjectBytesPerCycle is an SM's injection bandwidth into the
	// interconnect, in bytes per cycle: every line an SM writes or reads
	// crosses it.
	InjectBytesPerCycle int `json:"inject_bytes_per_cycle"`
	// SMWrites is the most line writes an SM has outstanding (sent and not
	// yet acknowledged), every model's: the L1's miss-status entries.
	SMWrites int `json:"sm_writes"`
	// SMReads is the most line reads an SM has outstanding: a load that
	// misses in the L1 holds one of the L1's miss-status entries from its
	// miss until its data is back, so one SM's reads reach at most
	// SMReads lines per round trip.
	SMReads int `json:"sm_reads"`
	// SMReadBytes is the most load data an SM has on its way back, in
	// bytes: a line read also holds, until its data is back, the distinct
	// bytes its instruction's lanes asked of the line (a 16-byte vector a
	// lane, contiguous: the whole line; one 4-byte word from each of 32
	// lines: 4 bytes each), counted in 4-byte registers. 0: no limit but
	// SMReads. Otherwise at least l1.line_bytes.
	SMReadBytes int `json:"sm_read_bytes"`
	// Channels and BanksPerChannel are the memory channels and the L2
	// banks (memory sub-partitions) of each; lines interleave over every
	// bank, and NVM and device-memory bandwidth are split evenly over the
	// channels.
	Channels        int `json:"channels"`
	BanksPerChannel int `json:"banks_per_channel"`
	// L2PortBytesPerCycle is an L2 bank's data port, in bytes per cycle.
	L2PortBytesPerCycle int `json:"l2_port_bytes_per_cycle"`
	// WriteQueueEntries is a channel's write queue per device (device
	// memory, NVM): a write holds an entry from its arrival until the
	// device has written it. Under ADR the PM queue is the persistence
	// point.
	WriteQueueEntries int `json:"write_queue_entries"`
	// ReadsQueue makes a read that misses in the L2 take an entry of its
	// channel's queue (WriteQueueEntries, per device) from its arrival
	// until its data has crossed the bus, beside the writes: one scheduler
	// queue holds both, as GPGPU-Sim's FR-FCFS queue does without a
	// separate write queue, so a read waits behind a queue full of writes.
	// Off, reads hold no entry and only share the bus.
	ReadsQueue bool `json:"reads_queue"`
	// L2FlushAtEnd writes the L2's dirty volatile lines back to memory at
	// the end of every kernel, and the kernel ends once the memory queues
	// have taken them (GPGPU-Sim's -gpgpu_flush_l2_cache). Off, they stay
	// dirty in the L2 until evicted.
	L2FlushAtEnd bool `json:"l2_flush_at_end"`
	// SFIFOL1 makes the L1 write-combining for volatile stores: each L1
	// keeps up to this many dirty volatile lines, tracked by an S-FIFO
	// (synchronization FIFO); a full S-FIFO writes its head's line to the
	// L2, and a device- or system-scope release, and the kernel's end,
	// write them all. 0: the L1 writes volatile stores through to the L2.
	SFIFOL1 int `json:"sfifo_l1"`
	// SMFarGBps is the most bytes per second (GB/s) one SM sends towards PM
	// over PCIe, beside its injection port, when PM is far. 0: only the
	// injection port limits them.
	SMFarGBps float64 `json:"sm_far_gbps"`
	// VolatileSlots makes a volatile store hold one of its SM's
	// outstanding-write slots (SMWrites) from its departure until the L2
	// has taken it, so that an L2 waiting for its write-backs holds the SM
	// back. Off, volatile stores hold no slot and only cross the SM's
	// injection port.
	VolatileSlots bool `json:"volatile_slots"`
}

// LinkConfig is the PCIe link.
type LinkConfig struct {
	PMFar         bool    `json:"pm_far"`         // PM is attached to the host: PM traffic crosses the link
	LatencyCycles int     `json:"latency_cycles"` // one-way PCIe latency, added once to a far access's way there
	GBps          float64 `json:"gbps"`           // PCIe bandwidth
	// FullDuplex gives each direction its own GBps, as PCIe links have
	// (reads from PM-far come back over one direction, writes go over the
	// other). Off, both directions share one GBps. The SBRP machines
	// (pm-near, pm-far, pm-far-eadr) set it.
	FullDuplex bool `json:"full_duplex"`
	// TLPBytes is what each transfer adds on the link beyond its data:
	// the PCIe transaction layer packet's framing, sequence number,
	// header and link CRC. 0 when GBps is already a data rate. Set, a
	// read's request is such a packet too, without data, on the direction
	// the writes take, and PCIe's ordering rules keep it behind the writes
	// posted before it.
	TLPBytes int `json:"tlp_bytes"`
	// UncachedReads makes every read of PM-far memory cross the link: the
	// GPU's L1 and L2 keep no PM-far line a read brings in, as an NVIDIA
	// GPU's caches keep no line of pinned host memory. Off, PM-far lines
	// are cached like any other, as in GPGPU-Sim.
	UncachedReads bool `json:"uncached_reads"`
	// WriteBufferBytes is how many bytes of writes towards PM-far the GPU
	// holds between its L2 and the link once their SMs have let them go:
	// a PM-far write frees its SM's outstanding-write slot when this
	// buffer takes it (a posted write), and holds its room, counted in
	// 32-byte sectors, until it has crossed the link. With TLPBytes, a
	// read's request waits for the writes the buffer holds when it
	// arrives, not for those still waiting to enter it. 0: no buffer; a
	// write holds its SM's slot until its ack.
	WriteBufferBytes int `json:"write_buffer_bytes"`
}

// PersistConfig describes the persistence point and the persist hardware of
// the models.
type PersistConfig struct {
	// Point is "adr" (a persist is durable when it enters the memory
	// controller's PM queue, after the NVM write latency) or "eadr" (durable
	// when it reaches the last-level cache: the L2 for PM-near, the host's
	// LLC across PCIe for PM-far).
	Point string `json:"point"`
	// EADRLatencyCycles is the latency from the L2 (PM-near) or the far end
	// of the PCIe link (PM-far) to the eADR persistence point.
	EADRLatencyCycles int `json:"eadr_latency_cycles"`
	// BufferEntries is the SBRP persist buffer size per SM; order,
	// acquire, release and durable markers take entries too.
	BufferEntries int `json:"buffer_entries"`
	// Window is SBRP's flush window: the most lines an SM's persist buffer
	// has flushed and not yet had acknowledged. It is SBRP's own limit; every
	// model's writes are bounded by the memory system's (Mem.SMWrites).
	Window int `json:"window"`
	// AckAtQueue acknowledges a persist when the GPU's memory partition
	// passes it to the PM queue (after the interconnect and once the
	// queue has room: the link's and the NVM's bandwidth gate it), as the
	// SBRP artifact and the re-study's simulator do, instead of after the
	// NVM write latency too: that queue is in the persistence domain, and
	// the NVM write latency is its drain to the media (which a PCommit
	// waits for under a volatile WPQ). For PM-far the link's latency lies
	// after the ack too, and it applies under eADR as well: the SBRP
	// artifact acknowledges every PM write (its -pm_enable_adr is on in
	// every configuration) when the partition issues it into the PM's
	// latency pipeline (l2cache.cc, dram_cycle), before -pm_latency (300
	// near, 900 far, 600 far with eADR). The SBRP machines and volta set
	// it.
	AckAtQueue bool `json:"ack_at_queue"`
	// EpochOwnAcks makes an Epoch or GPM fence or barrier wait for the
	// acks of the PM lines its own warp dirtied, as the SBRP artifact's
	// simulator does (a warp waits for its outstanding persists), instead
	// of for every flush of the SM. The L1 is still written back and
	// invalidated whole. The SBRP machines set it.
	EpochOwnAcks bool `json:"epoch_own_acks"`
	// EpochWriteThrough makes Epoch and GPM write every PM store through
	// the L1 as it is executed (the store waits only for its write to
	// leave the SM), as NVIDIA's L1 does (the h100 preset sets it). Off, a
	// PM store leaves its L1 line dirty and the next ordering verb writes
	// the SM's dirty PM lines back, as on the SBRP machines: the
	// artifact's epoch and GPM configurations run -pm_model 3
	// (PM_UNBUFF_SRP), whose L1 is write-back (-gpgpu_cache:dl1 ...L:B)
	// and whose every persistent op flushes the L1's PM lines and waits
	// (shader.cc, perform_ordering_ops), as the SBRP paper describes
	// Epoch.
	EpochWriteThrough bool `json:"epoch_write_through"`
	// SectorBytes makes a PM line's write-back, write-through or
	// persist-buffer flush send only the sectors of this size that were
	// written (0: the whole line), as the sectored L1 of the SBRP
	// artifact's simulator does (GPGPU-Sim's sector cache, 32-byte
	// sectors; its flushes are acknowledged per sector). The SBRP
	// machines set it to 32.
	SectorBytes int `json:"sector_bytes"`
	// NVWFIFOL1 and NVWFIFOL2 are the NVW-FIFO sizes of the scoped persist
	// barrier hardware (scoped persist barrier paper, ScopedBarrier): the
	// dirty PM lines each L1, and the L2, tracks; a full FIFO sends its
	// head on (L1 to L2, L2 to NVM).
	NVWFIFOL1 int `json:"nvw_fifo_l1"`
	NVWFIFOL2 int `json:"nvw_fifo_l2"`
	// None makes the machine one whose PM is timed as device memory (the
	// DRAM-only baseline): no persist work, and every persistency verb is
	// free. It is a property of the machine that only the None model
	// describes: New refuses any other model on it (ErrPMAsDRAM).
	None bool `json:"none"`
}

const (
	pointADR  = "adr"
	pointEADR = "eadr"
)

// The SBRP baseline machine (SBRP Table 1 and the SBRP artifact's
// GPGPU-Sim configuration; pmbench keys cites each value).
func sbrpBase() Config {
	return Config{
		GPU: GPUConfig{
			ClockMHz:           1365, // Table 1: clock speed 1365 MHz
			SMs:                30,   // Table 1: 30 SMs
			WarpSize:           32,   // CUDA warp
			Schedulers:         4,    // not in Table 1: GPGPU-Sim's Pascal/Volta configs use 4 schedulers per SM
			MaxThreadsPerSM:    2048, // not in Table 1: CUDA per-SM limit (compute capability 6.x/7.x)
			MaxBlocksPerSM:     32,   // not in Table 1: CUDA per-SM limit
			MaxThreadsPerBlock: 1024, // Table 1: threads/block 1024
			// not in Table 1: the artifact's gpgpusim.config
			// (-gpgpu_kernel_launch_latency 5000, every model).
			LaunchLatencyCycles: 5000,
			// not in Table 1: the artifact's gpgpusim.config
			// (-gpgpu_smem_latency 20, -gpgpu_shmem_num_banks 32).
			SmemLatencyCycles: 20,
			SmemBanks:         32,
			SmemBytes:         64 << 10, // the artifact's -gpgpu_shmem_size 65536
		},
		// Table 1: L1 64 KB/SM; artifact: L1 hit latency 20 cycles; 128-byte
		// lines (the coalescing unit of the artifact's flushes); associativity
		// not given, 4 ways assumed.
		L1: CacheConfig{SizeBytes: 64 << 10, LineBytes: 128, Assoc: 4, LatencyCycles: 20},
		// Table 1: L2 3 MB; artifact: L2 ROP latency 160 cycles; 16 ways assumed.
		L2: CacheConfig{SizeBytes: 3 << 20, LineBytes: 128, Assoc: 16, LatencyCycles: 160},
		// Table 1: GDDR 336 GB/s; artifact: device-memory latency 100 cycles.
		DRAM: MemConfig{ReadLatencyCycles: 100, WriteLatencyCycles: 100, ReadGBps: 336, WriteGBps: 336},
		// Table 1: NVM 84 GB/s read, 42 GB/s write (1/4 and 1/8 of GDDR in the
		// artifact); artifact: PM-near adds 300 cycles to the 100 of device
		// memory.
		NVM: MemConfig{ReadLatencyCycles: 400, WriteLatencyCycles: 400, ReadGBps: 84, WriteGBps: 42},
		// Table 1: PCIe 28 GB/s, 300 ns. Unused in PM-near.
		PCIe: LinkConfig{LatencyCycles: 410, GBps: 28},
		Persist: PersistConfig{
			Point:             pointADR, // artifact: the memory partition's PM queue is the persistence point
			EADRLatencyCycles: 100,      // artifact: PM-far eADR adds 600 = 900-300 cycles; the partition's 100-cycle base remains
			BufferEntries:     256,      // artifact: 256 persist-buffer entries per L1 (Fig. 10a sweeps 32-256)
			Window:            6,        // Table 1: window size 6 (Fig. 10c sweeps 2-12)
			NVWFIFOL1:         16,       // scoped persist barrier paper Table 2 (for ScopedBarrier on this machine)
			NVWFIFOL2:         64,       // scoped persist barrier paper Table 2
		},
		Mem: sbrpMem(),
		CPU: cosplayCPU(), // every machine's CPU runs are timed on COSPlay Table 2's core
	}
}

// sbrpMem is the memory system of the SBRP artifact's gpgpusim.config
// (models/*/gpgpusim.config, the same for every model).
func sbrpMem() MemSysConfig {
	return MemSysConfig{
		// -icnt_flit_size 40: one 40-byte flit a cycle per node, a 32-byte
		// sector and its header
		InjectBytesPerCycle: 32,
		// -gpgpu_cache:dl1 ...,A:256:8,...: 256 miss-status entries per L1
		SMWrites: 256,
		SMReads:  256,
		// -gpgpu_n_mem 12, -gpgpu_n_sub_partition_per_mchannel 2
		Channels: 12, BanksPerChannel: 2,
		// -gpgpu_cache:dl2 ...,32: a 32-byte data port per L2 bank
		L2PortBytesPerCycle: 32,
		// -gpgpu_frfcfs_dram_sched_queue_size 64 (and the partition's
		// L2-to-memory queue, -gpgpu_dram_partition_queues 64:64:64:64)
		WriteQueueEntries: 64,
		// reads and writes in that one queue (-dram_seperate_write_queue_enable
		// is commented out)
		ReadsQueue: true,
		// -gpgpu_flush_l2_cache 1
		L2FlushAtEnd: true,
	}
}

// PresetPMNear is SBRP's PM-near machine (SBRP Table 1): NVM on the
// GPU's memory partitions, 300 cycles more than device memory.
func PresetPMNear() Config {
	c := sbrpBase()
	c.Name = "pm-near"
	artifactPhysics(&c)
	return c
}

// artifactPhysics sets the memory-system behaviour of the SBRP artifact's
// simulator on an SBRP machine: only the persist buffer's drain is
// windowed (a cache flush sends every dirty line at once), a persist is
// acknowledged when the GPU's memory partition passes it to the PM queue,
// an Epoch or GPM fence waits for its own warp's persists, a PM line's
// write-back sends only its written 32-byte sectors, and Epoch and GPM
// keep PM stores dirty in the L1 until an ordering verb writes the SM's
// PM lines back (the artifact's -pm_model 3), a fence of device or system
// scope holds its warp at least the simulator's fence latency (200
// cycles; SBRP's persistency verbs excepted), and PM reads and writes
// share one bus: the artifact's PM is a GDDR channel model with its
// bursts scaled down per direction (dram.cc), near (1/4 read, 1/8 write)
// and far (1/12 both ways, -pm_bw_scale_read/-write 12: the 28 GB/s of
// PCIe, so the far link is one bus both directions share).
func artifactPhysics(c *Config) {
	c.GPU.FenceLatencyCycles = 200
	c.Persist.AckAtQueue = true
	c.Persist.EpochOwnAcks = true
	c.Persist.EpochWriteThrough = false
	c.Persist.SectorBytes = 32
	c.NVM.SharedBus = true
	c.PCIe.FullDuplex = false
}

// PresetPMFar is SBRP's PM-far machine (SBRP Table 1, GPM's system): NVM
// on the host, reached over PCIe. The artifact charges 900 cycles over
// device memory and 1/12 of its bandwidth (336/12 = 28 GB/s, the PCIe
// bandwidth of Table 1); here the 900 cycles are the NVM's own 300 plus a
// 600-cycle link (Table 1's 300 ns each way is 410 cycles at 1365 MHz; the
// artifact's figure, which includes the host side, is used).
func PresetPMFar() Config {
	c := sbrpBase()
	c.Name = "pm-far"
	c.PCIe = LinkConfig{PMFar: true, LatencyCycles: 600, GBps: 28}
	artifactPhysics(&c)
	return c
}

// PresetPMFarEADR is PM-far with eADR (SBRP §7, Fig. 9): a persist is
// durable in the host's LLC, so it pays the link (600 cycles) and the
// 100-cycle partition base but not the NVM's 300: the artifact's +600.
// The artifact's sbrp_far_eadr configuration differs from sbrp_far only
// by that -pm_latency (600 for 900), the latency pipeline every PM
// request crosses, reads included (l2cache.cc, dram_cycle): so the NVM's
// read and write latencies both lose the 300 cycles here.
func PresetPMFarEADR() Config {
	c := PresetPMFar()
	c.Name = "pm-far-eadr"
	c.Persist.Point = pointEADR
	c.NVM.ReadLatencyCycles -= pmFarEADRCut
	c.NVM.WriteLatencyCycles -= pmFarEADRCut
	return c
}

// pmFarEADRCut is what the artifact's sbrp_far_eadr takes off every PM
// request's latency: -pm_latency 600 against sbrp_far's 900.
const pmFarEADRCut = 900 - 600

// PresetGOPE is the machine of the scoped persist barrier paper (Gope et
// al., GPGPU 2018, Table 2; the preset is named after its first author): 4 CUs at 1 GHz (1 cycle = 1 ns), 40 wavefronts of 64 lanes per
// CU, 16 KB 16-way L1 and 512 KB 16-way L2 with 64-byte lines, DRAM 25 ns,
// NVRAM 75 ns read and 250 ns write, NVW-FIFOs of 16 (L1) and 64 (L2)
// entries. Table 2 gives no cache latencies, bandwidths or block limits;
// those are the SBRP machine's (SBRP Table 1), noted per field.
func PresetGOPE() Config {
	c := sbrpBase()
	c.Name = "gope"
	c.GPU = GPUConfig{
		ClockMHz:           1000,     // Table 2: 1 GHz
		SMs:                4,        // Table 2: 4 CUs
		WarpSize:           64,       // Table 2: 64-wide SIMD wavefronts
		Schedulers:         4,        // not in Table 2: GCN issues from 4 SIMDs per CU
		MaxThreadsPerSM:    40 * 64,  // Table 2: 40 wavefronts per CU
		MaxBlocksPerSM:     40,       // not in Table 2: at least one wavefront per workgroup
		MaxThreadsPerBlock: 1024,     // not in Table 2: OpenCL limit used by gem5's HSA runtime
		SmemLatencyCycles:  20,       // not in Table 2: the SBRP artifact's
		SmemBanks:          32,       // not in Table 2: GCN's LDS has 32 banks
		SmemBytes:          64 << 10, // not in Table 2: GCN's LDS is 64 KB per CU
	}
	c.L1 = CacheConfig{SizeBytes: 16 << 10, LineBytes: 64, Assoc: 16, LatencyCycles: 20}   // Table 2 size/ways/line; latency: SBRP artifact
	c.L2 = CacheConfig{SizeBytes: 512 << 10, LineBytes: 64, Assoc: 16, LatencyCycles: 160} // Table 2 size/ways/line; latency: SBRP artifact
	c.DRAM.ReadLatencyCycles, c.DRAM.WriteLatencyCycles = 25, 25                           // Table 2: 25 ns
	c.NVM.ReadLatencyCycles, c.NVM.WriteLatencyCycles = 75, 250                            // Table 2: 75 ns read, 250 ns write
	c.Persist.NVWFIFOL1, c.Persist.NVWFIFOL2 = 16, 64                                      // Table 2
	c.Mem.SFIFOL1 = 16                                                                     // Table 2: L1 S-FIFO 16 (§3: the L1 is write-combining)
	c.Persist.EADRLatencyCycles = 25                                                       // DRAM-side base latency of Table 2
	// Table 2 and §7.2.1 set NVRAM apart from DRAM by its latencies alone
	// (75 ns read and 250 ns write against 25 ns); the paper's gem5 models
	// NVRAM with a second DRAM controller, whose bandwidth latencies do not
	// change. So the NVM moves bytes as fast as the device memory does, not
	// at the SBRP machines' 1/4 and 1/8 of it (their Optane-like PM).
	c.NVM.ReadGBps, c.NVM.WriteGBps = c.DRAM.ReadGBps, c.DRAM.WriteGBps
	// Table 2 gives no memory-system sizes: the SBRP artifact's (sbrpMem),
	// except that gem5 does not flush the L2 at a kernel's end.
	c.Mem.L2FlushAtEnd = false
	return c
}

// PresetVolta is the GPGPU-Sim 4.0 Volta QV100 machine of the persistency
// re-study (its Table I): 80 SMs, 4 schedulers, 2048 threads, 64 warps
// and 32 CTAs per SM, 32 KB L1, 6 MB L2, 32 channels with 2 L2 banks each,
// NVM 200 cycles read and 600 write, DRAM 150 cycles. Table I gives no
// clock, cache latencies, associativity or bandwidths; those come from
// the GPGPU-Sim configuration the re-study ran, published with its
// artifact (github.com/peiyi1/memory_persistency_model_for_GPU, e.g.
// megakv/search/result/gpgpusim.config, the SM7_QV100 configuration plus
// the re-study's options):
//   - core and L2 clock 1132 MHz (-gpgpu_clock_domains 1132:1132:1132:850);
//   - L1 hit latency 20 cycles (-gpgpu_l1_latency), L2 160 cycles
//     (-gpgpu_l2_rop_latency);
//   - L2 24-way: each of the 64 L2 banks has 32 sets of 24 ways of 128
//     bytes (-gpgpu_cache:dl2 S:32:128:24), 6 MB in all;
//   - memory bandwidth 870.4 GB/s for DRAM and NVM alike: the re-study's
//     NVM is GPGPU-Sim's HBM model of the QV100 with only its latencies
//     changed (-dram_latency 200, -dram_write_latency 600, the latter its
//     own option applied to writes in the memory partition's latency
//     queue); 32 channels (-gpgpu_n_mem) of a 16-byte bus
//     (-gpgpu_dram_buswidth) moving data twice per 850 MHz memory cycle
//     (-dram_data_command_freq_ratio 2) give 32 × 16 × 2 × 850 MHz. Reads
//     and writes share that bus, as in GPGPU-Sim (nvm.shared_bus);
//   - an ADR write is durable, and acknowledged, when its memory
//     partition's write-pending queue accepts it (persist.ack_at_queue):
//     ADR puts the WPQ in the persistence domain, and the re-study's
//     GPGPU-Sim spends the 600-cycle NVM write latency inside that queue.
//     Under PCT the latency is the WPQ's drain, which a PCommit waits for.
//
// The L1 stays 4-way (the artifact's is a 256-way sectored cache; the
// re-study's L1 writes through and its PM traffic is the L2's).
func PresetVolta() Config {
	c := sbrpBase()
	c.Name = "volta"
	c.GPU = GPUConfig{ClockMHz: 1132, SMs: 80, WarpSize: 32, Schedulers: 4, MaxThreadsPerSM: 2048, MaxBlocksPerSM: 32, MaxThreadsPerBlock: 1024,
		// the re-study's gpgpusim.config: -gpgpu_kernel_launch_latency 5000,
		// -gpgpu_smem_latency 20, -gpgpu_shmem_num_banks 32; Table I: 96 KB
		// of shared memory per SM
		LaunchLatencyCycles: 5000, SmemLatencyCycles: 20, SmemBanks: 32, SmemBytes: 96 << 10}
	c.L1 = CacheConfig{SizeBytes: 32 << 10, LineBytes: 128, Assoc: 4, LatencyCycles: 20}
	c.L2 = CacheConfig{SizeBytes: 6 << 20, LineBytes: 128, Assoc: 24, LatencyCycles: 160}
	c.DRAM = MemConfig{ReadLatencyCycles: 150, WriteLatencyCycles: 150, ReadGBps: voltaMemGBps, WriteGBps: voltaMemGBps}
	c.NVM = MemConfig{ReadLatencyCycles: 200, WriteLatencyCycles: 600, ReadGBps: voltaMemGBps, WriteGBps: voltaMemGBps, SharedBus: true}
	c.Persist.AckAtQueue = true // ADR: the WPQ is in the persistence domain
	c.Persist.EADRLatencyCycles = 150
	c.WriteBack = wbVolta() // Table I: 32 channels, 2 L2 banks per channel
	// Table I: 32 channels of 2 L2 banks; the re-study's gpgpusim.config
	// has the SBRP artifact's ports and queues (-icnt_flit_size 40,
	// dl1 A:256:8, dl2 data port 32, -gpgpu_frfcfs_dram_sched_queue_size
	// 64) and does not flush the L2 at a kernel's end.
	c.Mem.Channels, c.Mem.BanksPerChannel = 32, 2
	c.Mem.L2FlushAtEnd = false
	// GPGPU-Sim 4.0's QV100 caches are sectored (32-byte sectors, as
	// writeback.sector_bytes): every model's writes send what was written.
	c.Persist.SectorBytes = 32
	return c
}

// voltaMemGBps is the peak bandwidth of the re-study's memory (DRAM and
// NVM): 32 channels × 16 bytes × 2 transfers per cycle × 850 MHz, in GB/s
// (see PresetVolta).
const voltaMemGBps = 32 * 16 * 2 * 850e6 / 1e9

// PresetDRAM is the DRAM-only baseline: the PM-near machine with PM at
// device-memory latency and bandwidth and no persist work (Config.Persist.None).
// Speedups in the SBRP figures are taken over machines like this one. It
// runs the None model only: New(PresetDRAM(), None).
func PresetDRAM() Config {
	c := sbrpBase()
	c.Name = "dram"
	c.NVM = c.DRAM
	c.Persist.None = true
	artifactPhysics(&c) // the same simulator: its sectored caches send what was written
	return c
}

// PresetH100 is a real GPU: an NVIDIA H100 80GB HBM3 (SXM5, 132 SMs)
// whose PM is pinned, mapped host DRAM reached over PCIe Gen5 x16 with DDIO
// on, so a persist is durable in the host's last-level cache: GPM's
// GPM-eADR configuration, measured on 2026-11-25 (shared/calibration/h100,
// the hw-validate experiment). Its parameters are public specifications
// and three measured fence costs; everything else the measurements show
// must follow from them. Where neither gives a value the SBRP machine's is
// kept and the field says so.
func PresetH100() Config {
	c := sbrpBase()
	c.Name = "h100"
	c.GPU = GPUConfig{
		ClockMHz:           1974.6, // measured SM clock (clock64 against %globaltimer)
		SMs:                132,    // H100 SXM5 (and measured)
		WarpSize:           32,
		Schedulers:         4,    // Hopper SM: four processing blocks, one warp scheduler each
		MaxThreadsPerSM:    2048, // compute capability 9.0
		MaxBlocksPerSM:     32,
		MaxThreadsPerBlock: 1024,
		// measured: an empty kernel takes 5.76 us from event to event
		LaunchLatencyCycles: 11374,
		// measured: one thread's dependent shared-memory loads, 29.1
		// cycles each (bench/h100/measured7.csv, smem chase)
		SmemLatencyCycles: 29,
		SmemBanks:         32,
		SmemBytes:         228 << 10, // compute capability 9.0: 228 KB per SM
		// measured (bench/h100/measured9.csv, lshape): a step of one warp's
		// 4-byte loads grows by 2.1-2.3 cycles a line from 8 to 128 lines,
		// and by 2.2-2.3 a line with two warps a scheduler (8 warps)
		LSULineCycles: 2.2,
		// measured (shared/calibration/h100, lat host/lanes32): each fence
		// after a store over the store alone, and the system fence alone
		FenceBlockCycles:  10,
		FenceDeviceCycles: 704,
		FenceSystemCycles: 1280,
		// measured (bench/h100/measured3.csv, bystander): a fence waits
		// for every write any SM issued before it
		FenceWaitsAll: true,
	}
	// Hopper: 256 KB of L1 and shared memory per SM (all L1 for kernels
	// without shared memory), 50 MB of L2; lines of 128 bytes in 32-byte
	// sectors. Associativity is not measured here: the SBRP machine's.
	// Hit latencies measured (bench/h100/measured3.csv, load): one
	// thread's dependent loads, 39.6 cycles each over 8 KB (ld.ca) and
	// 290.3 over 1 MB (ld.cg, after a warm lap).
	c.L1 = CacheConfig{SizeBytes: 256 << 10, LineBytes: 128, Assoc: 4, LatencyCycles: 40}
	c.L2 = CacheConfig{SizeBytes: 50 << 20, LineBytes: 128, Assoc: 16, LatencyCycles: 290}
	// HBM3, 3.35 TB/s (H100 SXM5; 3,157 GB/s of writes measured). Read
	// latency measured (load device): dependent loads over 256 MB, each a
	// line not yet read, 660.7 cycles, less the L2's 290. Write latency
	// not measured: the SBRP machine's.
	c.DRAM = MemConfig{ReadLatencyCycles: 370, WriteLatencyCycles: 100, ReadGBps: 3350, WriteGBps: 3350}
	// The "PM" is host DRAM behind the link; the link binds its bandwidth
	// long before the host's memory does. Read latency measured (load
	// host): dependent loads over 512 MB of pinned host memory, 2,440
	// cycles each, less the L2's 290 and the link's 350 (pcie.latency_cycles
	// is added once per read, as the SBRP artifact's far round trip is):
	// the host's side and the completion's way back. Write latency not
	// measured (the SBRP machine's NVM); under eADR only the queue's
	// occupancy sees it.
	c.NVM = MemConfig{ReadLatencyCycles: 1800, WriteLatencyCycles: 400, ReadGBps: 300, WriteGBps: 300}
	// PCIe Gen5 x16: 32 GT/s x 16 lanes x 128/130 = 63.0 GB/s each way.
	// A write's way to the host is half the measured system fence (a
	// round trip to the host: 1,280 cycles), of which the L2 takes its
	// 290 and the link the rest. Reads of host memory are not cached
	// (measured, load host-l2: a 1 MB working set read again after a warm
	// lap, 2,390 cycles a load, as cold).
	c.PCIe = LinkConfig{PMFar: true, LatencyCycles: 640 - 290, GBps: 63.0, FullDuplex: true, UncachedReads: true}
	// Every write is one memory-write TLP: a 4-byte STP token (framing
	// and sequence number, PCIe 3.0+), a 4-DW header (64-bit address) and
	// a 4-byte LCRC around its data, so a 128-byte line takes 152 bytes
	// of the link (53 GB/s of data).
	c.PCIe.TLPBytes = 24
	// Measured (bench/h100/measured5-h100.csv, depth S2): a system fence
	// beside two SMs streaming to host memory waits 29,422 cycles, 27,993
	// more than alone, for 752 KB in front of it at the link's 26.87 bytes
	// a cycle, of which the two SMs' outstanding-write slots hold 64 KB
	// (2 x 256 lines): the GPU holds about 670 KB more before it pushes
	// back (measured7.csv's rprobe S2: 731 KB; burst S4 256K: four SMs
	// issue 1 MB at their own rate, 650 KB beyond what the link took and
	// their slots hold, with no slowdown).
	c.PCIe.WriteBufferBytes = 670 << 10
	c.Persist.Point = pointEADR
	c.Persist.EADRLatencyCycles = 1 // DDIO: durable on arrival in the host's LLC
	c.Persist.AckAtQueue = false    // a real GPU: the host acknowledges
	// NVIDIA's L1 writes global stores through, and a fence waits for its
	// own thread's writes; 32-byte sectors.
	c.Persist.EpochWriteThrough = true
	c.Persist.EpochOwnAcks = true
	c.Persist.SectorBytes = 32
	c.PCIe.FullDuplex = true
	// Not measured here: the SBRP artifact's memory system, except the
	// SM's injection port, which the measurement gives (one SM streams
	// 53-63 GB/s to device memory, about 32 bytes per SM cycle: the
	// artifact's value too) and the channels: five HBM3 stacks of 16
	// channels each (JEDEC HBM3).
	c.Mem.Channels = 80
	c.Mem.ReadsQueue = false // not measured: reads hold no entry
	// Measured (bench/h100/measured2.csv, stream host/sms1): one SM with 32
	// warps streams 50.3 GB/s to host memory, below the link's 52.4 with
	// every SM; two SMs each issue 256 KB of host writes at 52 GB/s at once
	// (measured5-h100.csv, burst S2), so the limit is the SM's, not the
	// link's. Without it one SM overran the link and queued a round trip of
	// writes in front of every fence beside it.
	c.Mem.SMFarGBps = 50.3
	// Measured (bench/h100/measured3.csv, depth device/S131): a system
	// fence beside 131 SMs streaming 16-byte stores to device memory waits
	// 4.0-4.25 K cycles whatever their warps, 1.3 K alone. 131 SMs' 256
	// lines of 128 bytes drained at HBM's measured 3,157 GB/s (1,599 bytes
	// a cycle) take the 2.7 K between: the volatile stores wait in the
	// same outstanding-write slots, and the L2 takes them only as fast as
	// it writes its dirty lines back.
	c.Mem.VolatileSlots = true
	// The L2 is the device memory's point of coherence: a kernel's end
	// leaves its dirty lines in place (CUDA C++ Programming Guide, device
	// memory L2 access management), unlike GPGPU-Sim's flush.
	c.Mem.L2FlushAtEnd = false
	// Measured, by Little's law over the round trip of a read alone
	// (bench/h100/measured9.csv, gpmbench9.cu): one SM of 32 warps, each
	// lane loading one 4-byte word from each of 32 lines (a line a lane),
	// four loads in flight, reads 4,096 lines a step in 4,112 cycles, 690
	// lines in flight at the 693-cycle chase (8 lines an instruction,
	// four lanes in each: 662). Contiguous 16-byte loads, whose lines
	// each bring 128 bytes to the registers, reach only 370 lines
	// (measured7.csv, lstream device/sms1/u4 w32: 71.6 B/cycle at 660.7
	// cycles; host memory 358-400 over four runs; measured9's v16 u4 w32:
	// 368), and contiguous 4-byte loads as few: what bounds those is the
	// data on its way back, 370 lines of 128 bytes.
	c.Mem.SMReads = 690
	c.Mem.SMReadBytes = 370 * 128
	return c
}

var presets = []struct {
	name string
	f    func() Config
}{
	{"pm-near", PresetPMNear},
	{"pm-far", PresetPMFar},
	{"pm-far-eadr", PresetPMFarEADR},
	{"gope", PresetGOPE},
	{"volta", PresetVolta},
	{"dram", PresetDRAM},
	{"cosplay", PresetCOSPlay},
	{"h100", PresetH100},
}

// GPULimits returns the GPU shape the executors schedule on.
func (c Config) GPULimits() pm.GPULimits {
	g := c.GPU
	return pm.GPULimits{SMs: g.SMs, WarpSize: g.WarpSize, MaxThreadsPerSM: g.MaxThreadsPerSM,
		MaxBlocksPerSM: g.MaxBlocksPerSM, MaxThreadsPerBlock: g.MaxThreadsPerBlock, SharedPerSM: g.SmemBytes}
}

// Presets returns the preset names in a fixed order.
func Presets() []string {
	out := make([]string, len(presets))
	for i, p := range presets {
		out[i] = p.name
	}
	return out
}

// Preset returns the preset named name (see Presets).
func Preset(name string) (Config, error) {
	for _, p := range presets {
		if p.name == name {
			return p.f(), nil
		}
	}
	return Config{}, fmt.Errorf("%w: %q (have %s)", ErrPreset, name, strings.Join(Presets(), ", "))
}

// LoadConfig decodes JSON onto base (keys absent from data keep base's
// values) and validates the result. An unknown key is an error naming it.
// The write-back group's former name, "restudy", is read as "writeback".
func LoadConfig(data []byte, base Config) (Config, error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) == nil {
		if old, ok := top["restudy"]; ok {
			if _, both := top["writeback"]; both {
				return Config{}, fmt.Errorf("%w: both \"restudy\" and \"writeback\" (its new name)", ErrConfig)
			}
			delete(top, "restudy")
			top["writeback"] = old
			if data, err := json.Marshal(top); err == nil {
				return LoadConfig(data, base)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	c := base
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Set applies overrides of the form "key=value", where key is a dotted path
// of JSON keys ("nvm.write_latency_cycles=500", "pcie.pm_far=true"), then
// validates the result. On error c is unchanged.
func (c *Config) Set(kv ...string) error {
	nc := *c
	for _, s := range kv {
		key, val, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%w: override %q is not key=value", ErrConfig, s)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		f, err := field(reflect.ValueOf(&nc).Elem(), key)
		if err != nil {
			return err
		}
		if err := setValue(f, key, val); err != nil {
			return err
		}
	}
	if err := nc.Validate(); err != nil {
		return err
	}
	*c = nc
	return nil
}

// Keys returns every settable key in declaration order.
func Keys() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := prefix + jsonName(f)
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, name+".")
				continue
			}
			out = append(out, name)
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// CanonicalKey returns key as Keys spells it: the write-back models' keys
// (writeback.*) were once restudy.*, and Set and Value still take that
// spelling.
func CanonicalKey(key string) string {
	if rest, ok := strings.CutPrefix(key, "restudy."); ok {
		return "writeback." + rest
	}
	return key
}

func field(v reflect.Value, key string) (reflect.Value, error) {
	key = CanonicalKey(key)
	parts := strings.Split(key, ".")
	for i, p := range parts {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, fmt.Errorf("%w: unknown key %q (%s)", ErrConfig, key, keyHint(key))
		}
		t := v.Type()
		found := false
		for j := range t.NumField() {
			if jsonName(t.Field(j)) == p {
				v = v.Field(j)
				found = true
				break
			}
		}
		if !found {
			return reflect.Value{}, fmt.Errorf("%w: unknown key %q (%s)", ErrConfig, strings.Join(parts[:i+1], "."), keyHint(key))
		}
	}
	if v.Kind() == reflect.Struct {
		return reflect.Value{}, fmt.Errorf("%w: key %q names a group, not a parameter (%s)", ErrConfig, key, keyHint(key+".x"))
	}
	return v, nil
}

func setValue(f reflect.Value, key, val string) error {
	bad := func(err error) error { return fmt.Errorf("%w: %s=%q: %w", ErrConfig, key, val, err) }
	switch f.Kind() {
	case reflect.Int:
		n, err := strconv.ParseInt(val, 0, 64)
		if err != nil {
			return bad(err)
		}
		if n > math.MaxInt32 || n < math.MinInt32 {
			return bad(fmt.Errorf("out of range"))
		}
		f.SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return bad(err)
		}
		f.SetFloat(x)
	case reflect.Bool:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return bad(err)
		}
		f.SetBool(b)
	case reflect.String:
		f.SetString(val)
	default:
		return bad(fmt.Errorf("unsupported kind %s", f.Kind()))
	}
	return nil
}

// Validate checks every field and returns an error wrapping ErrConfig that
// names the first bad one.
func (c *Config) Validate() error {
	bad := func(key string, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, key, fmt.Sprintf(format, args...))
	}
	pos := func(key string, v int) error {
		if v <= 0 {
			return bad(key, "%d, want > 0", v)
		}
		return nil
	}
	posf := func(key string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return bad(key, "%v, want a positive finite number", v)
		}
		return nil
	}
	g := c.GPU
	for _, p := range []struct {
		k string
		v int
	}{
		{"gpu.sms", g.SMs}, {"gpu.warp_size", g.WarpSize}, {"gpu.schedulers", g.Schedulers},
		{"gpu.max_threads_per_sm", g.MaxThreadsPerSM}, {"gpu.max_blocks_per_sm", g.MaxBlocksPerSM},
		{"gpu.max_threads_per_block", g.MaxThreadsPerBlock},
		{"gpu.smem_latency_cycles", g.SmemLatencyCycles}, {"gpu.smem_banks", g.SmemBanks}, {"gpu.smem_bytes", g.SmemBytes},
		{"l1.latency_cycles", c.L1.LatencyCycles}, {"l2.latency_cycles", c.L2.LatencyCycles},
		{"dram.read_latency_cycles", c.DRAM.ReadLatencyCycles}, {"dram.write_latency_cycles", c.DRAM.WriteLatencyCycles},
		{"nvm.read_latency_cycles", c.NVM.ReadLatencyCycles}, {"nvm.write_latency_cycles", c.NVM.WriteLatencyCycles},
		{"pcie.latency_cycles", c.PCIe.LatencyCycles}, {"persist.eadr_latency_cycles", c.Persist.EADRLatencyCycles},
		{"persist.buffer_entries", c.Persist.BufferEntries}, {"persist.window", c.Persist.Window},
		{"persist.nvw_fifo_l1", c.Persist.NVWFIFOL1}, {"persist.nvw_fifo_l2", c.Persist.NVWFIFOL2},
		{"mem.inject_bytes_per_cycle", c.Mem.InjectBytesPerCycle}, {"mem.sm_writes", c.Mem.SMWrites},
		{"mem.sm_reads", c.Mem.SMReads},
		{"mem.channels", c.Mem.Channels}, {"mem.banks_per_channel", c.Mem.BanksPerChannel},
		{"mem.l2_port_bytes_per_cycle", c.Mem.L2PortBytesPerCycle}, {"mem.write_queue_entries", c.Mem.WriteQueueEntries},
	} {
		if err := pos(p.k, p.v); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		k string
		v float64
	}{
		{"gpu.clock_mhz", g.ClockMHz}, {"dram.read_gbps", c.DRAM.ReadGBps}, {"dram.write_gbps", c.DRAM.WriteGBps},
		{"nvm.read_gbps", c.NVM.ReadGBps}, {"nvm.write_gbps", c.NVM.WriteGBps}, {"pcie.gbps", c.PCIe.GBps},
	} {
		if err := posf(p.k, p.v); err != nil {
			return err
		}
	}
	for _, cc := range []struct {
		name string
		c    CacheConfig
	}{{"l1", c.L1}, {"l2", c.L2}} {
		if err := pos(cc.name+".size_bytes", cc.c.SizeBytes); err != nil {
			return err
		}
		if err := pos(cc.name+".assoc", cc.c.Assoc); err != nil {
			return err
		}
		if lb := cc.c.LineBytes; lb < 8 || lb&(lb-1) != 0 {
			return bad(cc.name+".line_bytes", "%d, want a power of two >= 8", lb)
		}
		if cc.c.SizeBytes%(cc.c.LineBytes*cc.c.Assoc) != 0 {
			return bad(cc.name+".size_bytes", "%d is not a multiple of line_bytes*assoc = %d", cc.c.SizeBytes, cc.c.LineBytes*cc.c.Assoc)
		}
	}
	if c.L2.LineBytes != c.L1.LineBytes {
		return bad("l2.line_bytes", "%d differs from l1.line_bytes %d", c.L2.LineBytes, c.L1.LineBytes)
	}
	if g.WarpSize > 1024 {
		return bad("gpu.warp_size", "%d, want at most 1024", g.WarpSize)
	}
	if g.MaxThreadsPerBlock > g.MaxThreadsPerSM {
		return bad("gpu.max_threads_per_block", "%d is more than an SM holds (gpu.max_threads_per_sm = %d)", g.MaxThreadsPerBlock, g.MaxThreadsPerSM)
	}
	if c.Persist.Window > c.Persist.BufferEntries {
		return bad("persist.window", "%d is larger than the persist buffer (persist.buffer_entries = %d)", c.Persist.Window, c.Persist.BufferEntries)
	}
	if c.Persist.Window > 1024 || c.Persist.NVWFIFOL1 > 1<<16 || c.Persist.NVWFIFOL2 > 1<<16 {
		return bad("persist.window", "window or NVW-FIFO too large to model")
	}
	if g.FenceBlockCycles < 0 || g.FenceDeviceCycles < 0 || g.FenceSystemCycles < 0 || g.FenceSystemCycles > 1<<20 || g.FenceDeviceCycles > 1<<20 || g.FenceBlockCycles > 1<<20 {
		return bad("gpu.fence_system_cycles", "fence costs must be from 0 to 2^20 cycles")
	}
	if g.FenceLatencyCycles < 0 || g.FenceLatencyCycles > 1<<20 {
		return bad("gpu.fence_latency_cycles", "%d, want 0 to 2^20 cycles", g.FenceLatencyCycles)
	}
	if v := c.GPU.StepVerbs; v < 0 || v > 64 {
		return bad("gpu.step_verbs", "%d, want 0 (the backend's default) to 64", v)
	}
	if v := c.GPU.LSULineCycles; !(v >= 0 && v <= 1024) {
		return bad("gpu.lsu_line_cycles", "%g, want 0 to 1024", v)
	}
	if v := c.Mem.SMFarGBps; !(v >= 0 && v <= 1e6) {
		return bad("mem.sm_far_gbps", "%g, want 0 (no limit) to 1e6 GB/s", v)
	}
	if c.Mem.SFIFOL1 < 0 || c.Mem.SFIFOL1 > 1<<16 {
		return bad("mem.sfifo_l1", "%d, want 0 to 65536", c.Mem.SFIFOL1)
	}
	if m := c.Mem; m.InjectBytesPerCycle > 1<<16 || m.L2PortBytesPerCycle > 1<<16 || m.Channels*m.BanksPerChannel > 1<<12 {
		return bad("mem", "a port or partition count too large to model")
	}
	if v := c.Mem.SMWrites; v > maxQueueEntries {
		return bad("mem.sm_writes", "%d, want at most %d", v, maxQueueEntries)
	}
	if v := c.Mem.SMReads; v > maxQueueEntries {
		return bad("mem.sm_reads", "%d, want at most %d", v, maxQueueEntries)
	}
	if v, lb := c.Mem.SMReadBytes, c.L1.LineBytes; v != 0 && (v < lb || v > 4*maxQueueEntries) {
		return bad("mem.sm_read_bytes", "%d, want 0 (no limit) or %d (l1.line_bytes) to %d", v, lb, 4*maxQueueEntries)
	}
	if v := c.Mem.WriteQueueEntries; v > maxQueueEntries {
		return bad("mem.write_queue_entries", "%d, want at most %d", v, maxQueueEntries)
	}
	if t := c.PCIe.TLPBytes; t < 0 || t > 1<<12 {
		return bad("pcie.tlp_bytes", "%d, want 0 to 4096", t)
	}
	if v, lb := c.PCIe.WriteBufferBytes, c.L2.LineBytes; v != 0 && (v < lb || v > bufferUnit*maxQueueEntries) {
		return bad("pcie.write_buffer_bytes", "%d, want 0 (no buffer) or %d (l2.line_bytes) to %d", v, lb, bufferUnit*maxQueueEntries)
	}
	if c.Persist.NVWFIFOL1 > c.Persist.NVWFIFOL2 {
		return bad("persist.nvw_fifo_l1", "%d is larger than persist.nvw_fifo_l2 = %d", c.Persist.NVWFIFOL1, c.Persist.NVWFIFOL2)
	}
	if err := c.WriteBack.validate(); err != nil {
		return err
	}
	if err := c.CPU.validate(); err != nil {
		return err
	}
	if err := c.WriteBack.validateSectors(c.L2.LineBytes); err != nil {
		return err
	}
	if sb, lb := c.Persist.SectorBytes, c.L1.LineBytes; sb != 0 && (sb < 8 || sb&(sb-1) != 0 || sb > lb || lb/sb > 64) {
		return bad("persist.sector_bytes", "%d, want 0 or a power of two from 8 to l1.line_bytes (%d), at most 64 sectors a line", sb, lb)
	}
	if !slices.Contains([]string{pointADR, pointEADR}, c.Persist.Point) {
		return bad("persist.point", "%q, want \"adr\" or \"eadr\"", c.Persist.Point)
	}
	return nil
}
