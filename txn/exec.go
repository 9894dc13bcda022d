package txn

import (
	"fmt"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// Who identifies the agent behind an Exec: the ids HCL computes a slot from.
type Who struct {
	ID          int // global thread id or task id
	Block       int // GPU block; 0 for a task or the host
	WarpInBlock int // warp index in the block
	Lane        int // lane in the warp
	WarpSize    int // threads per warp (32 on the default GPU)
}

// Exec is what a log, a transaction or a checkpoint needs from the agent
// that runs it: loads and stores, a compare-and-swap for locks, an ordering
// point and a durability point. Addresses follow the verbs' rules (natural
// alignment for the fixed-size accesses).
type Exec interface {
	Load32(a pm.Addr) uint32
	Store32(a pm.Addr, v uint32)
	Load64(a pm.Addr) uint64
	Store64(a pm.Addr, v uint64)
	LoadBytes(a pm.Addr, buf []byte)
	StoreBytes(a pm.Addr, data []byte)
	// CAS64 stores nv at a if it holds old and returns what it held.
	CAS64(a pm.Addr, old, nv uint64) uint64
	// Order orders the agent's earlier persists before its later ones.
	Order()
	// Durable returns when the agent's earlier persists are durable.
	Durable()
	// Pause is called between the attempts of a spin loop (a CPU task
	// yields its core).
	Pause()
	// Who returns the agent's ids.
	Who() Who
}

// GPU returns the Exec of a kernel thread: Order is OFence, Durable is
// DFence, CAS64 is a device-scope atomic. It is valid while t is.
func GPU(t *scope.Thread) Exec { return gpuExec{t} }

type gpuExec struct{ t *scope.Thread }

func (g gpuExec) Load32(a pm.Addr) uint32           { return g.t.Load32(a) }
func (g gpuExec) Store32(a pm.Addr, v uint32)       { g.t.Store32(a, v) }
func (g gpuExec) Load64(a pm.Addr) uint64           { return g.t.Load64(a) }
func (g gpuExec) Store64(a pm.Addr, v uint64)       { g.t.Store64(a, v) }
func (g gpuExec) LoadBytes(a pm.Addr, buf []byte)   { g.t.LoadBytes(a, buf) }
func (g gpuExec) StoreBytes(a pm.Addr, data []byte) { g.t.StoreBytes(a, data) }
func (g gpuExec) CAS64(a pm.Addr, old, nv uint64) uint64 {
	return g.t.AtomicCAS64(a, old, nv, pm.Device)
}
func (g gpuExec) Order()   { g.t.OFence() }
func (g gpuExec) Durable() { g.t.DFence() }
func (g gpuExec) Pause()   {}
func (g gpuExec) Who() Who {
	return Who{ID: g.t.ID(), Block: g.t.Block(), WarpInBlock: g.t.WarpInBlock(), Lane: g.t.Lane(), WarpSize: g.t.WarpSize()}
}

// CPULine is the cache-line size the CPU adapter writes back with CLWB.
const CPULine = 64

// CPUExec is the Exec of a coroutine task. It remembers the cache lines the
// task stored to since its last fence; Order and Durable write each back
// with CLWB and then reach the task's ordering point (coro.Ctx.Fence),
// which the run's mode turns into an SFence (x86 persistency: the CLWBed
// stores persist before the task's later stores), a switch and a CFence of
// the task's context (COSPlay), a batched SFence (SBatch), a
// PersistBarrier (StrandWeaver) or nothing (Unordered). Join, which a
// transaction's commit uses, is the ordering point across StrandWeaver's
// strands. Make one per task with CPU and use it only inside that task.
type CPUExec struct {
	c     *coro.Ctx
	dirty []pm.Addr
}

// CPU returns the Exec of task c.
func CPU(c *coro.Ctx) *CPUExec { return &CPUExec{c: c} }

func (e *CPUExec) note(a pm.Addr, n int) {
	if n <= 0 {
		return
	}
	first, last := a&^(CPULine-1), (a+pm.Addr(n-1))&^(CPULine-1)
	for l := first; ; l += CPULine {
		dup := false
		// The list is short between fences; a linear scan keeps order.
		for i := len(e.dirty) - 1; i >= 0 && i >= len(e.dirty)-8; i-- {
			if e.dirty[i] == l {
				dup = true
				break
			}
		}
		if !dup {
			e.dirty = append(e.dirty, l)
		}
		if l == last {
			break
		}
	}
}

// Load32 loads 4 bytes.
func (e *CPUExec) Load32(a pm.Addr) uint32 { return e.c.Load32(a) }

// Store32 stores 4 bytes and remembers the line.
func (e *CPUExec) Store32(a pm.Addr, v uint32) { e.c.Store32(a, v); e.note(a, 4) }

// Load64 loads 8 bytes.
func (e *CPUExec) Load64(a pm.Addr) uint64 { return e.c.Load64(a) }

// Store64 stores 8 bytes and remembers the line.
func (e *CPUExec) Store64(a pm.Addr, v uint64) { e.c.Store64(a, v); e.note(a, 8) }

// LoadBytes loads len(buf) bytes.
func (e *CPUExec) LoadBytes(a pm.Addr, buf []byte) { e.c.LoadBytes(a, buf) }

// StoreBytes stores data and remembers its lines.
func (e *CPUExec) StoreBytes(a pm.Addr, data []byte) { e.c.StoreBytes(a, data); e.note(a, len(data)) }

// CAS64 is the task's compare-and-swap.
func (e *CPUExec) CAS64(a pm.Addr, old, nv uint64) uint64 { return e.c.CAS64(a, old, nv) }

// Dirty returns the cache lines stored to since the last write-back, in
// the order first stored to (valid until the task's next verb).
func (e *CPUExec) Dirty() []pm.Addr { return e.dirty }

// Flush writes back the lines stored to since the last ordering point
// (CLWB), without ordering them.
func (e *CPUExec) Flush() {
	for _, l := range e.dirty {
		e.c.CLWB(l)
	}
	e.dirty = e.dirty[:0]
}

// Order writes back the dirty lines (CLWB) and reaches the task's ordering
// point (coro.Ctx.Fence).
func (e *CPUExec) Order() {
	e.Flush()
	e.c.Fence()
}

// Durable is Order: on x86 an SFence (or a CFence) after CLWB waits for the
// write-backs. Under StrandWeaver it orders the current strand only; the
// task's closing JoinStrand makes it durable.
func (e *CPUExec) Durable() { e.Order() }

// Join writes back the dirty lines and orders every earlier persist of the
// task, whatever its strand, before the later ones (coro.Ctx.Join).
func (e *CPUExec) Join() {
	e.Flush()
	e.c.Join()
}

// Pause yields the core.
func (e *CPUExec) Pause() { e.c.Yield() }

// Who returns the task id, with block 0 and warps of 32 tasks.
func (e *CPUExec) Who() Who {
	id := e.c.ID()
	return Who{ID: id, WarpInBlock: id / 32, Lane: id % 32, WarpSize: 32}
}

// HostExec is the Exec of host code between runs, for creating, recovering
// and checking structures. Stores are host copies (pm.Machine.CopyIn),
// durable when they return, so Order and Durable do nothing. The first
// failed access is kept (see Err); after it, loads return zero and stores
// are dropped, and operations given this Exec return it wrapped in ErrHost.
type HostExec struct {
	m   *pm.Machine
	err error
}

// Host returns a host Exec on machine m.
func Host(m *pm.Machine) *HostExec { return &HostExec{m: m} }

// Err returns the first failed access, or nil.
func (h *HostExec) Err() error { return h.err }

func (h *HostExec) fail(err error) {
	if h.err == nil && err != nil {
		h.err = fmt.Errorf("%w: %w", ErrHost, err)
	}
}

func (h *HostExec) load(a pm.Addr, n uint64) uint64 {
	if h.err != nil {
		return 0
	}
	v, err := h.m.Memory().Load(a, n)
	h.fail(err)
	return v
}

func (h *HostExec) store(a pm.Addr, n, v uint64) {
	if h.err != nil {
		return
	}
	if _, _, err := h.m.Memory().Bytes(a, n, n); err != nil {
		h.fail(err)
		return
	}
	var b [8]byte
	pm.PutLE(b[:n], v)
	h.fail(h.m.CopyIn(a, b[:n]))
}

// Load32 loads 4 bytes.
func (h *HostExec) Load32(a pm.Addr) uint32 { return uint32(h.load(a, 4)) }

// Store32 stores 4 bytes durably.
func (h *HostExec) Store32(a pm.Addr, v uint32) { h.store(a, 4, uint64(v)) }

// Load64 loads 8 bytes.
func (h *HostExec) Load64(a pm.Addr) uint64 { return h.load(a, 8) }

// Store64 stores 8 bytes durably.
func (h *HostExec) Store64(a pm.Addr, v uint64) { h.store(a, 8, v) }

// LoadBytes loads len(buf) bytes (zeroes on failure).
func (h *HostExec) LoadBytes(a pm.Addr, buf []byte) {
	if h.err == nil {
		h.fail(h.m.CopyOut(a, buf))
	}
	if h.err != nil {
		clear(buf)
	}
}

// StoreBytes stores data durably.
func (h *HostExec) StoreBytes(a pm.Addr, data []byte) {
	if h.err == nil {
		h.fail(h.m.CopyIn(a, data))
	}
}

// CAS64 compares and swaps; the host runs alone, so it is a load and a store.
func (h *HostExec) CAS64(a pm.Addr, old, nv uint64) uint64 {
	cur := h.load(a, 8)
	if h.err == nil && cur == old {
		h.store(a, 8, nv)
	}
	return cur
}

// Order does nothing: host stores are durable at once.
func (h *HostExec) Order() {}

// Durable does nothing: host stores are durable at once.
func (h *HostExec) Durable() {}

// Pause does nothing.
func (h *HostExec) Pause() {}

// Who returns id 0, block 0, lane 0.
func (h *HostExec) Who() Who { return Who{WarpSize: 32} }

// joiner is an Exec whose Order may be narrower than all of its earlier
// persists (a CPU task under StrandWeaver orders one strand).
type joiner interface{ Join() }

// join orders all of x's earlier persists before its later ones.
func join(x Exec) {
	if j, ok := x.(joiner); ok {
		j.Join()
		return
	}
	x.Order()
}

// execErr returns the error a host Exec has kept, if x is one.
func execErr(x Exec) error {
	if h, ok := x.(interface{ Err() error }); ok {
		return h.Err()
	}
	return nil
}
