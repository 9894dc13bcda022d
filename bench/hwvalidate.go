package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"fmt"
	"math"
	"strconv"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The H100 measurements (bench/h100/README.md: what each column means,
// the machines, the dates, the CUDA programs that took them). They are
// facts the model is checked against, never inputs to it, except what the
// h100 preset takes as parameters (three fence costs, the load latencies,
// that host memory is not cached, that a fence waits for every earlier
// write, one SM's rate of writes to host memory, the reads an SM keeps in
// flight) and the conc kernel's loop, which its model kernel charges as
// Work.
var (
	//go:embed h100/measured.csv
	h100Measured []byte
	//go:embed h100/measured2.csv
	h100Measured2 []byte
	//go:embed h100/measured3.csv
	h100Measured3 []byte
	//go:embed h100/measured5-h100.csv
	h100Measured5 []byte
	//go:embed h100/measured7.csv
	h100Measured7 []byte
	//go:embed h100/measured9.csv
	h100Measured9 []byte
	//go:embed h100/measured10.csv
	h100Measured10 []byte
	//go:embed h100/measured12.csv
	h100Measured12 []byte
)

func init() {
	Register(Experiment{
		Name: "hw-validate",
		Description: "hwmodel's h100 preset under GPM against measurements of an NVIDIA H100 with pinned host memory over PCIe Gen5 (GPM-eADR): " +
			"fence costs by scope, a system fence after pending lines, zero-copy write bandwidth, per-SM write parallelism, warps storing and fencing at once, GPM Fig. 11(b)'s logging (HCL, conventional) against threads and the conventional log taken apart, load latencies by level, L2 atomics, a fence beside other SMs' streams, and beside streams offering a fraction of the link's bandwidth, streams of loads from device memory, the L2 and host memory, one SM's loads by the lines and sectors a warp's load touches, a shared-memory chase, host reads beside host writes, streams rewriting a small region of host memory; measured, modelled and model/measured",
		Paper:   "GPM",
		Presets: []string{"h100"},
		Figure:  "real silicon (bench/h100)",
		Run:     runHWValidate,
		Summary: hwValidateSummary,
	})
}

// hwAgree is how far hw-validate's model may sit from the measurement
// (model/measured between 1/hwAgree and hwAgree): the memory-system
// issue's goal for every point.
const hwAgree = 1.5

// hwValidateSummary counts the model/measured ratios within hwAgree of 1
// and names the furthest below and above it.
func hwValidateSummary(rows []Row) string {
	n, in := 0, 0
	var lo, hi *Row
	for i := range rows {
		r := &rows[i]
		if r.Config != "model/measured" {
			continue
		}
		n++
		if r.Value >= 1/hwAgree && r.Value <= hwAgree {
			in++
		}
		if lo == nil || r.Value < lo.Value {
			lo = r
		}
		if hi == nil || r.Value > hi.Value {
			hi = r
		}
	}
	if n == 0 {
		return "no points"
	}
	return fmt.Sprintf("%d of %d points within %.1fx of the measurement; furthest below: %s %s %.3g; above: %s %s %.3g",
		in, n, hwAgree, lo.Workload, lo.Metric, lo.Value, hi.Workload, hi.Metric, hi.Value)
}

// h100Point is one measured value: bench, variant, param and metric as in
// the CSV files.
type h100Point struct{ bench, variant, param, metric string }

// h100Table reads the measurement files into a map. measured3.csv's
// benches are named "3/" + its bench (it measures some of the first file's
// benches again, on another machine and day), measured5-h100.csv's "5/" +
// its bench (its depth is measured3's on dense streams), measured7.csv's
// "7/" + its bench, measured9.csv's "9/" + its bench, measured10.csv's
// "10/" + its bench, measured12.csv's "12/" + its bench.
func h100Table() (map[h100Point]float64, error) {
	out := map[h100Point]float64{}
	for i, data := range [][]byte{h100Measured, h100Measured2, h100Measured3, h100Measured5, h100Measured7, h100Measured9, h100Measured10, h100Measured12} {
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
			bench := r[0]
			switch i {
			case 2:
				bench = "3/" + bench
			case 3:
				bench = "5/" + bench
			case 4:
				bench = "7/" + bench
			case 5:
				bench = "9/" + bench
			case 6:
				bench = "10/" + bench
			case 7:
				bench = "12/" + bench
			}
			out[h100Point{bench, r[1], r[2], r[3]}] = v
		}
	}
	return out, nil
}

