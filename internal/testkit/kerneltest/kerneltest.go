// Package kerneltest holds the foundation's test kernels as data, so that
// every backend can be checked against the functional reference: run each
// case on a fresh machine over the backend under test and compare the final
// contents of every range (a metamorphic test: the same kernels under every
// backend end in the same memory).
package kerneltest

import (
	"bytes"
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// Case is one kernel with its inputs.
type Case struct {
	Name  string
	Grid  scope.Grid
	Setup func(m *pm.Machine) (scope.Kernel, error)
	Opts  []scope.Option
}

// Contents is the final state of one range.
type Contents struct {
	Range pm.Range
	Data  []byte
}

// Final runs c on a fresh machine over be and returns the contents of every
// range, in address order, and the launch result.
func Final(c Case, be pm.Backend) ([]Contents, scope.Result, error) {
	m, err := pm.NewMachine(be)
	if err != nil {
		return nil, scope.Result{}, err
	}
	k, err := c.Setup(m)
	if err != nil {
		return nil, scope.Result{}, fmt.Errorf("%s: setup: %w", c.Name, err)
	}
	res, err := scope.Launch(m, c.Grid, k, append([]scope.Option{scope.WithName(c.Name)}, c.Opts...)...)
	if err != nil {
		return nil, res, fmt.Errorf("%s: %w", c.Name, err)
	}
	var out []Contents
	for _, r := range m.Memory().Ranges() {
		buf := make([]byte, r.Size)
		if err := m.CopyOut(r.Base, buf); err != nil {
			return nil, res, err
		}
		out = append(out, Contents{Range: r, Data: buf})
	}
	return out, res, nil
}

// Diff describes the first difference between two final states, or returns
// "" if they are equal.
func Diff(want, got []Contents) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d ranges, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Range != g.Range {
			return fmt.Sprintf("range %d is %+v, want %+v", i, g.Range, w.Range)
		}
		if !bytes.Equal(w.Data, g.Data) {
			for j := range w.Data {
				if w.Data[j] != g.Data[j] {
					return fmt.Sprintf("%s range at %v differs first at byte %d: %#x, want %#x", w.Range.Kind, w.Range.Base, j, g.Data[j], w.Data[j])
				}
			}
		}
	}
	return ""
}

func le32(vs []uint32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		pm.PutLE(b[4*i:4*i+4], uint64(v))
	}
	return b
}

