package bench

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The comparisons against bench/h100/measured10.csv (gpmbench10.cu): S
// SMs of 8 warps each rewriting a region of host memory of their own with
// 16-byte stores. The H100 stores faster than its link takes bytes when the
// regions are small (rewrites of a line merge before the link); the model
// sends every store.

// rewriteRate runs S blocks of 8 warps, each thread storing iters 16-byte
// values round its block's region of region bytes of PM (host memory on
// h100), and returns the bytes stored per second, in GB/s, over the
// launch's cycles after its start.
func (h *hv) rewriteRate(S int, region uint64, iters int) (float64, error) {
	const threads = 256
	elems := region / 16
	res, err := h100Traced(h.o, scope.Grid{Blocks: S, Threads: threads}, func(m *pm.Machine) (scope.Kernel, error) {
		base, err := memBase(m, "rewrite", uint64(S)*region, pm.PMem)
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			var v [16]byte
			own := uint64(t.Block()) * elems
			i := uint64(t.TID()) % elems
			for range iters {
				t.StoreBytes(base.Add((own+i)*16), v[:])
				if i += threads; i >= elems {
					i -= elems
				}
			}
		}, nil
	}, nil)
	if err != nil {
		return 0, err
	}
	bytes := float64(uint64(S) * threads * uint64(iters) * 16)
	cycles := float64(res.verbs())
	return bytes / cycles * h.clk / 1e3, nil
}

// rewrite compares the streams' rate by SMs and region size.
func (h *hv) rewrite() error {
	type c struct {
		S      int
		region uint64
	}
	cs := []c{{8, 4 << 10}, {8, 32 << 10}, {32, 4 << 10}, {32, 32 << 10}, {131, 4 << 10}, {131, 32 << 10}}
	iters := 256 // stores a thread: 1 MB an SM
	if h.o.Quick {
		cs, iters = []c{{8, 4 << 10}, {8, 32 << 10}}, 64
	}
	for _, c := range cs {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		got, err := h.rewriteRate(c.S, c.region, iters)
		if err != nil {
			return err
		}
		variant, param := fmt.Sprintf("own/S%d", c.S), fmt.Sprintf("%dK", c.region>>10)
		mv, err := h.get(h100Point{"10/depth", variant, param, "stream_gbps"})
		if err != nil {
			return err
		}
		h.add(fmt.Sprintf("rewrite %s/%s", variant, param), "stream_gbps", mv, got)
	}
	return nil
}