// h100Run launches kernel k of grid g on a fresh h100 machine under GPM
// (with the run's overrides) over size bytes of target memory, and returns
// the launch's statistics.
func h100Run(o Options, g scope.Grid, size uint64, target pm.Kind, k func(base pm.Addr) scope.Kernel) (h100Result, error) {
	return h100Launch(o, g, func(m *pm.Machine) (scope.Kernel, error) {
		base, err := memBase(m, "p", size, target)
		if err != nil {
			return nil, err
		}
		return k(base), nil
	})
}

// h100Result is one modelled launch: its statistics and the machine's
// launch latency.
type h100Result struct {
	st     hwmodel.Stats
	launch uint64
}

// event is the launch's cycles as CUDA events around it measure them: from
// the launch call until its last write is taken.
func (r h100Result) event() uint64 { return r.st.Cycles }

// verbs is the launch's cycles from its first instruction to its end
// (the launch latency left out).
func (r h100Result) verbs() uint64 { return r.st.Cycles - r.launch }

// clock is what clock64 read at the kernel's first and last instruction
// measures: from the warps' start to the last warp's retire, without the
// drain after it.
func (r h100Result) clock() uint64 { return r.st.Retired - r.launch }

// h100Launch launches the kernel mk builds on a fresh h100 machine under
// GPM (with the run's overrides) and returns the result.
func h100Launch(o Options, g scope.Grid, mk func(m *pm.Machine) (scope.Kernel, error)) (h100Result, error) {
	return h100Traced(o, g, mk, nil)
}

// hv is one hw-validate run: its options, the measurements, the
// machine's clock and the rows so far.
type hv struct {
	ctx  context.Context
	o    Options
	meas map[h100Point]float64
	clk  float64 // the h100 machine's clock in MHz, with the run's -set
	rows []Row
}

// add appends the measured, modelled and model/measured rows of one point.
func (h *hv) add(workload, metric string, measured, model float64) {
	h.rows = append(h.rows,
		Row{"hw-validate", workload, "h100 measured", metric, measured},
		Row{"hw-validate", workload, "h100 model", metric, model},
		Row{"hw-validate", workload, "model/measured", metric, model / measured})
}

// get returns one measured value.
func (h *hv) get(p h100Point) (float64, error) {
	v, ok := h.meas[p]
	if !ok {
		return 0, fmt.Errorf("bench: h100 measurements have no %v", p)
	}
	return v, nil
}

// us converts cycles of the h100 machine's clock to microseconds.
func (h *hv) us(cycles uint64) float64 { return float64(cycles) / h.clk }

func runHWValidate(ctx context.Context, o Options) ([]Row, error) {
	meas, err := h100Table()
	if err != nil {
		return nil, err
	}
	cfg, err := o.config("h100", nil)
	if err != nil {
		return nil, err
	}
	h := &hv{ctx: ctx, o: o, meas: meas, clk: cfg.GPU.ClockMHz}
	for _, part := range []func() error{h.lat, h.pending, h.bandwidth, h.conc, h.log, h.loads, h.atoms, h.bystander, h.depth, h.offered, h.convParts, h.readPath, h.loadShapes, h.probes, h.mixed, h.rewrite} {
		if err := part(); err != nil {
			return h.rows, err
		}
	}
	return h.rows, nil
}

