// Package hwmodel is the default backend of scopedpm: a deterministic
// cycle-accounting model of a GPU with persistent memory, implementing
// pm.Backend.
//
// The model counts integer cycles of the GPU core clock. Every warp has its
// own clock; each warp instruction (one verb per lane, gathered by the
// execution engine into one step) is charged a latency taken from the
// configuration: an L1 hit, an L2 access, device memory, NVM, and the PCIe
// link when PM sits on the host (PM-far). Lane accesses of one instruction
// are coalesced into cache lines.
//
// The engine runs a warp Batch verbs a lane at a time, but Step times the
// step's instructions one at a time, each when its warp is the earliest of
// all (pm.Deferrer): the caches, queues and links see every warp's
// instructions in clock order, as they would with one verb a step. A
// block's barrier is applied once every member's instructions up to it are
// timed; an atomic or PAcq is timed after the untimed PRel or atomic of
// another warp whose value it read; a whole-machine verb (EpochBarrier,
// L2WB, PCommit) times its step up to it at once. What a warp does can
// still run ahead of the others by a step (a lane spinning on a flag spins
// gpu.step_verbs times a step).
//
// Every model's traffic crosses one memory system (memsys.go): each SM's
// injection port and outstanding writes, the L2 banks' ports, the memory
// channels' finite write queues in front of device memory and NVM, and
// PCIe for PM-far. A bandwidth is a resource a transfer occupies for
// size/bandwidth cycles, and a queue entry is held until the device has
// written it, so a stream is bound by its narrowest link or, through
// Little's law, by a queue's entries over their latency; the persistency
// models differ only in when they write and what their verbs wait for.
//
// The SM holds what is local to it: its warp schedulers issue
// gpu.schedulers instructions per cycle, and Work (compute the model
// cannot see) holds one of their execution units for its cycles, so warps
// beyond gpu.schedulers on one SM take turns. A block's shared memory
// (pm.Op.Shared) never reaches the caches: an access takes one pass per
// distinct 4-byte word of its busiest bank (gpu.smem_banks), the SM serves
// one pass per cycle, and the data is back gpu.smem_latency_cycles after
// the last pass. The lanes of a warp's atomic on one word form one
// instruction whose atomics complete a cycle apart.
//
// Each persistency model (Strict, Epoch, GPM, SBRP, ScopedBarrier, None)
// decides when a persist is flushed towards the persistence point (ADR: the
// memory controller's PM queue; eADR: the last-level cache) and which warps
// wait for it. Under the GPU persistency re-study's models (WriteBackADR,
// WriteBackPCT; writeback.go) the L2 is a write-back cache and a persist is
// flushed only by a write-through store, CLWB, L2WB or eviction. Every
// persist record gets the cycle at which it became durable, so CrashAt(T)
// returns the durable image at cycle T.
//
// CPU runs (package coro's tasks) are timed on a CPU core (cpu.go, the
// cpu.* keys): the out-of-order core of COSPlay Table 2 with its store
// queue, write-back buffer and Store-Clwb Tracker, caches, PM with a
// write latency to the memory controller plus a BMO latency, and a cost
// per coroutine switch; a CPU persist is durable when its line's
// write-back reaches the memory controller (ADR).
//
// Same inputs, same cycles: the model reads no wall clock, never iterates a
// map, and uses no randomness.
//
// The parameters live in Config, which loads from JSON and takes key=value
// overrides; presets reproduce the simulated machines of the seed papers
// (SBRP Table 1, the scoped persist barrier paper's Table 2, the GPGPU-Sim
// re-study's Table I) and a DRAM-only baseline.
package hwmodel
