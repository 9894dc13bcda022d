package workloads

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The re-study's other long-running kernels with short CTAs (LS), written
// afresh in the shape of the Parboil kernels they stand for. All arithmetic
// is on uint32 so the Go references are exact; every kernel writes its
// outputs once, from inputs no kernel of the same step overwrites, so every
// block can be re-run after a crash.

// SGEMMShape sizes an SGEMM: C (M×N) = A (M×K) · B (K×N), in blocks of
// TileN×TileH threads, each block computing TileN·TileH rows and TileN
// columns of C, each thread one row of those TileN columns (Parboil's
// mysgemmNT register tiling: TILE_N, TILE_TB_HEIGHT).
type SGEMMShape struct{ M, N, K, TileN, TileH int }

// sgemmShape is the SGEMM of size s. Paper size is the re-study's sgemm
// run (its artifact, github.com/peiyi1/memory_persistency_model_for_GPU:
// parboil/result/sgemm/run and nvm_base): Parboil's small input, A 128×96
// and B 96×160 (parboil/datasets/sgemm/small/input/matrix1.txt and
// matrix2t.txt), with Parboil's tiles (TILE_N 16, TILE_TB_HEIGHT 8 in
// parboil/benchmarks/sgemm/src/nvm/sgemm_kernel.cu): a grid of 1×10 blocks
// of 16×8 threads, as its log shows (gridDim (1,10,1), blockDim
// (16,8,1)). Elements are uint32 (floats there).
func sgemmShape(s Size) SGEMMShape {
	return bySize(s, SGEMMShape{M: 4, N: 4, K: 4, TileN: 2, TileH: 2}, SGEMMShape{M: 64, N: 32, K: 32, TileN: 8, TileH: 8},
		SGEMMShape{M: 128, N: 160, K: 96, TileN: 16, TileH: 8})
}

// The arithmetic of an SGEMM thread (see aluCycles): its row and column
// from the block and thread ids (three multiply-adds) and the three
// running addresses (3); per step of TileH values of k, B's address (1),
// the shared store's (1) and the loop (2); per value of k, A's address (1),
// TileN multiply-adds and the loop (2); per element of C, its address (1)
// and C·beta + alpha·c (2).
const (
	sgemmFixInsts   = 3 + 3
	sgemmStepInsts  = 1 + 1 + 2
	sgemmKInsts     = 1 + 2 // plus TileN multiply-adds
	sgemmStoreInsts = 1 + 2
)

