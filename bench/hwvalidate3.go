package bench

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The comparisons against bench/h100/measured3.csv (gpmbench3.cu): load
// latencies by level, L2 atomics, a fence against other SMs' streaming
// writes, and conventional logging taken apart.

// h100Traced is h100Launch with fn, unless nil, called for every
// instruction the backend times (hwmodel.Backend.SetTrace), and opts passed
// to the launch.
func h100Traced(o Options, g scope.Grid, mk func(m *pm.Machine) (scope.Kernel, error), fn func(hwmodel.Event), opts ...scope.Option) (h100Result, error) {
	m, be, err := o.machine("h100", hwmodel.GPM, nil)
	if err != nil {
		return h100Result{}, err
	}
	k, err := mk(m)
	if err != nil {
		return h100Result{}, err
	}
	if fn != nil {
		be.SetTrace(fn)
	}
	if _, err := scope.Launch(m, g, k, opts...); err != nil {
		return h100Result{}, err
	}
	return h100Result{be.LastLaunch(), launchLatency(be)}, nil
}

// memBase returns size bytes of target memory on m: a PM region named
// name, or device memory.
func memBase(m *pm.Machine, name string, size uint64, target pm.Kind) (pm.Addr, error) {
	if target == pm.PMem {
		r, err := m.CreateRegion(name, size)
		if err != nil {
			return 0, err
		}
		return r.Base, nil
	}
	return m.Alloc(pm.DeviceMem, size)
}

// dirtyL2 fills the L2 of m, an h100 machine, with dirty lines of device
// memory of its own, as the GPU's earlier repetitions of a stream to device
// memory leave it before the one its programs report (the median of three:
// a kernel's end writes nothing back, mem.l2_flush_at_end off): a launch
// that writes one whole line a thread, the L2's size in all. A stream
// after it evicts a dirty line for every line it writes.
func dirtyL2(m *pm.Machine) error {
	be, ok := m.Backend().(*hwmodel.Backend)
	if !ok {
		return fmt.Errorf("bench: dirtyL2 needs the hwmodel backend, have %T", m.Backend())
	}
	c := be.Config().L2
	const threads = 1024
	blocks := c.SizeBytes / c.LineBytes / threads
	base, err := m.Alloc(pm.DeviceMem, uint64(blocks*threads*c.LineBytes))
	if err != nil {
		return err
	}
	line := make([]byte, c.LineBytes)
	_, err = scope.Launch(m, scope.Grid{Blocks: blocks, Threads: threads}, func(t *scope.Thread) {
		t.StoreBytes(base.Add(uint64(t.ID()*c.LineBytes)), line)
	})
	return err
}

// median returns the median of v (the upper one of an even count); 0 for
// none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// loads compares one thread's dependent loads: each a line of the level
// named, timed from issue to data. The model's loads block their warp, so
// a chain of distinct lines is timed as the GPU's pointer chase is.
func (h *hv) loads() error {
	hops := 256
	if h.o.Quick {
		hops = 32
	}
	for _, c := range []struct {
		name   string
		target pm.Kind
		lines  int // lines the chase visits
		warm   bool
	}{
		{"l1", pm.DeviceMem, 64, true}, // 8 KB: in the L1 after a warm lap
		// 1 MB: the GPU's chase skips the L1 (ld.cg); the model's loads
		// go through it, and 1 MB is four times the L1
		{"l2", pm.DeviceMem, 8192, true},
		{"device", pm.DeviceMem, hops, false}, // every line read once: L2 misses
		{"host", pm.PMem, hops, false},
		{"host-l2", pm.PMem, 64, true}, // a warm lap over host memory
	} {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		lines := c.lines
		warm := 0
		if c.warm {
			warm = lines
		}
		var lat []float64
		n := 0
		_, err := h100Traced(h.o, scope.Grid{Blocks: 1, Threads: 1}, func(m *pm.Machine) (scope.Kernel, error) {
			base, err := memBase(m, "chase", uint64(lines)*128, c.target)
			if err != nil {
				return nil, err
			}
			return func(t *scope.Thread) {
				for i := range warm + hops {
					t.Load32(base.Add(uint64(i%lines) * 128))
				}
			}, nil
		}, func(ev hwmodel.Event) {
			if ev.Kind == pm.OpLoad {
				if n >= warm {
					lat = append(lat, float64(ev.Done-ev.Issue))
				}
				n++
			}
		})
		if err != nil {
			return err
		}
		// The GPU's first repetition of the chase over device memory is
		// the one that misses in the L2 (the later ones hit it); over host
		// memory the later ones miss no TLB entry (the first: 3,147
		// cycles a load, the second 2,441), and no cache keeps host lines.
		rep := "rep1"
		if c.name == "device" {
			rep = "rep0"
		}
		mv, err := h.get(h100Point{"3/load", c.name, rep, "cycles"})
		if err != nil {
			return err
		}
		h.add("load "+c.name, "cycles", mv, median(lat))
	}
	return nil
}

