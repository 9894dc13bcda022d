package bench

import (
	"fmt"
	"strconv"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The comparisons against bench/h100/measured9.csv (gpmbench9.cu): one
// SM's loads from device memory by the shape of a warp's load, which
// tells the lines, sectors and instructions an SM keeps in flight apart.

// loadShape is one shape of gpmbench9.cu's warp load: each lane reads
// word bytes at lane*stride of the instruction's span.
type loadShape struct {
	name         string
	word, stride uint64
}

// span is the bytes one warp instruction of the shape spans.
func (s loadShape) span() uint64 { return 32 * s.stride }

var loadShapes = []loadShape{
	{"v16", 16, 16},   // 512 bytes: 4 lines, 16 sectors
	{"w4", 4, 4},      // 128 bytes: 1 line, 4 sectors
	{"sector", 4, 32}, // 8 lines, each lane its own sector
	{"line", 4, 128},  // 32 lines, each lane its own line
}

// shapeSteps runs gpmbench9.cu's lshape kernel on one SM: warps warps,
// each thread issuing u independent loads of shape s a step for steps
// steps (warp w's step k, load j spans the part ((k*u+j)*warps+w) of
// device memory), and returns the cycles a step takes: the block's window
// over steps. The GPU's code keeps at most vecsInFlight 16-byte loads in
// flight a thread, and every 4-byte load of a step.
func (h *hv) shapeSteps(s loadShape, warps, u, steps int) (float64, error) {
	W := uint64(warps)
	trace, wins := phaseWindows(0)
	_, err := h100Traced(h.o, scope.Grid{Blocks: 1, Threads: 32 * warps}, func(m *pm.Machine) (scope.Kernel, error) {
		base, err := memBase(m, "shape", uint64(steps*u)*W*s.span(), pm.DeviceMem)
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			group := u
			if s.word == 16 {
				group = vecsInFlight
			}
			addrs := make([]pm.Addr, u)
			d128, d32 := make([][2]uint64, u), make([]uint32, u)
			w, l := uint64(t.TID()/32), uint64(t.TID()%32)
			t.SyncThreads()
			for k := range steps {
				for j := range addrs {
					addrs[j] = base.Add((uint64(k*u+j)*W+w)*s.span() + l*s.stride)
				}
				for i := 0; i < u; i += group {
					j := min(i+group, u)
					if s.word == 16 {
						t.Gather128(d128[i:j], addrs[i:j]...)
					} else {
						t.Gather32(d32[i:j], addrs[i:j]...)
					}
					t.Work(1) // the fold that uses them
				}
			}
			t.SyncThreads()
		}, nil
	}, trace)
	return float64(longest(wins)) / float64(steps), err
}

// loadShapes compares one SM's cycles a step by load shape, warps and
// loads in flight.
func (h *hv) loadShapes() error {
	type c struct {
		s    loadShape
		w, u int
	}
	var cs []c
	for _, s := range loadShapes {
		for _, w := range []int{1, 8, 32} {
			for _, u := range []int{1, 2, 4, 8, 16} {
				if s.name == "line" && u > 4 {
					continue
				}
				cs = append(cs, c{s, w, u})
			}
		}
	}
	steps := 16
	if h.o.Quick {
		steps = 4
		cs = []c{{loadShapes[0], 1, 8}, {loadShapes[1], 8, 16}, {loadShapes[2], 32, 16}, {loadShapes[3], 32, 4}}
	}
	for _, c := range cs {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		got, err := h.shapeSteps(c.s, c.w, c.u, steps)
		if err != nil {
			return err
		}
		variant := fmt.Sprintf("%s/u%d", c.s.name, c.u)
		mv, err := h.get(h100Point{"9/lshape", variant, strconv.Itoa(c.w), "cycles_per_step"})
		if err != nil {
			return err
		}
		h.add(fmt.Sprintf("lshape %s w%d", variant, c.w), "cycles_per_step", mv, got)
	}
	return nil
}