// NewSGEMM returns the matrix product (Parboil's mysgemmNT), A and C
// column-major and B row-major as there: for each step of TileH values of
// k, every thread of a block loads one element of B's TileH×TileN tile
// into shared memory, the block meets, and each thread multiplies its
// row's TileH elements of A (from PM) by the tile's rows (from shared
// memory) into its TileN running sums; then it reads its TileN elements of
// C and stores C·beta + alpha·c with alpha 1 and beta 0, as Parboil's
// main.cu calls it. Every element of C is stored once, from inputs only,
// so re-running a block is idempotent.
func NewSGEMM(sh SGEMMShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	tm := sh.TileN * sh.TileH
	if sh.M <= 0 || sh.N <= 0 || sh.K <= 0 || sh.TileN <= 0 || sh.TileH <= 0 || sh.M%tm != 0 || sh.N%sh.TileN != 0 || sh.K%sh.TileH != 0 {
		return nil, fmt.Errorf("%w: sgemm %+v (M a multiple of TileN·TileH, N of TileN, K of TileH)", ErrConfig, sh)
	}
	a, rng, err := newRSApp("sgemm", s, seed, 0x5e)
	if err != nil {
		return nil, err
	}
	// A[m + k·M] (column-major), B[k·N + n] (row-major), C[m + n·M].
	A, B := randU32s(rng, sh.M*sh.K, 16), randU32s(rng, sh.K*sh.N, 16)
	C := make([]uint32, sh.M*sh.N)
	for m := range sh.M {
		for n := range sh.N {
			var sum uint32
			for k := range sh.K {
				sum += A[m+k*sh.M] * B[k*sh.N+n]
			}
			C[m+n*sh.M] = sum
		}
	}
	a.arrays = []rsArray{{name: "a", init: A}, {name: "b", init: B}, {name: "c", want: C}}
	blocksM := sh.M / tm
	a.rs.kernels = []rsKernel{{idempotent: true, name: "mysgemmNT", label: "sgemm",
		grid: scope.Grid{Blocks: blocksM * (sh.N / sh.TileN), Threads: tm}, shared: 4 * tm,
		body: func(t *scope.Thread, p *Persister) {
			ab, bb, cb := a.addr("a"), a.addr("b"), a.addr("c")
			tx, ty := t.TID()%sh.TileN, t.TID()/sh.TileN
			m := t.Block()%blocksM*tm + t.TID()
			n0 := t.Block() / blocksM * sh.TileN
			bs := func(j, kk int) pm.Addr { return word32(t.Shared(), j*sh.TileN+kk) }
			work(t, sgemmFixInsts+sh.K/sh.TileH*sgemmStepInsts+sh.K*(sgemmKInsts+sh.TileN)+sh.TileN*sgemmStoreInsts)
			c := make([]uint32, sh.TileN)
			row := make([]uint32, sh.TileN)
			addrs := make([]pm.Addr, sh.TileN)
			for i := 0; i < sh.K; i += sh.TileH {
				t.Store32(bs(ty, tx), t.Load32(word32(bb, (i+ty)*sh.N+n0+tx)))
				t.SyncThreads()
				for j := range sh.TileH {
					av := t.Load32(word32(ab, m+(i+j)*sh.M))
					for kk := range addrs {
						addrs[kk] = bs(j, kk)
					}
					t.Gather32(row, addrs...)
					for kk, b := range row {
						c[kk] += av * b
					}
				}
				t.SyncThreads()
			}
			for kk, v := range c {
				at := word32(cb, m+(n0+kk)*sh.M)
				old := t.Load32(at)
				p.Store32(at, old*0+v) // C·beta + alpha·c, beta 0, alpha 1
			}
		}}}
	return a, nil
}

func randU32s(rng *rand.Rand, n, below int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(rng.IntN(below))
	}
	return out
}

// SpMVShape sizes an SpMV: a Rows×Rows sparse matrix with 1..MaxPerRow
// non-zeros per row, Threads threads per block (one row each).
type SpMVShape struct{ Rows, MaxPerRow, Threads int }

// spmvShape is the SpMV of size s. Paper size is the re-study's spmv run
// (its artifact, github.com/peiyi1/memory_persistency_model_for_GPU:
// parboil/result/spmv/run and nvm_base): Parboil's large input, the
// Dubcova3 matrix, 146,689 rows (the length of
// parboil/datasets/spmv/large/input/vector.bin), in a grid of 765 blocks of
// 192 threads, as its log shows. The matrix file itself is not in the
// artifact's repository; we draw row lengths uniformly from 1..48 (a mean
// of 24.5 non-zeros per row, where Dubcova3 has 3,636,643 non-zeros, 24.8
// per row) and columns uniformly, which scatters the reads of x more than
// a finite-element matrix's band does. The artifact's GPGPU-Sim stops its
// run after 256 completed blocks (-gpgpu_max_completed_cta 256 in
// parboil/result/spmv/gpgpusim.config), with all 765 resident at once;
// ours runs the whole grid.
func spmvShape(s Size) SpMVShape {
	return bySize(s, SpMVShape{Rows: 8, MaxPerRow: 3, Threads: 4}, SpMVShape{Rows: 4096, MaxPerRow: 16, Threads: 64},
		SpMVShape{Rows: 146689, MaxPerRow: 48, Threads: 192})
}

// spmvNZInsts is the arithmetic of one diagonal of SpMV (see aluCycles):
// the element's index (an add), the vector's address (a shift and an add),
// the multiply-add and the loop (2).
const spmvNZInsts = 1 + 2 + 1 + 2

// spmvWarp is the row padding of the jagged diagonals: the rows of a warp
// are padded with zeros to the warp's longest (coo_to_jds's pad of 32 in
// Parboil's main.cu).
const spmvWarp = 32

