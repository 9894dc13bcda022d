package examples

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("reduction", "persistent reduction (seed 001 Fig. 3): a tree inside each block ordered by block-scope release/acquire, device scope across blocks",
		func(s Size) crash.Workload { return newReductionOfSize(s, pm.Device) })
	register("reduction-wide", "the reduction with device scope inside blocks too: correct, but wider than needed (for the scope advisor)",
		func(s Size) crash.Workload {
			r := newReductionOfSize(s, pm.Device).(*Reduction)
			r.InnerScope = pm.Device
			return r
		})
	register("reduction-narrow", "the reduction with its cross-block release narrowed to block scope: a scoped persistency bug (seed 001 §5.3)",
		func(s Size) crash.Workload { return newReductionOfSize(s, pm.Block) })
}

// reductionShape returns the grid and the inputs per thread for a size.
func reductionShape(s Size) (scope.Grid, int) {
	switch s {
	case Tiny:
		return scope.Grid{Blocks: 3, Threads: 4}, 2
	case Quick:
		return scope.Grid{Blocks: 8, Threads: 64}, 16
	}
	// The SBRP artifact: 60 blocks of 512 threads over about 4 M ints
	// (136 per thread: 4,177,920 ints).
	return scope.Grid{Blocks: 60, Threads: 512}, 136
}

const empty64 = ^uint64(0)

// Reduction is a persistent sum after seed 001 Figure 3. The input lives in
// volatile device memory (the host still has it after a crash). Each thread
// sums its chunk of the input and persists the sum in its slot of the PM
// array vals; the block then reduces the slots as a tree, in place: at
// stride s, thread j (a multiple of 2s) acquires at block scope the slot of
// thread j+s and persists its own slot one level up. Each slot is one
// 8-byte word holding (level, value), so it persists atomically. Thread 0
// of each block ends with the block's sum and releases it at CrossScope;
// the last block's thread 0 acquires every block's sum at device scope,
// persists the total, orders it with OFence, and persists a done flag.
// Device scope is the right CrossScope: the final reducer is in another
// block.
//
// Recovery is native: the same kernel runs again and every thread resumes
// from the level its slot reached. Before that, recovery validates that a
// durable total agrees with the durable block sums it was computed from.
type Reduction struct {
	Grid      scope.Grid
	PerThread int
	// InnerScope is the scope of the releases and acquires inside a block
	// (Block; Device is correct but wider than needed), CrossScope that of
	// the release of each block's sum (Device; Block is a bug).
	InnerScope pm.Scope
	CrossScope pm.Scope
	in         []uint32
	levels     int
}

// NewReduction returns a reduction over grid, perThread inputs per thread
// (3i+1 for input i); grid.Threads must be a power of two.
func NewReduction(grid scope.Grid, perThread int, cross pm.Scope) *Reduction {
	r := &Reduction{Grid: grid, PerThread: perThread, InnerScope: pm.Block, CrossScope: cross}
	for i := range grid.Total() * perThread {
		r.in = append(r.in, uint32(3*i+1))
	}
	for 1<<r.levels < grid.Threads {
		r.levels++
	}
	return r
}

func newReductionOfSize(s Size, cross pm.Scope) crash.Workload {
	g, per := reductionShape(s)
	return NewReduction(g, per, cross)
}

// Name returns "reduction", or "reduction(<inner>,<cross>)" for other scopes.
func (r *Reduction) Name() string {
	if r.CrossScope == pm.Device && r.InnerScope == pm.Block {
		return "reduction"
	}
	return fmt.Sprintf("reduction(%s,%s)", r.InnerScope, r.CrossScope)
}