// lat compares fence costs by scope: one warp, a store then a fence, per
// iteration, less the iteration without a fence (the loop's own
// instructions are not modelled, so only the fence's cost is compared).
// The fences alone (system-nostore) are the preset's parameters.
func (h *hv) lat() error {
	iters := 256
	if h.o.Quick {
		iters = 32
	}
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
		r, err := h100Run(h.o, scope.Grid{Blocks: 1, Threads: 32}, 256*32*32*4, pm.PMem, k)
		return r.clock(), err
	}
	for _, lanes := range []int{1, 32, 33} {
		variant := fmt.Sprintf("host/lanes%d", lanes)
		none, err := lat(lanes, "none")
		if err != nil {
			return err
		}
		mNone, err := h.get(h100Point{"lat", variant, "none", "cycles_per_iter"})
		if err != nil {
			return err
		}
		for _, fence := range []string{"block", "gpu", "system", "system-nostore"} {
			if err := h.ctx.Err(); err != nil {
				return err
			}
			c, err := lat(lanes, fence)
			if err != nil {
				return err
			}
			mv, err := h.get(h100Point{"lat", variant, fence, "cycles_per_iter"})
			if err != nil {
				return err
			}
			model := (float64(c) - float64(none)) / float64(iters)
			if fence == "system-nostore" {
				model = float64(c) / float64(iters)
				mNone = 0
			}
			if mv-mNone <= 0 {
				continue // the fence costs less than the measurement resolves (lanes33 block: -1 cycle)
			}
			h.add("lat "+variant+" "+fence, "fence_cycles", mv-mNone, model)
		}
	}
	return nil
}

// pending compares a system fence after N pending lines of one warp per SM
// (1 SM or every SM): the cycles of one repetition in steady state (the
// difference between 2R and R repetitions, R large enough that the
// repetitions without a fence fill the SM's outstanding writes
// (mem.sm_writes), so that neither the first repetitions nor the writes
// still outstanding at the end count), and the fence's part of them (with
// the fence less without). On one SM the
// repetition without a fence is the loop's own instructions, which the
// model does not charge (measured: 21-24 cycles per store, the same to
// device memory), so only the fence's part is compared there.
func (h *hv) pending() error {
	slots := 256 // mem.sm_writes of the h100 preset
	if h.o.Quick {
		slots = 8
	}
	run := func(sms, lines, reps int, fence bool) (uint64, error) {
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
		r, err := h100Run(h.o, scope.Grid{Blocks: sms, Threads: 32}, uint64(sms)*4096*128, pm.PMem, k)
		return r.clock(), err
	}
	perRep := func(sms, lines int, fence bool) (float64, error) {
		reps := max(2, 2*slots/lines)
		one, err := run(sms, lines, reps, fence)
		if err != nil {
			return 0, err
		}
		two, err := run(sms, lines, 2*reps, fence)
		return (float64(two) - float64(one)) / float64(reps), err
	}
	for _, sms := range []int{1, 132} {
		for _, lines := range []int{1, 4, 16, 64} {
			if err := h.ctx.Err(); err != nil {
				return err
			}
			if h.o.Quick && lines > 4 {
				continue
			}
			variant := fmt.Sprintf("host/sms%d", sms)
			param := strconv.Itoa(lines)
			withF, err := perRep(sms, lines, true)
			if err != nil {
				return err
			}
			without, err := perRep(sms, lines, false)
			if err != nil {
				return err
			}
			ms, err := h.get(h100Point{"pending", variant + "/system", param, "cycles_per_rep"})
			if err != nil {
				return err
			}
			mn, err := h.get(h100Point{"pending", variant + "/none", param, "cycles_per_rep"})
			if err != nil {
				return err
			}
			w := fmt.Sprintf("pending %s %d lines", variant, lines)
			if sms > 1 {
				h.add(w, "cycles_per_rep", ms, withF)
			}
			h.add(w, "fence_cycles", ms-mn, withF-without)
		}
	}
	return nil
}