// NewSpMV returns y = A·x with A in jagged diagonal storage (Parboil's
// spmv_jds): rows sorted by length, each warp's 32 rows padded with zeros
// to the longest of them, diagonal d holding the d-th element of every row
// whose warp reaches d, stored contiguously so that neighbouring threads
// read neighbouring words. Thread r walks sorted row r for its warp's
// length and stores y[perm[r]]. Like Parboil's kernel it reads, per
// diagonal, the element and the column of this diagonal and the x of the
// previous one's column together (its software prefetch).
func NewSpMV(sh SpMVShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.Rows <= 0 || sh.MaxPerRow <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: spmv %+v", ErrConfig, sh)
	}
	a, rng, err := newRSApp("spmv", s, seed, 0x59)
	if err != nil {
		return nil, err
	}
	type nz struct{ col, val uint32 }
	rows := make([][]nz, sh.Rows)
	for r := range rows {
		for range 1 + rng.IntN(sh.MaxPerRow) {
			rows[r] = append(rows[r], nz{uint32(rng.IntN(sh.Rows)), uint32(rng.IntN(16))})
		}
	}
	x := randU32s(rng, sh.Rows, 16)
	y := make([]uint32, sh.Rows)
	for r, row := range rows {
		for _, e := range row {
			y[r] += e.val * x[e.col]
		}
	}
	perm := make([]uint32, sh.Rows)
	for i := range perm {
		perm[i] = uint32(i)
	}
	slices.SortStableFunc(perm, func(p, q uint32) int { return len(rows[q]) - len(rows[p]) })
	// bound[w]: the length of warp w's rows, its first (longest) row's.
	warps := (sh.Rows + spmvWarp - 1) / spmvWarp
	bound := make([]uint32, warps)
	for w := range bound {
		bound[w] = uint32(len(rows[perm[w*spmvWarp]]))
	}
	var ptr, data, idx []uint32
	for d := 0; d < int(bound[0]); d++ {
		ptr = append(ptr, uint32(len(data)))
		for i, r := range perm {
			if d >= int(bound[i/spmvWarp]) {
				break
			}
			e := nz{}
			if d < len(rows[r]) {
				e = rows[r][d]
			}
			data = append(data, e.val)
			idx = append(idx, e.col)
		}
	}
	ptr = append(ptr, uint32(len(data)))
	a.arrays = []rsArray{{name: "data", init: data}, {name: "idx", init: idx}, {name: "ptr", init: ptr},
		{name: "perm", init: perm}, {name: "bound", init: bound}, {name: "x", init: x}, {name: "y", want: y}}
	a.rs.kernels = []rsKernel{perItem("spmv_jds", "spmv", sh.Rows, sh.Threads, func(t *scope.Thread, p *Persister, r int) {
		db, ib, pb, xb := a.addr("data"), a.addr("idx"), a.addr("ptr"), a.addr("x")
		n := int(t.Load32(word32(a.addr("bound"), r/spmvWarp)))
		work(t, n*spmvNZInsts)
		var sum uint32
		var v [3]uint32
		j := int(t.Load32(word32(pb, 0))) + r
		t.Gather32(v[:2], word32(db, j), word32(ib, j))
		d, i := v[0], v[1]
		for k := 1; k <= n; k++ {
			// The element and column of diagonal k (none past the last)
			// and the x of diagonal k-1's column, together.
			if k < n {
				j = int(t.Load32(word32(pb, k))) + r
				t.Gather32(v[:], word32(db, j), word32(ib, j), word32(xb, int(i)))
			} else {
				v[2] = t.Load32(word32(xb, int(i)))
			}
			sum += d * v[2]
			d, i = v[0], v[1]
		}
		p.Store32(word32(a.addr("y"), int(t.Load32(word32(a.addr("perm"), r)))), sum)
	})}
	return a, nil
}