// atoms compares one thread's dependent atomics on one word of device
// memory.
func (h *hv) atoms() error {
	n := 256
	if h.o.Quick {
		n = 32
	}
	for _, kind := range []string{"add", "cas", "exch"} {
		var lat []float64
		_, err := h100Traced(h.o, scope.Grid{Blocks: 1, Threads: 1}, func(m *pm.Machine) (scope.Kernel, error) {
			a, err := m.Alloc(pm.DeviceMem, 128)
			if err != nil {
				return nil, err
			}
			return func(t *scope.Thread) {
				v := uint32(0)
				for range n {
					switch kind {
					case "add":
						v = t.AtomicAdd32(a, 1, pm.Device)
					case "cas":
						v = t.AtomicCAS32(a, v, v+1, pm.Device)
					case "exch":
						v = t.AtomicExch32(a, v+1, pm.Device)
					}
				}
			}, nil
		}, func(ev hwmodel.Event) {
			if ev.Kind == pm.OpAtomic {
				lat = append(lat, float64(ev.Done-ev.Issue))
			}
		})
		if err != nil {
			return err
		}
		mv, err := h.get(h100Point{"3/atom", "device/" + kind, "rep1", "cycles"})
		if err != nil {
			return err
		}
		h.add("atom "+kind, "cycles", mv, median(lat))
	}
	return nil
}

// deviceStreamBytes is what the streams to device memory beside a fence
// write in all: the GPU's write 4 GB; 64 MB outlasts the model's ramp
// (128 MB moves the fence by 1%).
const deviceStreamBytes = 64 << 20

// fenceBeside times the fences of F fencers (thread 0 of each of the
// first F blocks: an optional 4-byte store to its own PM line, then the
// fence, until every streaming block is done, or 4 times without any) while
// S more blocks of W warps stream 16-byte stores, bytes in all, to target
// memory, and count themselves done. Streams to device memory start with
// the L2 full of dirty lines (dirtyL2), as the GPU's do. It returns the
// median over the fencers of each one's mean fence, issue to done, as the
// GPU's fencers measure it (its cycles over its fences); the streaming
// blocks' own fences before they count themselves done are not the
// fencers'. The GPU's fencer reads the count every 16 fences; the model's
// reads it before every fence, since a few of its fences span the whole
// stream and those after the stream would otherwise weigh as much.
func (h *hv) fenceBeside(fence string, store bool, F, S, W int, target pm.Kind, bytes uint64) (float64, error) {
	const alone = 4
	threads := 32 * W
	steps := 0
	if S > 0 {
		steps = max(1, int(bytes/uint64(S*threads*16)))
	}
	sum, n := make([]float64, F), make([]float64, F)
	_, err := h100Traced(h.o, scope.Grid{Blocks: F + S, Threads: threads}, func(m *pm.Machine) (scope.Kernel, error) {
		own, err := memBase(m, "own", uint64(max(F, 1))*128, pm.PMem)
		if err != nil {
			return nil, err
		}
		stream, err := memBase(m, "stream", uint64(max(S*threads*steps, 1))*16, target)
		if err != nil {
			return nil, err
		}
		if target == pm.DeviceMem && S > 0 {
			if err := dirtyL2(m); err != nil {
				return nil, err
			}
		}
		done, err := m.Alloc(pm.DeviceMem, 128)
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			if t.Block() < F {
				if t.TID() != 0 {
					return
				}
				for i := 0; ; i++ {
					if S > 0 && t.Load32(done) >= uint32(S) || S == 0 && i == alone {
						return
					}
					if store {
						t.Store32(own.Add(uint64(t.Block())*128), uint32(i))
					}
					if fence == "gpu" {
						t.Fence(pm.Device)
					} else {
						t.EpochBarrier()
					}
				}
			}
			var v [16]byte
			g := uint64((t.Block()-F)*threads + t.TID())
			for k := range uint64(steps) {
				t.StoreBytes(stream.Add((k*uint64(S*threads)+g)*16), v[:])
			}
			t.SyncThreads()
			if t.TID() == 0 {
				t.Fence(pm.Device)
				t.AtomicAdd32(done, 1, pm.Device)
			}
		}, nil
	}, func(ev hwmodel.Event) {
		// Global warp ids run block by block: the fencers are warp 0
		// of each of the first F blocks.
		if f := ev.Warp / W; f < F && (ev.Kind == pm.OpFence || ev.Kind == pm.OpEpochBarrier) {
			sum[f] += float64(ev.Done - ev.Issue)
			n[f]++
		}
	})
	per := make([]float64, F)
	for f := range per {
		per[f] = sum[f] / max(n[f], 1)
	}
	return median(per), err
}