// bandwidth compares write bandwidth: 16 bytes per thread per step, to
// host memory (PM) and device memory, from every SM (bw) or one (stream
// sms1), W warps; device memory after dirtyL2.
func (h *hv) bandwidth() error {
	bwBytes, streamSteps := uint64(64<<20), 64
	if h.o.Quick {
		bwBytes, streamSteps = 4<<20, 8
	}
	gbps := func(bytes, cycles uint64) float64 { return float64(bytes) / h.us(cycles) / 1e3 }
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
		r, err := h100Launch(h.o, scope.Grid{Blocks: blocks, Threads: threads}, func(m *pm.Machine) (scope.Kernel, error) {
			base, err := memBase(m, "p", size, target)
			if err != nil {
				return nil, err
			}
			if target == pm.DeviceMem {
				err = dirtyL2(m) // the GPU's stream runs after others (dirtyL2)
			}
			return k(base), err
		})
		return gbps(size, r.verbs()), err
	}
	for _, target := range []struct {
		name string
		kind pm.Kind
	}{{"host", pm.PMem}, {"device", pm.DeviceMem}} {
		mv, err := h.get(h100Point{"bw", target.name, "1GiB", "write_gbps"})
		if err != nil {
			return err
		}
		warps := 32
		steps := int(bwBytes / uint64(132*32*warps*16))
		v, err := stream(target.kind, 132, warps, steps)
		if err != nil {
			return err
		}
		h.add("bw "+target.name, "write_gbps", mv, v)
		for _, warps := range []int{1, 4, 32} {
			if err := h.ctx.Err(); err != nil {
				return err
			}
			mv, err := h.get(h100Point{"stream", target.name + "/sms1", strconv.Itoa(warps), "gbps"})
			if err != nil {
				return err
			}
			v, err := stream(target.kind, 1, warps, streamSteps*32/warps)
			if err != nil {
				return err
			}
			h.add(fmt.Sprintf("stream %s sms1 %d warps", target.name, warps), "gbps", mv, v)
		}
	}
	return nil
}

// conc compares W warps at once, each lane storing one 4-byte word (a warp
// fills one line) then fencing, 64 times: microseconds per iteration,
// launch to end as CUDA events time it.
func (h *hv) conc() error {
	const iters = 64
	warpsList := []int{1, 16, 132, 528, 2112}
	if h.o.Quick {
		warpsList = []int{1, 132}
	}
	loop, err := h.concLoop()
	if err != nil {
		return err
	}
	for _, fence := range []string{"none", "gpu", "system"} {
		for _, warps := range warpsList {
			if err := h.ctx.Err(); err != nil {
				return err
			}
			tpb := min(warps*32, 256)
			k := func(base pm.Addr) scope.Kernel {
				return func(t *scope.Thread) {
					w := uint64(t.ID() / 32)
					for i := range iters {
						t.Work(loop) // the loop's own instructions, measured (concLoop)
						t.Store32(base.Add((w*iters+uint64(i))*128+4*uint64(t.Lane())), uint32(i))
						switch fence {
						case "gpu":
							t.Fence(pm.Device)
						case "system":
							t.EpochBarrier()
						}
					}
				}
			}
			r, err := h100Run(h.o, scope.Grid{Blocks: warps * 32 / tpb, Threads: tpb}, uint64(warps)*iters*128, pm.PMem, k)
			if err != nil {
				return err
			}
			mv, err := h.get(h100Point{"conc", "host/" + fence, strconv.Itoa(warps), "us_per_iter"})
			if err != nil {
				return err
			}
			h.add(fmt.Sprintf("conc host %s %d warps", fence, warps), "us_per_iter", mv, h.us(r.event())/iters)
		}
	}
	return nil
}