// LBMShape sizes an LBM run: an NX×NY×NZ D3Q19 lattice, Steps time
// steps, each a launch of one block of NX threads per (y, z) row (a thread
// per cell), as Parboil's performStreamCollide_kernel. Blocks, if
// positive, runs only the first Blocks rows of a step (y fastest), and
// only the z planes those rows touch are allocated.
type LBMShape struct{ NX, NY, NZ, Steps, Blocks int }

// lbmShape is the LBM of size s. Paper size is the re-study's lbm run (its
// artifact, github.com/peiyi1/memory_persistency_model_for_GPU:
// parboil/result/lbm/run and nvm_base): Parboil's 120×120×150 lid-driven
// cavity (SIZE_X, SIZE_Y, SIZE_Z in
// parboil/benchmarks/lbm/src/nvm/layout_config.h), a grid of 120×150
// blocks of 120 threads. Its GPGPU-Sim stops a run after 1,000 completed
// blocks (-gpgpu_max_completed_cta 1000 in
// parboil/result/lbm/gpgpusim.config; its log ends "break due to reaching
// the maximum cycles (or instructions)" in the first time step, 1,960
// blocks issued), so its time is that of the grid's first 1,000 blocks:
// ours runs those, planes z = 0..7 and 40 rows of plane 8, one step.
func lbmShape(s Size) LBMShape {
	return bySize(s, LBMShape{NX: 4, NY: 3, NZ: 3, Steps: 2},
		LBMShape{NX: 32, NY: 16, NZ: 16, Steps: 2, Blocks: 160},
		LBMShape{NX: 120, NY: 120, NZ: 150, Steps: 1, Blocks: 1000})
}

// lbmDirs are the 19 directions of a D3Q19 lattice in Parboil's order (C,
// N, S, E, W, T, B, NE, NW, SE, SW, NT, NB, ST, SB, ET, EB, WT, WB).
var lbmDirs = [19][3]int{{0, 0, 0}, {0, 1, 0}, {0, -1, 0}, {1, 0, 0}, {-1, 0, 0}, {0, 0, 1}, {0, 0, -1},
	{1, 1, 0}, {-1, 1, 0}, {1, -1, 0}, {-1, -1, 0}, {0, 1, 1}, {0, 1, -1}, {0, -1, 1}, {0, -1, -1},
	{1, 0, 1}, {1, 0, -1}, {-1, 0, 1}, {-1, 0, -1}}

// lbmOpposite returns the direction opposite direction i.
func lbmOpposite(i int) int {
	d := lbmDirs[i]
	for j, e := range lbmDirs {
		if e[0] == -d[0] && e[1] == -d[1] && e[2] == -d[2] {
			return j
		}
	}
	panic("workloads: a D3Q19 direction without its opposite")
}

// lbmObstacle is the flag of an obstacle cell (Parboil's OBSTACLE).
const lbmObstacle = 1

// lbmCellInsts is the arithmetic of one cell (see aluCycles): the cell's
// index from the thread and block ids (two multiply-adds, 2); the flag's
// test (2); the collision's density (18 adds) and its nineteenth (a
// multiply-high and a shift, 2), per direction an add and a shift (38);
// the 19 source and 19 destination addresses (an add of a constant offset
// each, 38).
const lbmCellInsts = 2 + 2 + 18 + 2 + 38 + 38

