package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"fmt"
	"strconv"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The H100 measurements (bench/h100/README.md: what each column means,
// the machine, the date, the CUDA programs that took them). They are facts
// the model is checked against, never inputs to it, except the three fence
// costs the h100 preset takes as parameters.
var (
	//go:embed h100/measured.csv
	h100Measured []byte
	//go:embed h100/measured2.csv
	h100Measured2 []byte
)

func init() {
	Register(Experiment{
		Name: "hw-validate",
		Description: "hwmodel's h100 preset under GPM against measurements of an NVIDIA H100 with pinned host memory over PCIe Gen5 (GPM-eADR): " +
			"fence costs by scope, a system fence after pending lines, zero-copy write bandwidth, per-SM write parallelism; measured, modelled and model/measured",
		Paper:   "GPM",
		Figure:  "real silicon (bench/h100)",
		Presets: []string{"h100"},
		Run:     runHWValidate,
	})
}

// h100Point is one measured value: bench, variant, param and metric as in
// the CSV files.
type h100Point struct{ bench, variant, param, metric string }

// h100Table reads both measurement files into a map.
func h100Table() (map[h100Point]float64, error) {
	out := map[h100Point]float64{}
	for _, data := range [][]byte{h100Measured, h100Measured2} {
		recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil {
			return nil, fmt.Errorf("bench: h100 measurements: %w", err)
		}
		for _, r := range recs[1:] {
			if len(r) != 5 {
				return nil, fmt.Errorf("bench: h100 measurements: row %q has %d fields, want 5", r, len(r))
			}
			v, err := strconv.ParseFloat(r[4], 64)
			if err != nil {
				return nil, fmt.Errorf("bench: h100 measurements: row %q: %w", r, err)
			}
			out[h100Point{r[0], r[1], r[2], r[3]}] = v
		}
	}
	return out, nil
}

// h100Run launches kernel k of grid g on a fresh h100 machine under GPM
// (with the run's overrides) after mk has set up its memory, and returns
// the launch's cycles from its first instruction.
func h100Run(o Options, g scope.Grid, size uint64, target pm.Kind, k func(base pm.Addr) scope.Kernel) (uint64, *hwmodel.Backend, error) {
	m, be, err := o.machine("h100", hwmodel.GPM, nil)
	if err != nil {
		return 0, nil, err
	}
	var base pm.Addr
	if target == pm.PMem {
		r, err := m.CreateRegion("p", size)
		if err != nil {
			return 0, nil, err
		}
		base = r.Base
	} else if base, err = m.Alloc(pm.DeviceMem, size); err != nil {
		return 0, nil, err
	}
	res, err := scope.Launch(m, g, k(base))
	if err != nil {
		return 0, nil, err
	}
	return res.Stats.Cycles - launchLatency(be), be, nil
}

func runHWValidate(ctx context.Context, o Options) ([]Row, error) {
	meas, err := h100Table()
	if err != nil {
		return nil, err
	}
	var rows []Row
	add := func(workload, metric string, measured, model float64) {
		rows = append(rows,
			Row{"hw-validate", workload, "h100 measured", metric, measured},
			Row{"hw-validate", workload, "h100 model", metric, model},
			Row{"hw-validate", workload, "model/measured", metric, model / measured})
	}
	get := func(p h100Point) (float64, error) {
		v, ok := meas[p]
		if !ok {
			return 0, fmt.Errorf("bench: h100 measurements have no %v", p)
		}
		return v, nil
	}
	iters, reps, bwBytes, streamSteps := 256, 16, uint64(64<<20), 64
	if o.Quick {
		iters, reps, bwBytes, streamSteps = 32, 4, 4<<20, 8
	}

	// Fence costs by scope: one warp, a store then a fence, per iteration,
	// less the iteration without a fence (the loop's own instructions are
	// not modelled, so only the fence's cost is compared). The fences
	// alone (system-nostore) are the preset's parameters.
	lat := func(lanes int, fence string) (uint64, error) {
		k := func(base pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				on := lanes != 1 || t.Lane() == 0
				stride := uint64(1)
				if lanes == 33 {
					stride = 32
				}
				for i := range iters {
					if on && fence != "system-nostore" {
						t.Store32(base.Add(4*((uint64(i&255)*32+uint64(t.Lane()))*stride)), uint32(i))
					}
					switch fence {
					case "block":
						t.Fence(pm.Block)
					case "gpu":
						t.Fence(pm.Device)
					case "system", "system-nostore":
						t.EpochBarrier() // GPM's persist: __threadfence_system
					}
				}
			}
		}
		c, _, err := h100Run(o, scope.Grid{Blocks: 1, Threads: 32}, 256*32*32*4, pm.PMem, k)
		return c, err
	}
	for _, lanes := range []int{1, 32, 33} {
		variant := fmt.Sprintf("host/lanes%d", lanes)
		none, err := lat(lanes, "none")
		if err != nil {
			return rows, err
		}
		mNone, err := get(h100Point{"lat", variant, "none", "cycles_per_iter"})
		if err != nil {
			return rows, err
		}
		for _, fence := range []string{"block", "gpu", "system", "system-nostore"} {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			c, err := lat(lanes, fence)
			if err != nil {
				return rows, err
			}
			mv, err := get(h100Point{"lat", variant, fence, "cycles_per_iter"})
			if err != nil {
				return rows, err
			}
			model := (float64(c) - float64(none)) / float64(iters)
			if fence == "system-nostore" {
				model = float64(c) / float64(iters)
				mNone = 0
			}
			if mv-mNone <= 0 {
				continue // the fence costs less than the measurement resolves (lanes33 block: -1 cycle)
			}
			add("lat "+variant+" "+fence, "fence_cycles", mv-mNone, model)
		}
	}

	// A system fence after N pending lines of one warp per SM (1 SM or
	// every SM): cycles per repetition, and the fence's part of them.
	pending := func(sms, lines int, fence bool) (uint64, error) {
		k := func(base pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				q := base.Add(uint64(t.Block()) * 4096 * 128)
				for r := range reps {
					for l := range lines {
						t.Store32(q.Add(uint64((r*lines+l)&4095)*128+4*uint64(t.Lane())), uint32(r))
					}
					if fence {
						t.EpochBarrier()
					}
				}
			}
		}
		c, _, err := h100Run(o, scope.Grid{Blocks: sms, Threads: 32}, uint64(sms)*4096*128, pm.PMem, k)
		return c, err
	}
	for _, sms := range []int{1, 132} {
		for _, lines := range []int{1, 4, 16, 64} {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			variant := fmt.Sprintf("host/sms%d", sms)
			param := strconv.Itoa(lines)
			withF, err := pending(sms, lines, true)
			if err != nil {
				return rows, err
			}
			without, err := pending(sms, lines, false)
			if err != nil {
				return rows, err
			}
			ms, err := get(h100Point{"pending", variant + "/system", param, "cycles_per_rep"})
			if err != nil {
				return rows, err
			}
			mn, err := get(h100Point{"pending", variant + "/none", param, "cycles_per_rep"})
			if err != nil {
				return rows, err
			}
			w := fmt.Sprintf("pending %s %d lines", variant, lines)
			add(w, "cycles_per_rep", ms, float64(withF)/float64(reps))
			add(w, "fence_cycles", ms-mn, float64(withF-min(without, withF))/float64(reps))
		}
	}

	// Write bandwidth: 16 bytes per thread per step, to host memory (PM)
	// and device memory, every SM (bw) or one (stream sms1), W warps.
	cfg, err := o.config("h100", nil)
	if err != nil {
		return nil, err
	}
	clk := cfg.GPU.ClockMHz
	gbps := func(bytes, cycles uint64) float64 { return float64(bytes) * clk / float64(cycles) / 1e3 }
	stream := func(target pm.Kind, blocks, warps, steps int) (float64, error) {
		threads := 32 * warps
		size := uint64(blocks*threads*steps) * 16
		k := func(base pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				var v [16]byte
				q := base.Add(uint64(t.Block()*threads*steps+t.TID()) * 16)
				for s := range steps {
					t.StoreBytes(q.Add(uint64(s*threads)*16), v[:])
				}
			}
		}
		c, _, err := h100Run(o, scope.Grid{Blocks: blocks, Threads: threads}, size, target, k)
		return gbps(size, c), err
	}
	for _, target := range []struct {
		name string
		kind pm.Kind
	}{{"host", pm.PMem}, {"device", pm.DeviceMem}} {
		mv, err := get(h100Point{"bw", target.name, "1GiB", "write_gbps"})
		if err != nil {
			return rows, err
		}
		warps := 32
		steps := int(bwBytes / uint64(132*32*warps*16))
		v, err := stream(target.kind, 132, warps, steps)
		if err != nil {
			return rows, err
		}
		add("bw "+target.name, "write_gbps", mv, v)
		for _, warps := range []int{1, 4, 32} {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			mv, err := get(h100Point{"stream", target.name + "/sms1", strconv.Itoa(warps), "gbps"})
			if err != nil {
				return rows, err
			}
			v, err := stream(target.kind, 1, warps, streamSteps*32/warps)
			if err != nil {
				return rows, err
			}
			add(fmt.Sprintf("stream %s sms1 %d warps", target.name, warps), "gbps", mv, v)
		}
	}
	return rows, nil
}
