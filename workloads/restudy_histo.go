package workloads

import (
	"fmt"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// HistoShape sizes a Histo: Elements input values in [0, Bins), counted by
// Grid (one shared-memory histogram per block).
type HistoShape struct {
	Elements, Bins int
	Grid           scope.Grid
}

func histoShape(s Size) HistoShape {
	switch s {
	case Tiny:
		return HistoShape{Elements: 24, Bins: 4, Grid: scope.Grid{Blocks: 2, Threads: 4}}
	case Quick:
		return HistoShape{Elements: 1 << 15, Bins: 256, Grid: scope.Grid{Blocks: 16, Threads: 256}}
	}
	// Parboil's histo input is an image of about a million pixels.
	return HistoShape{Elements: 1 << 20, Bins: 4096, Grid: scope.Grid{Blocks: 80, Threads: 512}}
}

// Histo is the re-study's short-running histogram kernels (Parboil's
// histo_intermediates and histo_final) written afresh: kernel 1 counts a
// grid-stride share of the input per block in shared memory and writes
// the block's counts to its row of histo.partial in PM; kernel 2 sums each
// bin over the rows into histo.final. Both kernels are idempotent. The
// input lives in PM (histo.in), copied in by the host.
type Histo struct {
	Shape HistoShape
	rs    rsState
	in    []uint32
	want  []uint32
	base  [3]pm.Addr // histo.in, histo.partial, histo.final of the machine being run
}

// NewHisto returns the histogram under scheme s with inputs drawn from
// seed.
func NewHisto(sh HistoShape, s persistency.Scheme, seed uint64) (*Histo, error) {
	if sh.Elements <= 0 || sh.Bins <= 0 || sh.Grid.Blocks <= 0 || sh.Grid.Threads <= 0 {
		return nil, fmt.Errorf("%w: histo %+v", ErrConfig, sh)
	}
	if !s.Valid() {
		return nil, fmt.Errorf("%w: scheme %+v", ErrConfig, s)
	}
	h := &Histo{Shape: sh}
	rng := rand.New(rand.NewPCG(seed, 0x415))
	h.want = make([]uint32, sh.Bins)
	for range sh.Elements {
		// A skewed distribution, as image histograms are.
		v := uint32(rng.IntN(sh.Bins) * rng.IntN(sh.Bins) / sh.Bins)
		h.in = append(h.in, v)
		h.want[v]++
	}
	h.rs = rsState{scheme: s, prefix: "histo", undoWords: sh.Bins*sh.Grid.Blocks + sh.Bins}
	sh1 := sh
	h.rs.kernels = []rsKernel{
		{idempotent: true, name: "intermediates", grid: sh.Grid, shared: 4 * sh.Bins, body: func(t *scope.Thread, p *Persister) { h.intermediates(t, p, sh1) }},
		{idempotent: true, name: "final", grid: scope.Grid{Blocks: blocksFor(sh.Bins, min(sh.Bins, 256)), Threads: min(sh.Bins, 256)}, body: func(t *scope.Thread, p *Persister) { h.final(t, p, sh1) }},
	}
	return h, nil
}

// Name returns "histo/<scheme>".
func (h *Histo) Name() string { return "histo/" + h.rs.scheme.String() }

// Scheme returns the persistency scheme the kernels follow.
func (h *Histo) Scheme() persistency.Scheme { return h.rs.scheme }

func (h *Histo) regions(m *pm.Machine) (in, partial, final pm.Addr, err error) {
	b, err := openRegions(m, "histo.in", "histo.partial", "histo.final")
	if err != nil {
		return 0, 0, 0, err
	}
	return b[0], b[1], b[2], nil
}

func (h *Histo) intermediates(t *scope.Thread, p *Persister, sh HistoShape) {
	in, partial := h.base[0], h.base[1]
	sm := t.Shared()
	for b := t.TID(); b < sh.Bins; b += t.BlockDim() {
		t.Store32(sm.Add(uint64(4*b)), 0)
	}
	t.SyncThreads()
	stride := t.GridDim() * t.BlockDim()
	for i := t.ID(); i < sh.Elements; i += stride {
		v := t.Load32(in.Add(uint64(4 * i)))
		t.AtomicAdd32(sm.Add(uint64(4*v)), 1, pm.Block)
	}
	t.SyncThreads()
	row := partial.Add(uint64(4 * sh.Bins * t.Block()))
	for b := t.TID(); b < sh.Bins; b += t.BlockDim() {
		p.Store32(row.Add(uint64(4*b)), t.Load32(sm.Add(uint64(4*b))))
	}
}

func (h *Histo) final(t *scope.Thread, p *Persister, sh HistoShape) {
	partial, final := h.base[1], h.base[2]
	b := t.ID()
	if b >= sh.Bins {
		return
	}
	var sum uint32
	for r := range sh.Grid.Blocks {
		sum += t.Load32(partial.Add(uint64(4 * (r*sh.Bins + b))))
	}
	p.Store32(final.Add(uint64(4*b)), sum)
}

// Setup creates histo.in (the input), histo.partial (a row of counts per
// block), histo.final and the markers.
func (h *Histo) Setup(m *pm.Machine) error {
	sh := h.Shape
	in, err := createFilled(m, "histo.in", 4*sh.Elements, 0)
	if err != nil {
		return err
	}
	b := make([]byte, 4*sh.Elements)
	for i, v := range h.in {
		pm.PutLE(b[4*i:4*i+4], uint64(v))
	}
	if err := m.CopyIn(in, b); err != nil {
		return err
	}
	if _, err := createFilled(m, "histo.partial", 4*sh.Bins*sh.Grid.Blocks, 0); err != nil {
		return err
	}
	if _, err := createFilled(m, "histo.final", 4*sh.Bins, 0); err != nil {
		return err
	}
	return h.rs.setup(m)
}

func (h *Histo) bind(m *pm.Machine) error {
	in, partial, final, err := h.regions(m)
	if err != nil {
		return err
	}
	h.base = [3]pm.Addr{in, partial, final}
	sh := h.Shape
	if err := h.rs.writable(rsRange{partial, sh.Bins * sh.Grid.Blocks}, rsRange{final, sh.Bins}); err != nil {
		return err
	}
	return h.rs.open(m)
}

// Run runs both kernels.
func (h *Histo) Run(m *pm.Machine) error {
	if err := h.bind(m); err != nil {
		return err
	}
	return h.rs.run(m)
}

// Recover re-runs what the durable markers do not cover.
func (h *Histo) Recover(m *pm.Machine) error { return h.Run(m) }

// Check compares histo.final with the histogram computed in Go.
func (h *Histo) Check(m *pm.Machine) error {
	if err := h.bind(m); err != nil {
		return err
	}
	got, err := readU32s(m, h.base[2], h.Shape.Bins)
	if err != nil {
		return err
	}
	return compareU32("histo.final", got, h.want)
}