// NewLBM returns the stream-collide of Parboil's lbm
// (performStreamCollide_kernel, its SCATTER layout) on a D3Q19 lattice of
// integer densities: each cell reads its 19 densities and its flag from
// buffer k%2, an obstacle reflects every density back where it came from,
// a fluid cell relaxes every direction halfway to the cell's mean, and the
// cell stores each of the 19 to the neighbour in its direction in buffer
// (k+1)%2. The layout is Parboil's: 20 arrays (19 directions, then the
// flags), each a lattice of rows padded to a multiple of 32 cells (128
// bytes) with two margin planes below and above; obstacles are the
// cavity's walls (LBM_initializeSpecialCellsForLDC: the faces x, y = 0 or
// last and z = 0 or last; the artifact's obstacle file,
// parboil/datasets/lbm/long/input/120_120_150_ldc.of, has none before
// plane 16, beyond every row the paper size runs). Integer densities stand
// for Parboil's floats, and the lid's acceleration is not modelled. A
// kernel per step; a step reads only the buffer the previous one wrote, so
// re-running a block is idempotent.
func NewLBM(sh LBMShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	rows := sh.NY * sh.NZ
	if sh.NX <= 0 || sh.NY <= 0 || sh.NZ <= 0 || sh.Steps <= 0 || sh.Blocks < 0 || sh.Blocks > rows {
		return nil, fmt.Errorf("%w: lbm %+v", ErrConfig, sh)
	}
	if sh.Blocks > 0 {
		rows = sh.Blocks
	}
	a, rng, err := newRSApp("lbm", s, seed, 0x1b)
	if err != nil {
		return nil, err
	}
	px := (sh.NX + 1 + 31) / 32 * 32   // row pitch: at least one padding cell
	nz := min(sh.NZ, (rows-1)/sh.NY+1) // planes computed
	plane := px * sh.NY                // cells per plane
	cells := plane * (nz + 4)          // with two margin planes each side
	at := func(x, y, z, e int) int { return e*cells + (z+2)*plane + y*px + x }
	grid := randU32s(rng, 20*cells, 1000)
	for z := -2; z < nz+2; z++ {
		for y := range sh.NY {
			for x := range px {
				f := uint32(0)
				if x < sh.NX && (x == 0 || x == sh.NX-1 || y == 0 || y == sh.NY-1 || z == 0 || z == sh.NZ-1) {
					f = lbmObstacle
				}
				grid[at(x, y, z, 19)] = f
			}
		}
	}
	cell := func(src func(i int) uint32, flag uint32) [19]uint32 {
		var f [19]uint32
		for i := range f {
			f[i] = src(i)
		}
		if flag&lbmObstacle != 0 {
			var g [19]uint32
			for i := range f {
				g[i] = f[lbmOpposite(i)]
			}
			return g
		}
		var rho uint32
		for _, v := range f {
			rho += v
		}
		for i := range f {
			f[i] = (f[i] + rho/19) / 2
		}
		return f
	}
	init := append(slices.Clone(grid), grid...)
	bufs := [2][]uint32{grid, slices.Clone(grid)}
	for k := range sh.Steps {
		src, dst := bufs[k%2], bufs[(k+1)%2]
		for r := range rows {
			y, z := r%sh.NY, r/sh.NY
			for x := range sh.NX {
				f := cell(func(i int) uint32 { return src[at(x, y, z, i)] }, src[at(x, y, z, 19)])
				for i, d := range lbmDirs {
					dst[at(x, y, z, i)+d[0]+d[1]*px+d[2]*plane] = f[i]
				}
			}
		}
	}
	a.arrays = []rsArray{{name: "f", init: init, rw: true}}
	a.rs.kernels = nil
	for k := range sh.Steps {
		a.rs.kernels = append(a.rs.kernels, rsKernel{idempotent: true, name: fmt.Sprintf("collide%d", k), label: "lbm",
			grid: scope.Grid{Blocks: rows, Threads: sh.NX},
			body: func(t *scope.Thread, p *Persister) {
				x, y, z := t.TID(), t.Block()%sh.NY, t.Block()/sh.NY
				src := word32(a.addr("f"), k%2*20*cells)
				dst := word32(a.addr("f"), (k+1)%2*20*cells)
				var in [20]uint32
				addrs := make([]pm.Addr, 20)
				for i := range addrs {
					addrs[i] = word32(src, at(x, y, z, i))
				}
				t.Gather32(in[:], addrs...)
				work(t, lbmCellInsts)
				f := cell(func(i int) uint32 { return in[i] }, in[19])
				for i, d := range lbmDirs {
					p.Store32(word32(dst, at(x, y, z, i)+d[0]+d[1]*px+d[2]*plane), f[i])
				}
			}})
	}
	a.check = func(m *pm.Machine) error {
		got, err := readU32s(m, word32(a.addr("f"), sh.Steps%2*20*cells), 20*cells)
		if err != nil {
			return err
		}
		return compareU32("lbm.f", got, bufs[sh.Steps%2])
	}
	return a, nil
}

