package speed

import (
	"errors"
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// Kernel is a benchmark kernel: the same code runs under the functional
// engine (BenchmarkEngine), under hwmodel (BenchmarkHWModel) and in bench's
// engine experiment, so that their figures compare. This is the module's one
// table of them.
type Kernel struct {
	Name  string
	Block int // threads per block
	// Setup allocates the kernel's memory on m for n threads (a multiple
	// of Block) and returns the kernel. The kernel calls p.Enter first and
	// p.Exit last, so that a Probe can count the threads alive.
	Setup func(m *pm.Machine, n int, p *Probe) (scope.Kernel, error)
}

// Grid returns the kernel's grid for n threads.
func (k Kernel) Grid(n int) scope.Grid { return scope.Grid{Blocks: n / k.Block, Threads: k.Block} }

// kernels are the benchmark kernels, by name:
//
//   - vector-add: z = x + y, two 4-byte loads from device memory and a
//     4-byte PM store per thread (3 verbs);
//   - log-loop: eight rounds of a PM 8-byte load, store and OFence, each
//     round in its own array so that a warp's stores fill whole lines, then
//     a DFence (25 verbs): the persist-heavy case;
//   - block-reduce: a tree reduction by halves in device memory with a
//     SyncThreads per level, thread 0 storing its block's sum to PM;
//   - loop-16: sixteen loads of the same word, a PM store and an OFence;
//   - release-acquire: each block's warp 0 persists and releases a flag at
//     block scope; the other warps acquire it and persist after.
var kernels = []Kernel{
	{"vector-add", 256, func(m *pm.Machine, n int, p *Probe) (scope.Kernel, error) {
		x, err1 := m.Alloc(pm.DeviceMem, uint64(4*n))
		y, err2 := m.Alloc(pm.DeviceMem, uint64(4*n))
		z, err3 := m.CreateRegion("z", uint64(4*n))
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			p.Enter()
			off := uint64(4 * t.ID())
			t.Store32(z.Base.Add(off), t.Load32(x.Add(off))+t.Load32(y.Add(off)))
			p.Exit()
		}, nil
	}},
	{"log-loop", 256, func(m *pm.Machine, n int, p *Probe) (scope.Kernel, error) {
		z, err := m.CreateRegion("z", uint64(8*n*8))
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			p.Enter()
			for i := range uint64(8) {
				a := z.Base.Add(8 * (i*uint64(n) + uint64(t.ID())))
				t.Store64(a, t.Load64(a)+1)
				t.OFence()
			}
			t.DFence()
			p.Exit()
		}, nil
	}},
	{"block-reduce", 256, func(m *pm.Machine, n int, p *Probe) (scope.Kernel, error) {
		x, err1 := m.Alloc(pm.DeviceMem, uint64(4*n))
		z, err2 := m.CreateRegion("z", uint64(4*n/256))
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			p.Enter()
			me := x.Add(uint64(4 * t.ID()))
			base := x.Add(uint64(4 * t.Block() * 256))
			for s := 128; s > 0; s /= 2 {
				if t.TID() < s {
					t.Store32(me, t.Load32(me)+t.Load32(base.Add(uint64(4*(t.TID()+s)))))
				}
				t.SyncThreads()
			}
			if t.TID() == 0 {
				t.Store32(z.Base.Add(uint64(4*t.Block())), t.Load32(base))
			}
			p.Exit()
		}, nil
	}},
	{"loop-16", 256, func(m *pm.Machine, n int, p *Probe) (scope.Kernel, error) {
		x, err1 := m.Alloc(pm.DeviceMem, uint64(4*n))
		z, err2 := m.CreateRegion("z", uint64(4*n))
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			p.Enter()
			off := uint64(4 * t.ID())
			var s uint32
			for range 16 {
				s += t.Load32(x.Add(off))
			}
			t.Store32(z.Base.Add(off), s)
			t.OFence()
			p.Exit()
		}, nil
	}},
	{"release-acquire", 256, func(m *pm.Machine, n int, p *Probe) (scope.Kernel, error) {
		data, err1 := m.CreateRegion("data", uint64(8*n))
		flags, err2 := m.Alloc(pm.DeviceMem, uint64(4*n/256))
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			p.Enter()
			defer p.Exit()
			flag := flags.Add(uint64(4 * t.Block()))
			me := data.Base.Add(uint64(8 * t.ID()))
			if t.WarpInBlock() == 0 {
				t.Store64(me, uint64(t.ID()))
				t.OFence()
				if t.Lane() == 0 {
					t.PRel(flag, 1, pm.Block)
				}
				return
			}
			for t.PAcq(flag, pm.Block) == 0 {
			}
			t.Store64(me, uint64(t.ID()))
		}, nil
	}},
}

// Kernels returns the benchmark kernels, a copy of the table.
func Kernels() []Kernel { return append([]Kernel(nil), kernels...) }

// Lookup returns the kernel called name.
func Lookup(name string) (Kernel, error) {
	for _, k := range kernels {
		if k.Name == name {
			return k, nil
		}
	}
	return Kernel{}, fmt.Errorf("speed: no kernel %q", name)
}
