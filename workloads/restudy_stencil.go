package workloads

import (
	"fmt"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// StencilShape sizes a Stencil: an NX×NY×NZ grid of 32-bit cells, Steps
// time steps, Threads threads per block (one interior column per thread).
type StencilShape struct {
	NX, NY, NZ, Steps, Threads int
}

func stencilShape(s Size) StencilShape {
	switch s {
	case Tiny:
		return StencilShape{NX: 4, NY: 4, NZ: 3, Steps: 2, Threads: 2}
	case Quick:
		return StencilShape{NX: 32, NY: 32, NZ: 16, Steps: 2, Threads: 64}
	}
	// Parboil's stencil default input is 128×128×32.
	return StencilShape{NX: 128, NY: 128, NZ: 32, Steps: 4, Threads: 128}
}

// Stencil is the re-study's 7-point stencil (Parboil's naive_kernel)
// written afresh: in time step k every interior cell of buffer (k+1)%2
// becomes 2·c + 3·(sum of its six neighbours) of buffer k%2, in uint32
// arithmetic; each thread walks one (x, y) column along z. Boundary cells
// keep their input value in both buffers. A step's kernel reads only the
// buffer the previous step completed, so re-running it is idempotent.
type Stencil struct {
	Shape StencilShape
	rs    rsState
	in    []uint32
	want  []uint32
	buf   pm.Addr
}

// NewStencil returns the stencil under scheme s with inputs drawn from seed.
func NewStencil(sh StencilShape, s persistency.Scheme, seed uint64) (*Stencil, error) {
	if sh.NX < 3 || sh.NY < 3 || sh.NZ < 3 || sh.Steps <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: stencil %+v (want at least 3 cells per axis)", ErrConfig, sh)
	}
	if !s.Valid() {
		return nil, fmt.Errorf("%w: scheme %+v", ErrConfig, s)
	}
	st := &Stencil{Shape: sh}
	rng := rand.New(rand.NewPCG(seed, 0x57e))
	n := sh.NX * sh.NY * sh.NZ
	for range n {
		st.in = append(st.in, uint32(rng.IntN(100)))
	}
	cur := append([]uint32(nil), st.in...)
	for range sh.Steps {
		next := append([]uint32(nil), cur...)
		for z := 1; z < sh.NZ-1; z++ {
			for y := 1; y < sh.NY-1; y++ {
				for x := 1; x < sh.NX-1; x++ {
					next[st.idx(x, y, z)] = stencilCell(func(dx, dy, dz int) uint32 { return cur[st.idx(x+dx, y+dy, z+dz)] })
				}
			}
		}
		cur = next
	}
	st.want = cur
	cols := (sh.NX - 2) * (sh.NY - 2)
	grid := scope.Grid{Blocks: blocksFor(cols, sh.Threads), Threads: sh.Threads}
	st.rs = rsState{scheme: s, prefix: "stencil", undoWords: 2 * n}
	for k := range sh.Steps {
		st.rs.kernels = append(st.rs.kernels, rsKernel{idempotent: true, name: fmt.Sprintf("step%d", k), grid: grid,
			body: func(t *scope.Thread, p *Persister) { st.step(t, p, k) }})
	}
	return st, nil
}

func (st *Stencil) idx(x, y, z int) int { return (z*st.Shape.NY+y)*st.Shape.NX + x }

// stencilCell is the update of one cell from its neighbourhood.
func stencilCell(at func(dx, dy, dz int) uint32) uint32 {
	return 2*at(0, 0, 0) + 3*(at(-1, 0, 0)+at(1, 0, 0)+at(0, -1, 0)+at(0, 1, 0)+at(0, 0, -1)+at(0, 0, 1))
}

func (st *Stencil) step(t *scope.Thread, p *Persister, k int) {
	sh := st.Shape
	c := t.ID()
	if c >= (sh.NX-2)*(sh.NY-2) {
		return
	}
	x, y := 1+c%(sh.NX-2), 1+c/(sh.NX-2)
	n := uint64(4 * sh.NX * sh.NY * sh.NZ)
	src := st.buf.Add(uint64(k%2) * n)
	dst := st.buf.Add(uint64((k+1)%2) * n)
	for z := 1; z < sh.NZ-1; z++ {
		v := stencilCell(func(dx, dy, dz int) uint32 {
			return t.Load32(src.Add(uint64(4 * st.idx(x+dx, y+dy, z+dz))))
		})
		p.Store32(dst.Add(uint64(4*st.idx(x, y, z))), v)
	}
}

// Name returns "stencil/<scheme>".
func (st *Stencil) Name() string { return "stencil/" + st.rs.scheme.String() }

// Scheme returns the persistency scheme the kernels follow.
func (st *Stencil) Scheme() persistency.Scheme { return st.rs.scheme }

// Setup creates stencil.buf, both buffers holding the input, and the
// markers.
func (st *Stencil) Setup(m *pm.Machine) error {
	n := len(st.in)
	base, err := createFilled(m, "stencil.buf", 8*n, 0)
	if err != nil {
		return err
	}
	b := make([]byte, 4*n)
	for i, v := range st.in {
		pm.PutLE(b[4*i:4*i+4], uint64(v))
	}
	if err := m.CopyIn(base, b); err != nil {
		return err
	}
	if err := m.CopyIn(base.Add(uint64(4*n)), b); err != nil {
		return err
	}
	return st.rs.setup(m)
}

func (st *Stencil) bind(m *pm.Machine) error {
	b, err := openRegions(m, "stencil.buf")
	if err != nil {
		return err
	}
	st.buf = b[0]
	if err := st.rs.writable(rsRange{st.buf, 2 * len(st.in)}); err != nil {
		return err
	}
	return st.rs.open(m)
}

// Run runs every time step.
func (st *Stencil) Run(m *pm.Machine) error {
	if err := st.bind(m); err != nil {
		return err
	}
	return st.rs.run(m)
}

// Recover re-runs the steps and blocks the durable markers do not cover.
func (st *Stencil) Recover(m *pm.Machine) error { return st.Run(m) }

// Check compares the last step's buffer with the reference computed in Go.
func (st *Stencil) Check(m *pm.Machine) error {
	if err := st.bind(m); err != nil {
		return err
	}
	n := len(st.in)
	got, err := readU32s(m, st.buf.Add(uint64(st.Shape.Steps%2*4*n)), n)
	if err != nil {
		return err
	}
	return compareU32("stencil.buf", got, st.want)
}
