package workloads

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// HistoShape sizes the histogram: an image of Width × Height input values
// in [0, Bins); Grid counts them (one shared-memory histogram per block)
// and reduces them to their least and greatest value.
type HistoShape struct {
	Width, Height, Bins int
	Grid                scope.Grid
}

// histoUnroll is the rows of the image one thread of histo2 maps (Parboil's
// UNROLL, in the re-study's histo/src/nvm_sk/util.h).
const histoUnroll = 16

func histoShape(s Size) HistoShape {
	return bySize(s,
		HistoShape{Width: 6, Height: 4, Bins: 4, Grid: scope.Grid{Blocks: 2, Threads: 4}},
		HistoShape{Width: 256, Height: 128, Bins: 256, Grid: scope.Grid{Blocks: 16, Threads: 256}},
		// Parboil's default histo input, which the re-study ran
		// (datasets/histo/default/input/img.bin): a 996 × 1040 image;
		// histo_prescan runs 64 blocks of 512 threads (PRESCAN_BLOCKS_X,
		// PRESCAN_THREADS). Its 256 × 4096 histogram is kept at 4096 bins
		// here: the counting kernel is not one of the re-study's.
		HistoShape{Width: 996, Height: 1040, Bins: 4096, Grid: scope.Grid{Blocks: 64, Threads: 512}})
}

// NewHisto returns the re-study's short-running histogram kernels
// (Parboil's histo) written afresh, four kernels over the image in PM
// (histo.in, copied in by the host), each idempotent:
//
//   - histo1 (histo_prescan_kernel): each block reduces a sample of the
//     image to its least and greatest value in shared memory (a tree
//     reduction) and stores them to its row of histo.minmax; as in
//     Parboil, the sample is the first eighth of the block's contiguous
//     share (elements / blocks), which the block's threads read a block
//     width apart (Parboil reads it twice, for a mean and a deviation;
//     the second pass, which hits the L1, is not repeated here);
//   - histo2 (histo_intermediates_kernel): a map, in Parboil's shape: a
//     block per 16 rows (histoUnroll) and a thread per two columns; each
//     thread maps its two pixels of each of its rows to the word that
//     places the value in the sub-histograms (Parboil's calculateBin:
//     sub-histogram, high and low index, byte offset) and stores the words
//     to histo.mapping;
//   - histo3 (histo_main_kernel, not one of the re-study's kernels): each
//     block counts its grid-stride share of the image in a shared-memory
//     histogram and stores it to its row of histo.partial;
//   - histo4 (histo_final_kernel): a thread per bin sums the rows into
//     histo.final.
//
// Check compares every output with references computed in Go.
func NewHisto(sh HistoShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	g := sh.Grid
	if sh.Width <= 0 || sh.Height <= 0 || sh.Bins <= 0 || g.Blocks <= 0 || g.Threads <= 0 {
		return nil, fmt.Errorf("%w: histo %+v", ErrConfig, sh)
	}
	elements := sh.Width * sh.Height
	a, rng, err := newRSApp("histo", s, seed, 0x415)
	if err != nil {
		return nil, err
	}
	in := make([]uint32, elements)
	mapping := make([]uint32, elements)
	final := make([]uint32, sh.Bins)
	partial := make([]uint32, sh.Bins*g.Blocks)
	minmax := make([]uint32, 2*g.Blocks)
	for b := range g.Blocks {
		minmax[2*b] = ^uint32(0)
	}
	stride := g.Blocks * g.Threads
	share := elements / g.Blocks // a block's contiguous share in histo1
	for i := range in {
		// A skewed distribution, as image histograms are.
		v := uint32(rng.IntN(sh.Bins) * rng.IntN(sh.Bins) / sh.Bins)
		in[i] = v
		mapping[i] = histoBin(v)
		final[v]++
		b := i % stride / g.Threads // the block whose grid-stride share i is in
		if p := i / share; p < g.Blocks && i%share < share/8 {
			// In block p's prescan sample.
			minmax[2*p], minmax[2*p+1] = min(minmax[2*p], v), max(minmax[2*p+1], v)
		}
		partial[b*sh.Bins+int(v)]++
	}
	a.arrays = []rsArray{{name: "in", init: in}, {name: "minmax", want: minmax}, {name: "mapping", want: mapping}, {name: "partial", want: partial}, {name: "final", want: final}}
	// histo2's grid: a block per histoUnroll rows, a thread per two columns.
	mapGrid := scope.Grid{Blocks: (sh.Height + histoUnroll - 1) / histoUnroll, Threads: (sh.Width + 1) / 2}
	// The reduction's step: the least power of two not below half the block.
	half := 1
	for 2*half < g.Threads {
		half *= 2
	}
	a.rs.kernels = []rsKernel{
		{idempotent: true, name: "prescan", label: "histo1", grid: g, shared: 8 * g.Threads, body: func(t *scope.Thread, p *Persister) {
			in, sm, T, i := a.addr("in"), t.Shared(), g.Threads, t.TID()
			lo, hi := ^uint32(0), uint32(0)
			first := t.Block() * share
			for k := first + i; k < first+share/8; k += T {
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
		{idempotent: true, name: "intermediates", label: "histo2", grid: mapGrid, body: func(t *scope.Thread, p *Persister) {
			in, out := a.addr("in"), a.addr("mapping")
			for r := t.Block() * histoUnroll; r < min((t.Block()+1)*histoUnroll, sh.Height); r++ {
				for c := 2 * t.TID(); c < min(2*t.TID()+2, sh.Width); c++ {
					k := r*sh.Width + c
					p.Store32(word32(out, k), histoBin(t.Load32(word32(in, k))))
				}
				// Per row: the two pixels' calculateBin (5 shifts, 4
				// ands, a multiply and 3 shift-ors each, 13), the row's
				// address steps (2) and the loop's increment and branch
				// (2).
				work(t, 2*13+2+2)
			}
		}},
		{idempotent: true, name: "main", label: "histo3", grid: g, shared: 4 * sh.Bins, body: func(t *scope.Thread, p *Persister) {
			in, sm := a.addr("in"), t.Shared()
			for b := t.TID(); b < sh.Bins; b += t.BlockDim() {
				t.Store32(word32(sm, b), 0)
			}
			t.SyncThreads()
			for k := t.ID(); k < elements; k += stride {
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

// histoBin is Parboil's calculateBin: the word that places bin v in the
// sub-histograms: the sub-histogram (v / 8192), the high index
// ((v >> 10) % 8), the low index ((v >> 2) % 256) and the bit offset of
// its byte ((v % 4) × 8), one byte each.
func histoBin(v uint32) uint32 {
	return v/(8*1024) | (v>>10)%8<<8 | (v>>2)%256<<16 | v%4*8<<24
}