// bystander compares a fence of one SM alone and beside other SMs'
// streaming writes, to host or device memory, with and without a store of
// its own before it; and 32 fencing SMs beside 100 streaming ones.
func (h *hv) bystander() error {
	type v struct {
		F, S   int
		target string
	}
	vs := []v{{1, 0, "none"}, {1, 1, "host"}, {1, 131, "host"}, {1, 131, "device"}, {32, 100, "host"}}
	if h.o.Quick {
		vs = []v{{1, 0, "none"}, {1, 131, "host"}}
	}
	for _, fence := range []string{"system", "gpu"} {
		for _, store := range []bool{false, true} {
			for _, c := range vs {
				if err := h.ctx.Err(); err != nil {
					return err
				}
				if c.F == 32 && store {
					continue
				}
				kind, bytes := pm.PMem, uint64(16<<20)
				if c.target == "device" {
					kind, bytes = pm.DeviceMem, deviceStreamBytes
				}
				if h.o.Quick {
					bytes /= 8
				}
				lat, err := h.fenceBeside(fence, store, c.F, c.S, 8, kind, bytes)
				if err != nil {
					return err
				}
				st := "nostore"
				if store {
					st = "store"
				}
				variant := fmt.Sprintf("%s/%s/F%d/S%d/%s", fence, st, c.F, c.S, c.target)
				mv, err := h.get(h100Point{"3/bystander", variant, "-", "fence_cycles"})
				if err != nil {
					return err
				}
				h.add("bystander "+variant, "fence_cycles", mv, lat)
			}
		}
	}
	return nil
}

// depth compares one SM's system fence beside S streaming SMs of W warps
// each: how deep the queue in front of a fence is.
func (h *hv) depth() error {
	type v struct {
		target string
		S, W   int
	}
	var vs []v
	for _, s := range []int{1, 8, 32, 66, 131} {
		for _, w := range []int{1, 8, 32} {
			vs = append(vs, v{"host", s, w})
		}
	}
	for _, s := range []int{8, 32, 66, 131} {
		for _, w := range []int{1, 8, 32} {
			vs = append(vs, v{"device", s, w})
		}
	}
	if h.o.Quick {
		vs = []v{{"host", 8, 8}}
	}
	for _, c := range vs {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		kind, bytes := pm.PMem, uint64(16<<20)
		if c.target == "device" {
			kind, bytes = pm.DeviceMem, deviceStreamBytes
		}
		if h.o.Quick {
			bytes /= 8
		}
		lat, err := h.fenceBeside("system", false, 1, c.S, c.W, kind, bytes)
		if err != nil {
			return err
		}
		variant := fmt.Sprintf("%s/S%d/W%d", c.target, c.S, c.W)
		// measured3.csv has the device streams beside 131 SMs,
		// measured12.csv beside fewer
		p := h100Point{"3/depth", variant, "-", "fence_cycles"}
		if c.target == "device" && c.S < 131 {
			p.bench = "12/ddepth"
		}
		mv, err := h.get(p)
		if err != nil {
			return err
		}
		h.add("depth "+variant, "fence_cycles", mv, lat)
	}
	return nil
}

// concLoop is the cycles of one iteration of gpmbench.cu's conc loop
// without its store (a 64-bit modulo and the loop), measured: the kernel
// without the store, 64 iterations of one warp, less the empty kernel.
func (h *hv) concLoop() (uint64, error) {
	per, err := h.get(h100Point{"3/conc", "host/nostore", "1", "us_per_iter"})
	if err != nil {
		return 0, err
	}
	launch, err := h.get(h100Point{"3/launch", "empty", "-", "us"})
	if err != nil {
		return 0, err
	}
	return uint64((per*64 - launch) / 64 * h.clk), nil
}

// convParts compares gpmbench3.cu's conventional logging taken apart: the
// tail in device memory, no fences, the log and tail in device memory with
// and without fences, against n threads.
func (h *hv) convParts() error {
	ns := []int{32, 128, 512, 2048}
	if h.o.Quick {
		ns = []int{32, 256}
	}
	for _, c := range []struct {
		name                      string
		logHost, tailHost, fences bool
	}{
		{"conv", true, true, true}, {"conv-devtail", true, false, true}, {"conv-nofence", true, true, false},
		{"conv-dev-nofence", false, false, false}, {"conv-dev", false, false, true},
	} {
		for _, n := range ns {
			if err := h.ctx.Err(); err != nil {
				return err
			}
			r, err := h100Launch(h.o, logGrid(n), convKernel(n, c.logHost, c.tailHost, c.fences))
			if err != nil {
				return err
			}
			mv, ok := h.meas[h100Point{"3/log", c.name, strconv.Itoa(n), "us"}]
			if !ok {
				continue // quick sizes measured on the GPU only in part
			}
			h.add(fmt.Sprintf("log parts %d threads %s", n, c.name), "us", mv, h.us(r.event()))
		}
	}
	return nil
}
