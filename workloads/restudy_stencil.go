package workloads

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// StencilShape sizes the stencil: an NX×NY×NZ grid of 32-bit cells, Steps
// time steps, Threads threads per block (one interior column per thread).
type StencilShape struct {
	NX, NY, NZ, Steps, Threads int
}

func stencilShape(s Size) StencilShape {
	return bySize(s,
		StencilShape{NX: 4, NY: 4, NZ: 3, Steps: 2, Threads: 2},
		StencilShape{NX: 32, NY: 32, NZ: 16, Steps: 2, Threads: 64},
		// Parboil's stencil default input is 128×128×32.
		StencilShape{NX: 128, NY: 128, NZ: 32, Steps: 4, Threads: 128})
}

// stencilCell is the update of one cell from its neighbourhood.
func stencilCell(at func(dx, dy, dz int) uint32) uint32 {
	return 2*at(0, 0, 0) + 3*(at(-1, 0, 0)+at(1, 0, 0)+at(0, -1, 0)+at(0, 1, 0)+at(0, 0, -1)+at(0, 0, 1))
}

// stencilCellInsts is the arithmetic of one cell of a step (see aluCycles):
// six adds, two multiplies and an add for stencilCell; seven neighbour
// addresses and the store's, each an add to the column's running index;
// the z loop's increment and branch.
const stencilCellInsts = 6 + 2 + 1 + 8 + 2

// NewStencil returns the re-study's 7-point stencil (Parboil's
// naive_kernel) written afresh: in time step k every interior cell of
// buffer (k+1)%2 becomes 2·c + 3·(sum of its six neighbours) of buffer
// k%2, in uint32 arithmetic; each thread walks one (x, y) column along z.
// Boundary cells keep their input value in both buffers (region
// stencil.buf holds the two). A kernel per step; a step reads only the
// buffer the previous step completed, so re-running it is idempotent.
func NewStencil(sh StencilShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.NX < 3 || sh.NY < 3 || sh.NZ < 3 || sh.Steps <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: stencil %+v (want at least 3 cells per axis)", ErrConfig, sh)
	}
	a, rng, err := newRSApp("stencil", s, seed, 0x57e)
	if err != nil {
		return nil, err
	}
	n := sh.NX * sh.NY * sh.NZ
	idx := func(x, y, z int) int { return (z*sh.NY+y)*sh.NX + x }
	in := randU32s(rng, n, 100)
	cur := in
	for range sh.Steps {
		next := append([]uint32(nil), cur...)
		for z := 1; z < sh.NZ-1; z++ {
			for y := 1; y < sh.NY-1; y++ {
				for x := 1; x < sh.NX-1; x++ {
					next[idx(x, y, z)] = stencilCell(func(dx, dy, dz int) uint32 { return cur[idx(x+dx, y+dy, z+dz)] })
				}
			}
		}
		cur = next
	}
	a.arrays = []rsArray{{name: "buf", init: append(append([]uint32(nil), in...), in...), rw: true}}
	a.check = func(m *pm.Machine) error {
		got, err := readU32s(m, word32(a.addr("buf"), sh.Steps%2*n), n)
		if err != nil {
			return err
		}
		return compareU32("stencil.buf", got, cur)
	}
	cols := (sh.NX - 2) * (sh.NY - 2)
	for k := range sh.Steps {
		a.rs.kernels = append(a.rs.kernels, perItem(fmt.Sprintf("step%d", k), "stencil", cols, sh.Threads, func(t *scope.Thread, p *Persister, c int) {
			x, y := 1+c%(sh.NX-2), 1+c/(sh.NX-2)
			src, dst := word32(a.addr("buf"), k%2*n), word32(a.addr("buf"), (k+1)%2*n)
			work(t, (sh.NZ-2)*stencilCellInsts)
			for z := 1; z < sh.NZ-1; z++ {
				v := stencilCell(func(dx, dy, dz int) uint32 { return t.Load32(word32(src, idx(x+dx, y+dy, z+dz))) })
				p.Store32(word32(dst, idx(x, y, z)), v)
			}
		}))
	}
	return a, nil
}
