package workloads

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// HistoShape sizes the histogram: Elements input values in [0, Bins), counted by
// Grid (one shared-memory histogram per block).
type HistoShape struct {
	Elements, Bins int
	Grid           scope.Grid
}

func histoShape(s Size) HistoShape {
	return bySize(s,
		HistoShape{Elements: 24, Bins: 4, Grid: scope.Grid{Blocks: 2, Threads: 4}},
		HistoShape{Elements: 1 << 15, Bins: 256, Grid: scope.Grid{Blocks: 16, Threads: 256}},
		// Parboil's histo input is an image of about a million pixels.
		HistoShape{Elements: 1 << 20, Bins: 4096, Grid: scope.Grid{Blocks: 80, Threads: 512}})
}

// NewHisto returns the re-study's short-running histogram kernels
// (Parboil's histo) written afresh, three kernels over the input in PM
// (histo.in, copied in by the host), each idempotent:
//
//   - histo1 (histo_prescan_kernel): each block reduces a grid-stride share
//     of the input to its least and greatest value in shared memory (a
//     tree reduction) and stores them to its row of histo.minmax;
//   - histo2 (histo_intermediates_kernel): each block counts the same
//     share in a shared-memory histogram and stores it to its row of
//     histo.partial;
//   - histo4 (histo_final_kernel): a thread per bin sums the rows into
//     histo.final.
//
// Check compares all three outputs with references computed in Go.
func NewHisto(sh HistoShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	g := sh.Grid
	if sh.Elements <= 0 || sh.Bins <= 0 || g.Blocks <= 0 || g.Threads <= 0 {
		return nil, fmt.Errorf("%w: histo %+v", ErrConfig, sh)
	}
	a, rng, err := newRSApp("histo", s, seed, 0x415)
	if err != nil {
		return nil, err
	}
	in := make([]uint32, sh.Elements)
	final := make([]uint32, sh.Bins)
	partial := make([]uint32, sh.Bins*g.Blocks)
	minmax := make([]uint32, 2*g.Blocks)
	for b := range g.Blocks {
		minmax[2*b] = ^uint32(0)
	}
	stride := g.Blocks * g.Threads
	for i := range in {
		// A skewed distribution, as image histograms are.
		v := uint32(rng.IntN(sh.Bins) * rng.IntN(sh.Bins) / sh.Bins)
		in[i] = v
		final[v]++
		b := i % stride / g.Threads // the block whose grid-stride share i is in
		partial[b*sh.Bins+int(v)]++
		minmax[2*b], minmax[2*b+1] = min(minmax[2*b], v), max(minmax[2*b+1], v)
	}
	a.arrays = []rsArray{{name: "in", init: in}, {name: "minmax", want: minmax}, {name: "partial", want: partial}, {name: "final", want: final}}
	// The reduction's step: the least power of two not below half the block.
	half := 1
	for 2*half < g.Threads {
		half *= 2
	}
	a.rs.kernels = []rsKernel{
		{idempotent: true, name: "prescan", label: "histo1", grid: g, shared: 8 * g.Threads, body: func(t *scope.Thread, p *Persister) {
			in, sm, T, i := a.addr("in"), t.Shared(), g.Threads, t.TID()
			lo, hi := ^uint32(0), uint32(0)
			for k := t.ID(); k < sh.Elements; k += stride {
				v := t.Load32(word32(in, k))
				lo, hi = min(lo, v), max(hi, v)
			}
			t.Store32(word32(sm, i), lo)
			t.Store32(word32(sm, T+i), hi)
			t.SyncThreads()
			for d := half; d > 0; d /= 2 {
				if i < d && i+d < T {
					t.Store32(word32(sm, i), min(t.Load32(word32(sm, i)), t.Load32(word32(sm, i+d))))
					t.Store32(word32(sm, T+i), max(t.Load32(word32(sm, T+i)), t.Load32(word32(sm, T+i+d))))
				}
				t.SyncThreads()
			}
			if i == 0 {
				p.Store32(word32(a.addr("minmax"), 2*t.Block()), t.Load32(word32(sm, 0)))
				p.Store32(word32(a.addr("minmax"), 2*t.Block()+1), t.Load32(word32(sm, T)))
			}
		}},
		{idempotent: true, name: "intermediates", label: "histo2", grid: g, shared: 4 * sh.Bins, body: func(t *scope.Thread, p *Persister) {
			in, sm := a.addr("in"), t.Shared()
			for b := t.TID(); b < sh.Bins; b += t.BlockDim() {
				t.Store32(word32(sm, b), 0)
			}
			t.SyncThreads()
			for k := t.ID(); k < sh.Elements; k += stride {
				t.AtomicAdd32(word32(sm, int(t.Load32(word32(in, k)))), 1, pm.Block)
			}
			t.SyncThreads()
			row := word32(a.addr("partial"), sh.Bins*t.Block())
			for b := t.TID(); b < sh.Bins; b += t.BlockDim() {
				p.Store32(word32(row, b), t.Load32(word32(sm, b)))
			}
		}},
		perItem("final", "histo4", sh.Bins, min(sh.Bins, 256), func(t *scope.Thread, p *Persister, b int) {
			var sum uint32
			for r := range g.Blocks {
				sum += t.Load32(word32(a.addr("partial"), r*sh.Bins+b))
			}
			p.Store32(word32(a.addr("final"), b), sum)
		}),
	}
	return a, nil
}