// log compares GPM Fig. 11(b)'s logging: n threads each log one 20-byte
// entry and make it durable with a system fence, HCL (lane-striped chunks,
// no lock) against conventional logging (32 partitions, a lock per
// partition in device memory, the tail in the log's memory: entry, fence,
// tail, fence, unlock). Microseconds per launch, launch to end.
func (h *hv) log() error {
	ns := []int{32, 128, 512, 2048}
	if h.o.Quick {
		ns = []int{32, 256}
	}
	const parts = 32
	for _, n := range ns {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		g := logGrid(n)
		hcl, err := h100Launch(h.o, g, func(m *pm.Machine) (scope.Kernel, error) {
			r, err := m.CreateRegion("log", uint64(n)*5*4)
			if err != nil {
				return nil, err
			}
			return func(t *scope.Thread) {
				tid := t.ID()
				if tid >= n {
					return
				}
				w, lane := uint64(tid/32), uint64(tid%32)
				for j := range uint64(5) {
					t.Store32(r.Base.Add(((w*5+j)*32+lane)*4), uint32(tid)+uint32(j))
				}
				t.EpochBarrier()
			}, nil
		})
		if err != nil {
			return err
		}
		conv, err := h100Launch(h.o, g, convKernel(n, true, true, true))
		if err != nil {
			return err
		}
		param := strconv.Itoa(n)
		mh, err := h.get(h100Point{"log", "host/hcl", param, "us"})
		if err != nil {
			return err
		}
		mc, err := h.get(h100Point{"log", "host/conv", param, "us"})
		if err != nil {
			return err
		}
		w := fmt.Sprintf("log %d threads", n)
		h.add(w+" hcl", "us", mh, h.us(hcl.event()))
		h.add(w+" conv", "us", mc, h.us(conv.event()))
		h.add(w, "hcl_speedup", mc/mh, float64(conv.event())/float64(hcl.event()))
	}
	return nil
}

// logGrid is the logging kernels' launch shape for n threads: blocks of up
// to 256.
func logGrid(n int) scope.Grid { return scope.Grid{Blocks: (n + 255) / 256, Threads: min(n, 256)} }

// convKernel builds gpmbench.cu's conventional logging for n threads: 32
// partitions, a lock per partition in device memory, a 20-byte entry, a
// system fence, the tail, a fence, the unlock. logHost and tailHost put the
// log and the tail in PM (the GPU's host memory) or device memory; fences
// false leaves the fences out (gpmbench3.cu's parts).
func convKernel(n int, logHost, tailHost, fences bool) func(m *pm.Machine) (scope.Kernel, error) {
	const parts = 32
	capacity := uint64(n/parts + 1)
	kind := func(host bool) pm.Kind {
		if host {
			return pm.PMem
		}
		return pm.DeviceMem
	}
	return func(m *pm.Machine) (scope.Kernel, error) {
		log, err := memBase(m, "log", parts*capacity*8*4, kind(logHost))
		if err != nil {
			return nil, err
		}
		tail, err := memBase(m, "tail", parts*4, kind(tailHost))
		if err != nil {
			return nil, err
		}
		locks, err := m.Alloc(pm.DeviceMem, parts*4)
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			tid := t.ID()
			if tid >= n {
				return
			}
			p := uint64(tid % parts)
			lock := locks.Add(4 * p)
			for t.AtomicCAS32(lock, 0, 1, pm.Device) != 0 {
			}
			var tl uint64
			if tailHost {
				tl = uint64(t.Load32(tail.Add(4 * p))) // host memory: never cached
			} else {
				// The GPU reads the tail with a volatile load, from the
				// L2 (its L1 may hold a stale copy); the model's loads go
				// through the L1 and would hit the line this SM read at
				// its last section. A CAS that cannot succeed reads the
				// word at the L2 and writes nothing, as the volatile load
				// does (L2 atomics 288 cycles, L2 loads 290, measured).
				tl = uint64(t.AtomicCAS32(tail.Add(4*p), math.MaxUint32, 0, pm.Device))
			}
			for j := range uint64(5) {
				t.Store32(log.Add(((p*capacity+tl)*8+j)*4), uint32(tid)+uint32(j))
			}
			if fences {
				t.EpochBarrier()
			}
			t.Store32(tail.Add(4*p), uint32(tl+1))
			if fences {
				t.EpochBarrier()
			}
			t.AtomicExch32(lock, 0, pm.Device)
		}, nil
	}
}