// allocs allocates volatile ranges of the given sizes.
func allocs(m *pm.Machine, sizes ...uint64) ([]pm.Addr, error) {
	out := make([]pm.Addr, len(sizes))
	for i, s := range sizes {
		a, err := m.Alloc(pm.DeviceMem, s)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// Cases returns the foundation's kernels: each ends in one memory state on
// every correct backend and model.
func Cases() []Case {
	return []Case{
		{"vector-add", scope.Grid{Blocks: 11, Threads: 96}, func(m *pm.Machine) (scope.Kernel, error) {
			const n = 1000
			v, err := allocs(m, 4*n, 4*n)
			if err != nil {
				return nil, err
			}
			c, err := m.CreateRegion("c", 4*n)
			if err != nil {
				return nil, err
			}
			av, bv := make([]uint32, n), make([]uint32, n)
			for i := range n {
				av[i], bv[i] = uint32(i), uint32(7*i+3)
			}
			if err := m.CopyIn(v[0], le32(av)); err != nil {
				return nil, err
			}
			if err := m.CopyIn(v[1], le32(bv)); err != nil {
				return nil, err
			}
			return func(t *scope.Thread) {
				if i := t.ID(); i < n {
					off := uint64(4 * i)
					t.Store32(c.Base.Add(off), t.Load32(v[0].Add(off))+t.Load32(v[1].Add(off)))
				}
			}, nil
		}, nil},
		{"block-reduce", scope.Grid{Blocks: 6, Threads: 128}, func(m *pm.Machine) (scope.Kernel, error) {
			const bs = 128
			v, err := allocs(m, 4*6*bs)
			if err != nil {
				return nil, err
			}
			out, err := m.CreateRegion("sums", 4*6)
			if err != nil {
				return nil, err
			}
			in := make([]uint32, 6*bs)
			for i := range in {
				in[i] = uint32(i*i + 1)
			}
			if err := m.CopyIn(v[0], le32(in)); err != nil {
				return nil, err
			}
			return func(t *scope.Thread) {
				base := v[0].Add(uint64(4 * t.Block() * bs))
				me := base.Add(uint64(4 * t.TID()))
				for s := bs / 2; s > 0; s /= 2 {
					if t.TID() < s {
						t.Store32(me, t.Load32(me)+t.Load32(base.Add(uint64(4*(t.TID()+s)))))
					}
					t.SyncThreads()
				}
				if t.TID() == 0 {
					t.Store32(out.Base.Add(uint64(4*t.Block())), t.Load32(base))
					t.DFence()
				}
			}, nil
		}, nil},
		{"release-acquire", scope.Grid{Blocks: 4, Threads: 64}, func(m *pm.Machine) (scope.Kernel, error) {
			// Block b+1 consumes what block b produced and released at
			// device scope; within a block, threads 32-63 acquire at block
			// scope what thread 0 released.
			data, err := m.CreateRegion("data", 8*4*64)
			if err != nil {
				return nil, err
			}
			v, err := allocs(m, 4*8)
			if err != nil {
				return nil, err
			}
			flags := v[0]
			return func(t *scope.Thread) {
				b := t.Block()
				me := data.Base.Add(uint64(8 * t.ID()))
				prev := uint64(0)
				if b > 0 {
					for t.PAcq(flags.Add(uint64(4*(b-1))), pm.Device) == 0 {
					}
					prev = t.Load64(data.Base.Add(uint64(8 * (t.ID() - 64))))
				}
				t.Store64(me, prev+uint64(t.ID()))
				t.OFence()
				if t.TID() == 0 {
					t.PRel(flags.Add(uint64(16+4*(b%4))), uint32(b+1), pm.Block)
				}
				if t.TID() >= 32 {
					for t.PAcq(flags.Add(uint64(16+4*(b%4))), pm.Block) != uint32(b+1) {
					}
					t.Store64(me, t.Load64(me)+1)
				}
				t.SyncThreads()
				if t.TID() == 0 {
					t.PRel(flags.Add(uint64(4*b)), 1, pm.Device)
				}
			}, nil
		}, nil},
		{"atomics-and-fences", scope.Grid{Blocks: 3, Threads: 80}, func(m *pm.Machine) (scope.Kernel, error) {
			r, err := m.CreateRegion("log", 8*256)
			if err != nil {
				return nil, err
			}
			v, err := allocs(m, 16)
			if err != nil {
				return nil, err
			}
			return func(t *scope.Thread) {
				t.AtomicAdd64(v[0], uint64(t.ID()), pm.Device)
				for t.AtomicCAS32(v[0].Add(8), 0, 1, pm.Device) != 0 { // a lock
				}
				sum := t.Load64(r.Base) // a read-modify-write under the lock
				t.Store64(r.Base, sum+uint64(t.ID()))
				t.Store64(r.Base.Add(uint64(8+8*t.ID())), uint64(t.ID()*t.ID()))
				t.Fence(pm.Device)
				t.AtomicExch32(v[0].Add(8), 0, pm.Device)
				t.OFence()
				t.EpochBarrier()
				t.Work(10)
			}, nil
		}, nil},
		{"shared-reduce", scope.Grid{Blocks: 12, Threads: 64}, func(m *pm.Machine) (scope.Kernel, error) {
			out, err := m.CreateRegion("sums", 8*12)
			if err != nil {
				return nil, err
			}
			return func(t *scope.Thread) {
				sh := t.Shared()
				me := sh.Add(uint64(8 * t.TID()))
				t.Store64(me, uint64(t.ID()*t.ID()))
				t.SyncThreads()
				for s := 32; s > 0; s /= 2 {
					if t.TID() < s {
						t.Store64(me, t.Load64(me)+t.Load64(sh.Add(uint64(8*(t.TID()+s)))))
					}
					t.SyncThreads()
				}
				if t.TID() == 0 {
					t.Store64(out.Base.Add(uint64(8*t.Block())), t.Load64(sh))
					t.DFence()
				}
			}, nil
		}, []scope.Option{scope.WithShared(8 * 64)}},
		{"device-barrier", scope.Grid{Blocks: 8, Threads: 64}, func(m *pm.Machine) (scope.Kernel, error) {
			a, err := m.CreateRegion("a", 8*8*64)
			if err != nil {
				return nil, err
			}
			out, err := allocs(m, 8*8*64)
			if err != nil {
				return nil, err
			}
			const n = 8 * 64
			return func(t *scope.Thread) {
				t.Store64(a.Base.Add(uint64(8*t.ID())), uint64(3*t.ID()))
				t.PBarrier(pm.Block)
				t.PBarrier(pm.Device)
				t.Store64(out[0].Add(uint64(8*t.ID())), t.Load64(a.Base.Add(uint64(8*((t.ID()+77)%n)))))
				t.PBarrier(pm.Thread)
			}, nil
		}, nil},
	}
}