// SADShape sizes a SAD block matcher (Parboil's sad): a W×H frame of
// 16×16 macroblocks of 4×4 blocks, searched over offsets -R..R in both
// axes, each thread of sad1 computing PosPerThread search positions of
// one 4×4 block.
type SADShape struct{ W, H, R, PosPerThread int }

// sadShape is the SAD of size s. Paper size is the re-study's sad run (its
// artifact, github.com/peiyi1/memory_persistency_model_for_GPU:
// parboil/result/sad/run and nvm_base): Parboil's default input, QCIF
// frames of 176×144 (parboil/datasets/sad/default/input), a ±16 search
// (SEARCH_RANGE 16 in parboil/benchmarks/sad/src/nvm/sad.h: 1,089
// positions, padded to 1,096), 18 positions per thread (POS_PER_THREAD in
// sad4.h): mb_sad_calc on a grid of 44×36 blocks of 61 threads and
// larger_sad_calc_8 on 11×9 blocks of 32×4 threads, as its log shows.
func sadShape(s Size) SADShape {
	return bySize(s, SADShape{W: 16, H: 16, R: 1, PosPerThread: 2}, SADShape{W: 64, H: 32, R: 4, PosPerThread: 6},
		SADShape{W: 176, H: 144, R: 16, PosPerThread: 18})
}

// The arithmetic of SAD (see aluCycles). sad1 per thread: its 4×4 block
// and first position from the block and thread ids (a division and a
// remainder, 4, and the block's corner and output address, 6), its 16
// pixels' addresses (16); per position the search offset (a division and
// a remainder by 2R+1, 4, two adds), per pixel the reference's address (2),
// the absolute difference (a subtract and an absolute value) and the sum
// (1), the store's address (1) and the loop (2). sad2 per thread: the
// quadrant and the input and output addresses (12); per iteration the
// loop (2), the five sums (6) and their addresses (5 + 4).
const (
	sad1FixInsts = 4 + 6 + 16
	sad1PosInsts = 4 + 2 + 16*(2+2+1) + 1 + 2
	sad2FixInsts = 12
	sad2ItInsts  = 2 + 6 + 5 + 4
)