// Setup creates the regions vals and res, filled with EMPTY.
func (r *Reduction) Setup(m *pm.Machine) error {
	if r.Grid.Threads != 1<<r.levels {
		return fmt.Errorf("examples: reduction needs a power-of-two block, got %d", r.Grid.Threads)
	}
	for _, reg := range []struct {
		name string
		size int
	}{{"vals", 8 * r.Grid.Total()}, {"res", 8}} {
		rg, err := m.CreateRegion(reg.name, uint64(reg.size))
		if err != nil {
			return err
		}
		b := make([]byte, reg.size)
		for i := range b {
			b[i] = 0xFF
		}
		if err := m.CopyIn(rg.Base, b); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reduction) regions(m *pm.Machine) (vals, res pm.Addr, err error) {
	v, err := m.OpenRegion("vals")
	if err != nil {
		return 0, 0, err
	}
	s, err := m.OpenRegion("res")
	return v.Base, s.Base, err
}

// Kernel uploads the input to fresh device memory and returns the kernel.
func (r *Reduction) Kernel(m *pm.Machine) (scope.Kernel, error) {
	vals, res, err := r.regions(m)
	if err != nil {
		return nil, err
	}
	n, blocks, bs := r.Grid.Total(), r.Grid.Blocks, r.Grid.Threads
	in, err := m.Alloc(pm.DeviceMem, uint64(4*len(r.in)))
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 4*len(r.in))
	for i, v := range r.in {
		pm.PutLE(buf[4*i:4*i+4], uint64(v))
	}
	if err := m.CopyIn(in, buf); err != nil {
		return nil, err
	}
	flags, err := m.Alloc(pm.DeviceMem, uint64(4*(n+blocks)))
	if err != nil {
		return nil, err
	}
	per, levels, inner, cross := r.PerThread, r.levels, r.InnerScope, r.CrossScope
	return func(t *scope.Thread) {
		b, j := t.Block(), t.TID()
		slot := func(k int) pm.Addr { return vals.Add(uint64(8 * (b*bs + k))) }
		flag := func(k int) pm.Addr { return flags.Add(uint64(4 * (b*bs + k))) }
		w := t.Load64(slot(j))
		level, v := int(w>>32), uint32(w)
		if w == empty64 {
			level, v = 0, 0
			for i := range per {
				v += t.Load32(in.Add(uint64(4 * (t.ID()*per + i))))
			}
			t.Store64(slot(j), uint64(v))
		}
		t.PRel(flag(j), uint32(level+1), inner)
		for ; level < levels && j%(2<<level) == 0; level++ {
			partner := j + 1<<level
			for t.PAcq(flag(partner), inner) < uint32(level+1) {
			}
			v += uint32(t.Load64(slot(partner)))
			t.Store64(slot(j), uint64(level+1)<<32|uint64(v))
			t.PRel(flag(j), uint32(level+2), inner)
		}
		if j != 0 {
			return
		}
		t.PRel(flags.Add(uint64(4*(n+b))), 1, cross)
		if b != blocks-1 || t.Load32(res.Add(4)) == 1 {
			return
		}
		var total uint32
		for k := range blocks {
			for t.PAcq(flags.Add(uint64(4*(n+k))), pm.Device) == 0 {
			}
			total += uint32(t.Load64(vals.Add(uint64(8 * k * bs))))
		}
		t.Store32(res, total)
		t.OFence()
		t.Store32(res.Add(4), 1)
	}, nil
}

func (r *Reduction) launch(m *pm.Machine) error {
	k, err := r.Kernel(m)
	if err != nil {
		return err
	}
	_, err = scope.Launch(m, r.Grid, k, scope.WithName("reduction"))
	return err
}

// Run launches the reduction.
func (r *Reduction) Run(m *pm.Machine) error { return r.launch(m) }

// Recover validates the durable state and resumes the kernel.
func (r *Reduction) Recover(m *pm.Machine) error {
	vals, res, err := r.regions(m)
	if err != nil {
		return err
	}
	mem := m.Memory()
	if done, _ := mem.Load(res.Add(4), 4); done == 1 {
		total, _ := mem.Load(res, 4)
		var sum uint32
		for b := range r.Grid.Blocks {
			w, _ := mem.Load(vals.Add(uint64(8*b*r.Grid.Threads)), 8)
			if int(w>>32) != r.levels || w == empty64 {
				return fmt.Errorf("%w: total %d durable but the sum of block %d is not (slot %#x)", ErrInconsistent, total, b, w)
			}
			sum += uint32(w)
		}
		if sum != uint32(total) {
			return fmt.Errorf("%w: total %d, block sums add to %d", ErrInconsistent, total, sum)
		}
	}
	return r.launch(m)
}

// Want returns the correct total.
func (r *Reduction) Want() uint32 {
	var want uint32
	for _, v := range r.in {
		want += v
	}
	return want
}

// Check requires the done flag and the right total.
func (r *Reduction) Check(m *pm.Machine) error {
	_, res, err := r.regions(m)
	if err != nil {
		return err
	}
	total, _ := m.Memory().Load(res, 4)
	done, _ := m.Memory().Load(res.Add(4), 4)
	if done != 1 || uint32(total) != r.Want() {
		return fmt.Errorf("total %d done %d, want %d done 1", total, done, r.Want())
	}
	return nil
}
