package workloads

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// StencilShape sizes the stencil: an NX×NY×NZ grid of 32-bit cells and
// Steps time steps, each a launch of one block of NX-1 threads per
// interior (y, z) row, thread x updating cell x (thread 0 idles), as
// Parboil's naive_kernel. Blocks, if positive, runs only the first Blocks
// rows of a step (in the grid's order: y fastest), and only the z planes
// those rows touch are allocated.
type StencilShape struct {
	NX, NY, NZ, Steps, Blocks int
}

// stencilShape is the stencil of size s. Paper size is the re-study's
// stencil run (its artifact, github.com/peiyi1/memory_persistency_model_for_GPU:
// parboil/result/stencil/run and nvm_base): Parboil's default input,
// 512×512×64 (-- 512 512 64 100), one time step (main.cu of
// parboil/benchmarks/stencil/src/nvm sets iteration = 1), a grid of
// 510×62 blocks of 511 threads (block nx-1, grid ny-2 by nz-2). Its
// GPGPU-Sim stops a run after 2,048 completed blocks
// (-gpgpu_max_completed_cta 2048 in parboil/result/stencil/gpgpusim.config;
// its log ends "break due to reaching the maximum cycles (or
// instructions)" after 2,368 issued), so its time is that of the grid's
// first 2,048 blocks: ours runs those, rows y = 1..510 of planes z = 1..4
// and the first 8 rows of plane 5. Cells are uint32 (floats there).
func stencilShape(s Size) StencilShape {
	return bySize(s,
		StencilShape{NX: 4, NY: 4, NZ: 3, Steps: 2},
		StencilShape{NX: 64, NY: 32, NZ: 16, Steps: 2, Blocks: 256},
		StencilShape{NX: 512, NY: 512, NZ: 64, Steps: 1, Blocks: 2048})
}

// stencilCell is the update of one cell from its neighbourhood.
func stencilCell(at func(dx, dy, dz int) uint32) uint32 {
	return 2*at(0, 0, 0) + 3*(at(-1, 0, 0)+at(1, 0, 0)+at(0, -1, 0)+at(0, 1, 0)+at(0, 0, -1)+at(0, 0, 1))
}

// stencilCellInsts is the arithmetic of one cell (see aluCycles): six
// adds, two multiplies and an add for stencilCell; the cell's index from
// the thread and block ids (two multiply-adds) and the seven neighbour
// addresses and the store's (an add or subtract of a stride each); the
// test of the thread id.
const stencilCellInsts = 6 + 2 + 1 + 2 + 8 + 1

// NewStencil returns the re-study's 7-point stencil (Parboil's
// naive_kernel) written afresh: in time step k every interior cell of
// buffer (k+1)%2 becomes 2·c + 3·(sum of its six neighbours) of buffer
// k%2, in uint32 arithmetic; a block updates one interior (y, z) row, a
// thread one cell of it. Cells a step does not update (the boundary, and
// rows past Blocks) keep their input value in both buffers (region
// stencil.buf holds the two). A kernel per step; a step reads only the
// buffer the previous step completed, so re-running it is idempotent.
func NewStencil(sh StencilShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	rows := (sh.NY - 2) * (sh.NZ - 2)
	if sh.NX < 3 || sh.NY < 3 || sh.NZ < 3 || sh.Steps <= 0 || sh.Blocks < 0 || sh.Blocks > rows {
		return nil, fmt.Errorf("%w: stencil %+v (want at least 3 cells per axis, at most one block per interior row)", ErrConfig, sh)
	}
	if sh.Blocks > 0 {
		rows = sh.Blocks
	}
	// The planes the rows touch: up to the last row's plane and the one
	// after it.
	nz := min(sh.NZ, (rows-1)/(sh.NY-2)+3)
	a, rng, err := newRSApp("stencil", s, seed, 0x57e)
	if err != nil {
		return nil, err
	}
	n := sh.NX * sh.NY * nz
	idx := func(x, y, z int) int { return (z*sh.NY+y)*sh.NX + x }
	in := randU32s(rng, n, 100)
	cur := in
	for range sh.Steps {
		next := append([]uint32(nil), cur...)
		for r := range rows {
			y, z := 1+r%(sh.NY-2), 1+r/(sh.NY-2)
			for x := 1; x < sh.NX-1; x++ {
				next[idx(x, y, z)] = stencilCell(func(dx, dy, dz int) uint32 { return cur[idx(x+dx, y+dy, z+dz)] })
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
	for k := range sh.Steps {
		a.rs.kernels = append(a.rs.kernels, rsKernel{idempotent: true, name: fmt.Sprintf("step%d", k), label: "stencil",
			grid: scope.Grid{Blocks: rows, Threads: sh.NX - 1},
			body: func(t *scope.Thread, p *Persister) {
				x, y, z := t.TID(), 1+t.Block()%(sh.NY-2), 1+t.Block()/(sh.NY-2)
				if x == 0 {
					return
				}
				src, dst := word32(a.addr("buf"), k%2*n), word32(a.addr("buf"), (k+1)%2*n)
				work(t, stencilCellInsts)
				v := stencilCell(func(dx, dy, dz int) uint32 { return t.Load32(word32(src, idx(x+dx, y+dy, z+dz))) })
				p.Store32(word32(dst, idx(x, y, z)), v)
			}})
	}
	return a, nil
}
