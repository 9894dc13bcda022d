package examples

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("reduction", "two-level persistent reduction (seed 001 Fig. 3): block-scope release inside a block, device scope across blocks",
		func(s Size) crash.Workload { return NewReduction(reductionShape(s), pm.Device) })
	register("reduction-narrow", "the reduction with its cross-block release narrowed to block scope: a scoped persistency bug (seed 001 §5.3)",
		func(s Size) crash.Workload { return NewReduction(reductionShape(s), pm.Block) })
}

func reductionShape(s Size) scope.Grid {
	switch s {
	case Tiny:
		return scope.Grid{Blocks: 3, Threads: 4}
	case Quick:
		return scope.Grid{Blocks: 8, Threads: 64}
	}
	return scope.Grid{Blocks: 60, Threads: 512} // the SBRP artifact's 60 blocks of 512 threads
}

const empty = 0xFFFFFFFF

// Reduction is a two-level persistent sum after seed 001 Figure 3. Each
// thread persists its value and releases it at block scope to its block's
// thread 0, which persists the block's partial sum and releases it at
// CrossScope; the last block's thread 0 acquires every partial sum at device
// scope, persists the total, orders it with OFence, and persists a done
// flag. Device scope is the right CrossScope: the final reducer is in
// another block.
//
// Recovery resumes from the persisted values and partial sums (a value or
// partial already durable is not recomputed) after validating that a durable
// total agrees with the durable partial sums it was computed from.
type Reduction struct {
	Grid       scope.Grid
	CrossScope pm.Scope
	in         []uint32
}

// NewReduction returns a reduction over grid with inputs 3i+1.
func NewReduction(grid scope.Grid, cross pm.Scope) *Reduction {
	r := &Reduction{Grid: grid, CrossScope: cross}
	for i := range grid.Total() {
		r.in = append(r.in, uint32(3*i+1))
	}
	return r
}

// Name returns "reduction" or "reduction(<scope>)" for a non-device cross scope.
func (r *Reduction) Name() string {
	if r.CrossScope == pm.Device {
		return "reduction"
	}
	return fmt.Sprintf("reduction(%s)", r.CrossScope)
}

// Setup creates the regions vals, parts and res, filled with EMPTY.
func (r *Reduction) Setup(m *pm.Machine) error {
	for _, reg := range []struct {
		name string
		size int
	}{{"vals", 4 * r.Grid.Total()}, {"parts", 4 * r.Grid.Blocks}, {"res", 8}} {
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

func (r *Reduction) regions(m *pm.Machine) (vals, parts, res pm.Addr, err error) {
	var rg [3]pm.Range
	for i, name := range []string{"vals", "parts", "res"} {
		if rg[i], err = m.OpenRegion(name); err != nil {
			return
		}
	}
	return rg[0].Base, rg[1].Base, rg[2].Base, nil
}

// Kernel returns the reduction kernel for machine m (its flags live in
// fresh device memory).
func (r *Reduction) Kernel(m *pm.Machine) (scope.Kernel, error) {
	vals, parts, res, err := r.regions(m)
	if err != nil {
		return nil, err
	}
	n, blocks, bs := r.Grid.Total(), r.Grid.Blocks, r.Grid.Threads
	flags, err := m.Alloc(pm.DeviceMem, uint64(4*(n+blocks)))
	if err != nil {
		return nil, err
	}
	in, cross := r.in, r.CrossScope
	return func(t *scope.Thread) {
		b, j := t.Block(), t.TID()
		v := vals.Add(uint64(4 * t.ID()))
		if t.Load32(v) == empty {
			t.Store32(v, in[t.ID()])
		}
		t.PRel(flags.Add(uint64(4*t.ID())), 1, pm.Block)
		if j != 0 {
			return
		}
		part := parts.Add(uint64(4 * b))
		if t.Load32(part) == empty {
			var sum uint32
			for k := range bs {
				for t.PAcq(flags.Add(uint64(4*(b*bs+k))), pm.Block) == 0 {
				}
				sum += t.Load32(vals.Add(uint64(4 * (b*bs + k))))
			}
			t.Store32(part, sum)
		}
		t.PRel(flags.Add(uint64(4*(n+b))), 1, cross)
		if b != blocks-1 || t.Load32(res.Add(4)) == 1 {
			return
		}
		var total uint32
		for k := range blocks {
			for t.PAcq(flags.Add(uint64(4*(n+k))), pm.Device) == 0 {
			}
			total += t.Load32(parts.Add(uint64(4 * k)))
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
	_, parts, res, err := r.regions(m)
	if err != nil {
		return err
	}
	mem := m.Memory()
	if done, _ := mem.Load(res.Add(4), 4); done == 1 {
		total, _ := mem.Load(res, 4)
		var sum uint32
		for b := range r.Grid.Blocks {
			p, _ := mem.Load(parts.Add(uint64(4*b)), 4)
			if p == empty {
				return fmt.Errorf("%w: total %d durable but partial sum %d is not", ErrInconsistent, total, b)
			}
			sum += uint32(p)
		}
		if sum != uint32(total) {
			return fmt.Errorf("%w: total %d, partial sums add to %d", ErrInconsistent, total, sum)
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
	_, _, res, err := r.regions(m)
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
