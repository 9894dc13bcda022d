package workloads

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// The re-study's other long-running kernels with short CTAs (LS), written
// afresh in the shape of the Parboil kernels they stand for. All arithmetic
// is on uint32 so the Go references are exact; every kernel writes its
// outputs once, from inputs no kernel of the same step overwrites, so every
// block can be re-run after a crash.

// SGEMMShape sizes an SGEMM: C (M×N) = A (M×K) · B (K×N), a Tile×Tile block
// of C per thread block.
type SGEMMShape struct{ M, N, K, Tile int }

func sgemmShape(s Size) SGEMMShape {
	return bySize(s, SGEMMShape{M: 4, N: 4, K: 3, Tile: 2}, SGEMMShape{M: 64, N: 64, K: 64, Tile: 8},
		// Parboil's sgemm medium input multiplies 128×96 by 96×160 matrices.
		SGEMMShape{M: 128, N: 160, K: 96, Tile: 16})
}

// The arithmetic of an SGEMM thread (see aluCycles): per step of k, the
// multiply-add, an add to each of the two running addresses and the loop
// (2); before the loop, the row and column from the block and thread ids
// (a division and a remainder by loop-invariant values, 4 each, two
// multiply-adds) and the two starting addresses (2); after it the store's
// address (1).
const (
	sgemmStepInsts = 1 + 2 + 2
	sgemmFixInsts  = 4 + 4 + 2 + 2 + 1
)