// NewSAD returns a SAD block matcher (Parboil's sad), two kernels:
//
//   - sad1 (mb_sad_calc): block b of the grid is 4×4 block b of the frame,
//     and its thread i computes, for search positions i·PosPerThread up to
//     PosPerThread of them, the sum of absolute differences between the
//     block in the current frame and the reference frame's 4×4 block at
//     that offset (coordinates clamped to the frame, as the artifact's
//     texture clamps them), storing each as a 16-bit value to the block's
//     row of sad.out7 (Parboil's type-7 SADs; rows of positions padded to
//     a multiple of 8, the 16 blocks of a macroblock one after another);
//   - sad2 (larger_sad_calc_8): block b is macroblock b, thread (x, y) of
//     its 32×4 takes quadrant y of the macroblock and, for every 32nd pair
//     of positions from x, adds the quadrant's four 4×4 SADs (two 16-bit
//     SADs packed in a word, as Parboil does) into its two 8×4, two 4×8
//     and one 8×8 SADs (sad.out5, sad.out6, sad.out4).
//
// Pixels are 32-bit words here (16-bit there); the SADs are 16-bit as
// there.
func NewSAD(sh SADShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	// An even number of positions per thread: no two threads store to the
	// same word of sad.out7.
	if sh.W < 16 || sh.H < 16 || sh.W%16 != 0 || sh.H%16 != 0 || sh.R < 0 || sh.PosPerThread <= 0 || sh.PosPerThread%2 != 0 {
		return nil, fmt.Errorf("%w: sad %+v (frame a multiple of 16, an even number of positions per thread)", ErrConfig, sh)
	}
	a, rng, err := newRSApp("sad", s, seed, 0x5ad)
	if err != nil {
		return nil, err
	}
	cur, ref := randU32s(rng, sh.W*sh.H, 256), randU32s(rng, sh.W*sh.H, 256)
	side := 2*sh.R + 1
	offs := side * side
	padW := (offs + 7) / 8 * 8 / 2 // words per row of positions
	pairs := (offs + 1) / 2
	mbw, mbs := sh.W/16, sh.W/16*(sh.H/16)
	threads1 := (offs + sh.PosPerThread - 1) / sh.PosPerThread
	clamp := func(v, hi int) int { return min(max(v, 0), hi-1) }
	// blk returns the frame coordinates of 4×4 block k of macroblock mb.
	blk := func(mb, k int) (int, int) { return mb%mbw*16 + k%4*4, mb/mbw*16 + k/4*4 }
	sadOf := func(pix func(frame, x, y int) uint32, bx, by, o int) uint32 {
		dx, dy := o%side-sh.R, o/side-sh.R
		var sum uint32
		for y := range 4 {
			for x := range 4 {
				c := pix(0, bx+x, by+y)
				r := pix(1, clamp(bx+x+dx, sh.W), clamp(by+y+dy, sh.H))
				if c > r {
					sum += c - r
				} else {
					sum += r - c
				}
			}
		}
		return sum
	}
	out7 := make([]uint32, 16*mbs*padW)
	for mb := range mbs {
		for k := range 16 {
			bx, by := blk(mb, k)
			for o := range offs {
				v := sadOf(func(f, x, y int) uint32 {
					if f == 0 {
						return cur[y*sh.W+x]
					}
					return ref[y*sh.W+x]
				}, bx, by, o)
				out7[(mb*16+k)*padW+o/2] |= v << (16 * (o % 2))
			}
		}
	}
	out6, out5, out4 := make([]uint32, 8*mbs*padW), make([]uint32, 8*mbs*padW), make([]uint32, 4*mbs*padW)
	for mb := range mbs {
		for q := range 4 {
			tx, ty := q&1, q>>1
			in := func(k int) []uint32 { return out7[(mb*16+ty*8+tx*2+k)*padW:] }
			for p := range pairs {
				i00, i01, i10, i11 := in(0)[p], in(1)[p], in(4)[p], in(5)[p]
				out6[(mb*8+ty*4+tx*2)*padW+p] = i00 + i10
				out6[(mb*8+ty*4+tx*2+1)*padW+p] = i01 + i11
				out5[(mb*8+ty*4+tx)*padW+p] = i00 + i01
				out5[(mb*8+ty*4+tx+2)*padW+p] = i10 + i11
				out4[(mb*4+ty*2+tx)*padW+p] = i00 + i01 + i10 + i11
			}
		}
	}
	a.arrays = []rsArray{{name: "cur", init: cur}, {name: "ref", init: ref},
		{name: "out7", want: out7}, {name: "out6", want: out6}, {name: "out5", want: out5}, {name: "out4", want: out4}}
	a.rs.kernels = []rsKernel{
		{idempotent: true, name: "mb_sad_calc", label: "sad1", grid: scope.Grid{Blocks: 16 * mbs, Threads: threads1},
			body: func(t *scope.Thread, p *Persister) {
				cb, rb := a.addr("cur"), a.addr("ref")
				bx, by := blk(t.Block()/16, t.Block()%16)
				first := t.TID() * sh.PosPerThread
				last := min(first+sh.PosPerThread, offs)
				work(t, sad1FixInsts+(last-first)*sad1PosInsts)
				var c [16]uint32
				addrs := make([]pm.Addr, 16)
				for i := range addrs {
					addrs[i] = word32(cb, (by+i/4)*sh.W+bx+i%4)
				}
				t.Gather32(c[:], addrs...)
				var r [16]uint32
				row := word32(a.addr("out7"), t.Block()*padW)
				for o := first; o < last; o++ {
					dx, dy := o%side-sh.R, o/side-sh.R
					for i := range addrs {
						addrs[i] = word32(rb, clamp(by+i/4+dy, sh.H)*sh.W+clamp(bx+i%4+dx, sh.W))
					}
					t.Gather32(r[:], addrs...)
					var sum uint32
					for i := range r {
						if c[i] > r[i] {
							sum += c[i] - r[i]
						} else {
							sum += r[i] - c[i]
						}
					}
					p.Store16(row.Add(uint64(2*o)), uint16(sum))
				}
			}},
		{idempotent: true, name: "larger_sad_calc_8", label: "sad2", grid: scope.Grid{Blocks: mbs, Threads: 128},
			body: func(t *scope.Thread, p *Persister) {
				mb, x, q := t.Block(), t.TID()%32, t.TID()/32
				tx, ty := q&1, q>>1
				in := func(k int) pm.Addr { return word32(a.addr("out7"), (mb*16+ty*8+tx*2+k)*padW) }
				o6 := func(k int) pm.Addr { return word32(a.addr("out6"), (mb*8+ty*4+tx*2+k)*padW) }
				o5 := func(k int) pm.Addr { return word32(a.addr("out5"), (mb*8+ty*4+tx+k)*padW) }
				o4 := word32(a.addr("out4"), (mb*4+ty*2+tx)*padW)
				work(t, sad2FixInsts+(pairs-x+31)/32*sad2ItInsts)
				var v [4]uint32
				for p2 := x; p2 < pairs; p2 += 32 {
					t.Gather32(v[:], word32(in(0), p2), word32(in(1), p2), word32(in(4), p2), word32(in(5), p2))
					i00, i01, i10, i11 := v[0], v[1], v[2], v[3]
					p.Store32(word32(o6(0), p2), i00+i10)
					p.Store32(word32(o6(1), p2), i01+i11)
					p.Store32(word32(o5(0), p2), i00+i01)
					p.Store32(word32(o5(2), p2), i10+i11)
					p.Store32(word32(o4, p2), i00+i01+i10+i11)
				}
			}},
	}
	return a, nil
}

// AccumulateShape sizes an Accumulate: Elements words, Per words per
// thread, Threads threads per block.
type AccumulateShape struct{ Elements, Per, Threads int }

func accumulateShape(s Size) AccumulateShape {
	return bySize(s, AccumulateShape{Elements: 8, Per: 2, Threads: 2}, AccumulateShape{Elements: 1 << 15, Per: 8, Threads: 128},
		AccumulateShape{Elements: 1 << 19, Per: 8, Threads: 256})
}

// NewAccumulate returns an in-place accumulation (x[i] += d[i], the shape
// of an in-place histogram or solver update): unlike every other re-study
// kernel here it is not idempotent, since a block re-run after some of its
// additions became durable adds them twice. Only a durable transaction
// (an Undo scheme, which rolls the block back first) makes it recoverable;
// declaring it idempotent would be a bug, and the crash checker finds it
// (TestRestudyIdempotencyDeclaration).
func NewAccumulate(sh AccumulateShape, s Scheme, seed uint64, declareIdempotent bool) (RestudyWorkload, error) {
	if sh.Elements <= 0 || sh.Per <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: accumulate %+v", ErrConfig, sh)
	}
	a, rng, err := newRSApp("accumulate", s, seed, 0xacc)
	if err != nil {
		return nil, err
	}
	x, d := randU32s(rng, sh.Elements, 1000), randU32s(rng, sh.Elements, 1000)
	want := make([]uint32, sh.Elements)
	for i := range want {
		want[i] = x[i] + d[i]
	}
	a.arrays = []rsArray{{name: "x", init: x, want: want, rw: true}, {name: "d", init: d}}
	threads := blocksFor(blocksFor(sh.Elements, sh.Per), sh.Threads) * sh.Threads
	a.rs.kernels = []rsKernel{{idempotent: declareIdempotent, name: "accumulate", label: "accumulate", grid: scope.Grid{Blocks: threads / sh.Threads, Threads: sh.Threads},
		body: func(t *scope.Thread, p *Persister) {
			// Element k of the thread is k·threads + id: a warp's lanes
			// touch neighbouring words (coalesced).
			xb, db := a.addr("x"), a.addr("d")
			for k := range sh.Per {
				i := k*threads + t.ID()
				if i >= sh.Elements {
					return
				}
				p.Store32(word32(xb, i), t.Load32(word32(xb, i))+t.Load32(word32(db, i)))
			}
		}}}
	return a, nil
}