// NewSGEMM returns the matrix product (Parboil's mysgemmNT): each thread
// computes one element of C from a row of A and a column of B, read from
// PM, charges its multiply-adds as compute (sgemmStepInsts), and stores
// the element once.
func NewSGEMM(sh SGEMMShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.M <= 0 || sh.N <= 0 || sh.K <= 0 || sh.Tile <= 0 || sh.M%sh.Tile != 0 || sh.N%sh.Tile != 0 {
		return nil, fmt.Errorf("%w: sgemm %+v (M and N must be multiples of Tile)", ErrConfig, sh)
	}
	a, rng, err := newRSApp("sgemm", s, seed, 0x5e)
	if err != nil {
		return nil, err
	}
	A, B := randU32s(rng, sh.M*sh.K, 16), randU32s(rng, sh.K*sh.N, 16)
	C := make([]uint32, sh.M*sh.N)
	for i := range sh.M {
		for j := range sh.N {
			var sum uint32
			for k := range sh.K {
				sum += A[i*sh.K+k] * B[k*sh.N+j]
			}
			C[i*sh.N+j] = sum
		}
	}
	a.arrays = []rsArray{{name: "a", init: A}, {name: "b", init: B}, {name: "c", want: C}}
	tilesN := sh.N / sh.Tile
	a.rs.kernels = []rsKernel{{idempotent: true, name: "mysgemm", label: "sgemm", grid: scope.Grid{Blocks: (sh.M / sh.Tile) * tilesN, Threads: sh.Tile * sh.Tile},
		body: func(t *scope.Thread, p *Persister) {
			ab, bb, cb := a.addr("a"), a.addr("b"), a.addr("c")
			i := (t.Block()/tilesN)*sh.Tile + t.TID()/sh.Tile
			j := (t.Block()%tilesN)*sh.Tile + t.TID()%sh.Tile
			work(t, sgemmFixInsts+sh.K*sgemmStepInsts)
			var sum uint32
			for k := range sh.K {
				sum += t.Load32(word32(ab, i*sh.K+k)) * t.Load32(word32(bb, k*sh.N+j))
			}
			p.Store32(word32(cb, i*sh.N+j), sum)
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

func spmvShape(s Size) SpMVShape {
	return bySize(s, SpMVShape{Rows: 8, MaxPerRow: 3, Threads: 4}, SpMVShape{Rows: 4096, MaxPerRow: 16, Threads: 64},
		// Parboil's spmv medium input has about 12 K rows.
		SpMVShape{Rows: 12288, MaxPerRow: 32, Threads: 128})
}

// spmvNZInsts is the arithmetic of one non-zero of SpMV (see aluCycles):
// the element's index (an add), the vector's address (a shift and an add),
// the multiply-add and the loop (2).
const spmvNZInsts = 1 + 2 + 1 + 2

// NewSpMV returns y = A·x with A in jagged diagonal storage (Parboil's
// spmv_jds): rows sorted by length, diagonal d holding the d-th non-zero
// of every row longer than d, stored contiguously so that neighbouring
// threads read neighbouring words. Thread r walks sorted row r and stores
// y[perm[r]].
func NewSpMV(sh SpMVShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
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
	var ptr, data, idx []uint32
	for d := 0; d < len(rows[perm[0]]); d++ {
		ptr = append(ptr, uint32(len(data)))
		for _, r := range perm {
			if d >= len(rows[r]) {
				break
			}
			data = append(data, rows[r][d].val)
			idx = append(idx, rows[r][d].col)
		}
	}
	ptr = append(ptr, uint32(len(data)))
	lens := make([]uint32, sh.Rows)
	for i, r := range perm {
		lens[i] = uint32(len(rows[r]))
	}
	a.arrays = []rsArray{{name: "data", init: data}, {name: "idx", init: idx}, {name: "ptr", init: ptr},
		{name: "perm", init: perm}, {name: "len", init: lens}, {name: "x", init: x}, {name: "y", want: y}}
	a.rs.kernels = []rsKernel{perItem("spmv_jds", "spmv", sh.Rows, sh.Threads, func(t *scope.Thread, p *Persister, r int) {
		db, ib, pb, xb := a.addr("data"), a.addr("idx"), a.addr("ptr"), a.addr("x")
		var sum uint32
		n := int(t.Load32(word32(a.addr("len"), r)))
		work(t, n*spmvNZInsts)
		for d := range n {
			k := int(t.Load32(word32(pb, d))) + r
			sum += t.Load32(word32(db, k)) * t.Load32(word32(xb, int(t.Load32(word32(ib, k)))))
		}
		p.Store32(word32(a.addr("y"), int(t.Load32(word32(a.addr("perm"), r)))), sum)
	})}
	return a, nil
}

// LBMShape sizes an LBM-like run: an NX×NY periodic lattice, Steps time
// steps, Threads threads per block (one cell each).
type LBMShape struct{ NX, NY, Steps, Threads int }

func lbmShape(s Size) LBMShape {
	return bySize(s, LBMShape{NX: 4, NY: 2, Steps: 2, Threads: 4}, LBMShape{NX: 64, NY: 32, Steps: 2, Threads: 64},
		// Parboil's lbm lattice is 120×120×150; a 2-D slice of similar width.
		LBMShape{NX: 256, NY: 128, Steps: 3, Threads: 128})
}

// lbmCellInsts is the arithmetic of one cell of a step (see aluCycles):
// the cell's x and y (a division and a remainder, 4); per direction the
// upstream x and y (an add, an add and a wrap-around select each, 6) and
// their address (two multiply-adds); the collision's density (4 adds), its
// fifth (a multiply-high and a shift), per direction an add and a shift;
// and the five stores' addresses.
const lbmCellInsts = 4 + 5*(6+2) + 4 + 2 + 5*2 + 5

// lbmDirs are the five directions of a D2Q5 lattice (rest, ±x, ±y).
var lbmDirs = [5][2]int{{0, 0}, {1, 0}, {-1, 0}, {0, 1}, {0, -1}}

// NewLBM returns an LBM-like streaming-collide kernel (Parboil's
// performStreamCollide) on a D2Q5 lattice of integer densities: in step k
// each cell pulls direction i from its upstream neighbour in buffer k%2,
// relaxes every direction halfway to the cell's mean, and stores the five
// values to buffer (k+1)%2. A kernel per step.
func NewLBM(sh LBMShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.NX <= 0 || sh.NY <= 0 || sh.Steps <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: lbm %+v", ErrConfig, sh)
	}
	a, rng, err := newRSApp("lbm", s, seed, 0x1b)
	if err != nil {
		return nil, err
	}
	cells := sh.NX * sh.NY
	// Structure of arrays, direction-major (f[i·cells + c]), so that a
	// warp's cells are neighbouring words.
	cur := randU32s(rng, 5*cells, 1000)
	init := append(append([]uint32(nil), cur...), make([]uint32, 5*cells)...)
	up := func(c, i int) int {
		x, y := c%sh.NX, c/sh.NX
		x = (x - lbmDirs[i][0] + sh.NX) % sh.NX
		y = (y - lbmDirs[i][1] + sh.NY) % sh.NY
		return y*sh.NX + x
	}
	collide := func(f *[5]uint32) {
		var rho uint32
		for _, v := range f {
			rho += v
		}
		for i := range f {
			f[i] = (f[i] + rho/5) / 2
		}
	}
	for range sh.Steps {
		next := make([]uint32, 5*cells)
		for c := range cells {
			var f [5]uint32
			for i := range 5 {
				f[i] = cur[i*cells+up(c, i)]
			}
			collide(&f)
			for i := range 5 {
				next[i*cells+c] = f[i]
			}
		}
		cur = next
	}
	// The result is in buffer Steps%2; the other buffer is not checked.
	a.arrays = []rsArray{{name: "f", init: init, rw: true}}
	a.rs.kernels = nil
	for k := range sh.Steps {
		a.rs.kernels = append(a.rs.kernels, perItem(fmt.Sprintf("collide%d", k), "lbm", cells, sh.Threads, func(t *scope.Thread, p *Persister, c int) {
			src := a.addr("f").Add(uint64(20 * cells * (k % 2)))
			dst := a.addr("f").Add(uint64(20 * cells * ((k + 1) % 2)))
			var f [5]uint32
			for i := range 5 {
				f[i] = t.Load32(word32(src, i*cells+up(c, i)))
			}
			work(t, lbmCellInsts)
			collide(&f)
			for i := range 5 {
				p.Store32(word32(dst, i*cells+c), f[i])
			}
		}))
	}
	a.check = func(m *pm.Machine) error {
		got, err := readU32s(m, a.addr("f").Add(uint64(20*cells*(sh.Steps%2))), 5*cells)
		if err != nil {
			return err
		}
		return compareU32("lbm.f", got, cur)
	}
	return a, nil
}

// SADShape sizes a SAD block matcher: a W×H frame of 4×4 macroblocks,
// searched over offsets -R..R in both axes.
type SADShape struct{ W, H, R int }

func sadShape(s Size) SADShape {
	return bySize(s, SADShape{W: 8, H: 8, R: 1}, SADShape{W: 64, H: 32, R: 2},
		// Parboil's sad works on QCIF frames (176×144) with a ±16 search; a
		// ±15 window keeps a block within 1024 threads.
		SADShape{W: 176, H: 144, R: 15})
}

// The arithmetic of SAD (see aluCycles). sad1 per thread: its offset from
// the thread id and its macroblock's corner from the block id (a division
// and a remainder each, 4 + 4, and two subtracts and two shifts), and per
// pixel (unrolled, no loop) the current frame's address (2), the
// reference's clamped coordinates (an add, a min and a max each) and
// address (2), the absolute difference (a subtract and an absolute value)
// and the sum (1); the store's address (2). sad2 per thread: the four
// 4×4 SADs' addresses (a multiply-add each), three adds and the store's
// address (2), after the 8×8 block's corner (4).
const (
	sadPixelInsts = 2 + 3 + 3 + 2 + 2 + 1
	sad1Insts     = 4 + 4 + 2 + 2 + 16*sadPixelInsts + 2
	sad2Insts     = 4 + 4 + 3 + 2
)

// NewSAD returns a SAD block matcher (Parboil's sad), two kernels:
//
//   - sad1 (mb_sad_calc): block b of the grid is 4×4 macroblock b, and its
//     thread o computes the sum of absolute differences between the
//     macroblock of the current frame and the reference frame's 4×4 block
//     displaced by offset o (clamped to the frame), storing it to
//     sad.out[b][o];
//   - sad2 (larger_sad_calc_8): block b is 8×8 block b, and its thread o
//     adds the SADs of its four macroblocks at offset o into sad.out8[b][o].
func NewSAD(sh SADShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.W < 8 || sh.H < 8 || sh.W%8 != 0 || sh.H%8 != 0 || sh.R < 0 || sh.R > 15 {
		return nil, fmt.Errorf("%w: sad %+v (frame a multiple of 8, R at most 15)", ErrConfig, sh)
	}
	a, rng, err := newRSApp("sad", s, seed, 0x5ad)
	if err != nil {
		return nil, err
	}
	cur, ref := randU32s(rng, sh.W*sh.H, 256), randU32s(rng, sh.W*sh.H, 256)
	side := 2*sh.R + 1
	offs := side * side
	mbw := sh.W / 4
	mbs := mbw * (sh.H / 4)
	b8w := sh.W / 8
	b8s := b8w * (sh.H / 8)
	// mbOf returns the macroblock in quadrant q of 8×8 block b.
	mbOf := func(b, q int) int { return (b/b8w*2+q/2)*mbw + b%b8w*2 + q%2 }
	clamp := func(v, hi int) int { return min(max(v, 0), hi-1) }
	sadOf := func(pix func(frame, x, y int) uint32, mb, o int) uint32 {
		mx, my := (mb%mbw)*4, (mb/mbw)*4
		dx, dy := o%side-sh.R, o/side-sh.R
		var sum uint32
		for y := range 4 {
			for x := range 4 {
				c := pix(0, mx+x, my+y)
				r := pix(1, clamp(mx+x+dx, sh.W), clamp(my+y+dy, sh.H))
				if c > r {
					sum += c - r
				} else {
					sum += r - c
				}
			}
		}
		return sum
	}
	want := make([]uint32, mbs*offs)
	for mb := range mbs {
		for o := range offs {
			want[mb*offs+o] = sadOf(func(f, x, y int) uint32 {
				if f == 0 {
					return cur[y*sh.W+x]
				}
				return ref[y*sh.W+x]
			}, mb, o)
		}
	}
	want8 := make([]uint32, b8s*offs)
	for b := range b8s {
		for o := range offs {
			for q := range 4 {
				want8[b*offs+o] += want[mbOf(b, q)*offs+o]
			}
		}
	}
	a.arrays = []rsArray{{name: "cur", init: cur}, {name: "ref", init: ref}, {name: "out", want: want}, {name: "out8", want: want8}}
	a.rs.kernels = []rsKernel{
		{idempotent: true, name: "mb_sad_calc", label: "sad1", grid: scope.Grid{Blocks: mbs, Threads: offs},
			body: func(t *scope.Thread, p *Persister) {
				cb, rb := a.addr("cur"), a.addr("ref")
				work(t, sad1Insts)
				v := sadOf(func(f, x, y int) uint32 {
					if f == 0 {
						return t.Load32(word32(cb, y*sh.W+x))
					}
					return t.Load32(word32(rb, y*sh.W+x))
				}, t.Block(), t.TID())
				p.Store32(word32(a.addr("out"), t.Block()*offs+t.TID()), v)
			}},
		{idempotent: true, name: "larger_sad_calc_8", label: "sad2", grid: scope.Grid{Blocks: b8s, Threads: offs},
			body: func(t *scope.Thread, p *Persister) {
				b, o := t.Block(), t.TID()
				work(t, sad2Insts)
				var sum uint32
				for q := range 4 {
					sum += t.Load32(word32(a.addr("out"), mbOf(b, q)*offs+o))
				}
				p.Store32(word32(a.addr("out8"), b*offs+o), sum)
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
func NewAccumulate(sh AccumulateShape, s persistency.Scheme, seed uint64, declareIdempotent bool) (RestudyWorkload, error) {
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
