package bench

import (
	"fmt"
	"strconv"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The comparisons against bench/h100/measured7.csv (gpmbench7.cu): the
// read path. Streams of loads from device memory, the L2 and pinned host
// memory, a shared-memory chase, host reads beside other SMs' host writes,
// and host reads and writes at once.

// window is one SM's timed part of a launch as the GPU kernels time it
// (clock64 between two block barriers): from its first timed load's issue
// to the last of its timed loads' completions and its warps' arrivals at
// the closing barrier.
type window struct{ start, end uint64 }

// phaseWindows returns a trace function that gathers, per SM, the window
// of the loads a warp issues after its skip-th block barrier and before
// the next one, and the map it fills.
func phaseWindows(skip int) (func(hwmodel.Event), map[int]*window) {
	wins := map[int]*window{}
	syncs := map[int]int{}
	return func(ev hwmodel.Event) {
		if ev.Kind == pm.OpSyncThreads {
			syncs[ev.Warp]++
			if syncs[ev.Warp] == skip+2 {
				if w := wins[ev.SM]; w != nil {
					w.end = max(w.end, ev.Issue)
				}
			}
			return
		}
		if ev.Kind != pm.OpLoad || syncs[ev.Warp] != skip+1 {
			return
		}
		w := wins[ev.SM]
		if w == nil {
			w = &window{start: ev.Issue}
			wins[ev.SM] = w
		}
		w.start = min(w.start, ev.Issue)
		w.end = max(w.end, ev.Done)
	}, wins
}

// longest returns the longest window of wins, in cycles (at least 1).
func longest(wins map[int]*window) uint64 {
	var c uint64 = 1
	for _, w := range wins {
		c = max(c, w.end-w.start)
	}
	return c
}

// vecsInFlight is how many of a thread's independent 16-byte loads the
// CUDA compiler keeps in flight in gpmbench7.cu's and gpmbench9.cu's
// loops: the SASS of the eight- and sixteen-vector loops issues five
// LDG.E.128, then each further one once a fold has freed its registers
// (bench/h100/README.md), so the loads go in rounds of five.
const vecsInFlight = 5

// loadStream runs gpmbench7.cu's lstream kernel: nsm blocks of 32*warps
// threads, each thread loading u independent 16-byte vectors a step for
// steps steps from target memory (passes times over the same part when
// passes > 1, timing the last), and returns the bytes of a timed pass over
// the longest block's window. The model's loads are 16-byte ones too
// (Gather128; a single vector, LoadBytes). The GPU's
// step ends in the instructions that fold the vectors in, which wait for
// their data; the model's in one cycle of Work. As in the GPU's code, at
// most vecsInFlight vectors are in flight a thread.
func (h *hv) loadStream(target pm.Kind, nsm, warps, u, steps, passes int) (float64, error) {
	threads := 32 * warps
	per := uint64(steps * u * threads) // vectors a block reads a pass
	trace, wins := phaseWindows(passes - 1)
	_, err := h100Traced(h.o, scope.Grid{Blocks: nsm, Threads: threads}, func(m *pm.Machine) (scope.Kernel, error) {
		base, err := memBase(m, "stream", uint64(nsm)*per*16, target)
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			var buf [16]byte
			addrs := make([]pm.Addr, u)
			dst := make([][2]uint64, u)
			q := base.Add((uint64(t.Block())*per + uint64(t.TID())) * 16)
			for range passes {
				t.SyncThreads()
				for k := range steps {
					for j := range u {
						addrs[j] = q.Add(uint64((k*u+j)*threads) * 16)
					}
					if u == 1 {
						t.LoadBytes(addrs[0], buf[:])
						continue
					}
					for i := 0; i < u; i += vecsInFlight {
						j := min(i+vecsInFlight, u)
						t.Gather128(dst[i:j], addrs[i:j]...)
						t.Work(1) // the fold that uses them: the warp waits for their data
					}
				}
			}
			t.SyncThreads()
		}, nil
	}, trace)
	return float64(per*16*uint64(nsm)) / float64(longest(wins)), err
}

// readPath compares the read path: load streams (one SM or all, warps,
// loads in flight a thread) from device and host memory, one SM's stream
// of L2 hits, and a shared-memory chase.
func (h *hv) readPath() error {
	type v struct {
		target    string
		nsm, u, w int
		l2        bool
	}
	var vs []v
	for _, target := range []string{"host", "device"} {
		for _, nsm := range []int{1, 132} {
			for _, u := range []int{1, 4} {
				for _, w := range []int{1, 4, 8, 32} {
					vs = append(vs, v{target, nsm, u, w, false})
				}
			}
		}
	}
	for _, nsm := range []int{1, 132} {
		for _, w := range []int{8, 32} {
			vs = append(vs, v{"device", nsm, 8, w, false})
		}
	}
	// The GPU's L2 streams from every SM read 256 KB an SM, which the
	// model's 256 KB L1 would hold; the GPU's did not (3,400 B/cycle over
	// 132 SMs is 26 an SM, no L1's rate), so only one SM's 4 MB, which
	// misses both L1s, is compared.
	for _, u := range []int{4, 8} {
		for _, w := range []int{8, 32} {
			vs = append(vs, v{"device", 1, u, w, true})
		}
	}
	if h.o.Quick {
		vs = []v{{"host", 1, 4, 8, false}, {"host", 132, 1, 1, false}, {"device", 1, 4, 32, false}, {"device", 132, 1, 4, false}, {"device", 1, 4, 32, true}}
	}
	for _, c := range vs {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		kind, bench := pm.DeviceMem, "7/lstream"
		if c.target == "host" {
			kind = pm.PMem
		}
		// Enough steps for a steady state: a pass of 32 steps a thread on
		// one SM; fewer where 132 SMs move more bytes a step.
		steps, passes := 32, 1
		if c.nsm > 1 {
			steps = max(2, 64/(c.w*c.u))
		}
		if c.l2 {
			bench, passes = "7/l2stream", 2
			steps = 4 << 20 / (16 * 32 * c.w * c.u) // the GPU's 4 MB
		}
		if h.o.Quick {
			steps = min(steps, 8)
		}
		got, err := h.loadStream(kind, c.nsm, c.w, c.u, steps, passes)
		if err != nil {
			return err
		}
		variant := fmt.Sprintf("%s/sms%d/u%d", c.target, c.nsm, c.u)
		mv, err := h.get(h100Point{bench, variant, strconv.Itoa(c.w), "bytes_per_cycle"})
		if err != nil {
			return err
		}
		h.add(fmt.Sprintf("%s %s w%d", bench[2:], variant, c.w), "bytes_per_cycle", mv, got)
	}
	return h.smemChase()
}

// smemChase compares one thread's dependent shared-memory loads.
func (h *hv) smemChase() error {
	const hops = 64
	var sum, n float64
	_, err := h100Traced(h.o, scope.Grid{Blocks: 1, Threads: 1}, func(m *pm.Machine) (scope.Kernel, error) {
		return func(t *scope.Thread) {
			for i := range hops {
				t.Load32(t.Shared().Add(uint64(i*129%4096) * 4))
			}
		}, nil
	}, func(ev hwmodel.Event) {
		if ev.Kind == pm.OpLoad {
			sum += float64(ev.Done - ev.Issue)
			n++
		}
	}, scope.WithShared(4096*4))
	if err != nil {
		return err
	}
	mv, err := h.get(h100Point{"7/smem", "chase", "4000", "cycles"})
	if err != nil {
		return err
	}
	h.add("smem chase", "cycles", mv, sum/max(n, 1))
	return nil
}

// hostProbe runs gpmbench7.cu's rprobe kernel: block 0's thread 0 waits
// 400,000 cycles (the streams reach their steady state), then times 32
// dependent loads of host lines no one writes (chase), 32 pairs of a
// 4-byte store to a host line of its own and a load of it (own: four
// pairs in flight, as the GPU's unrolled loop has them; the CUDA
// program's SASS, bench/h100/README.md), and 16 system fences, and raises
// a stop flag; blocks 1..S of 8 warps stream
// 16-byte stores into their own regions of host memory until they see it
// (every 64 stores). It returns the mean cycles of a chase load, an own
// pair and a fence.
func (h *hv) hostProbe(S int) (chase, own, fence float64, err error) {
	const threads, wait, hops, fences = 256, 400000, 32, 16
	const region = 1 << 16 // 16-byte elements an SM's stream wraps in (1 MB)
	var loads, stores, fenceEv []hwmodel.Event
	_, err = h100Traced(h.o, scope.Grid{Blocks: 1 + S, Threads: threads}, func(m *pm.Machine) (scope.Kernel, error) {
		stream, stop, err := streamSetup(m, S, region)
		if err != nil {
			return nil, err
		}
		probe, err := memBase(m, "probe", 2*64*128, pm.PMem)
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			if t.Block() == 0 {
				if t.TID() != 0 {
					return
				}
				t.Work(wait)
				j := uint64(0)
				for range hops {
					t.Load32(probe.Add(j * 128)) // the GPU's next index is this load's value
					j = (j + 17) % 64
				}
				// The GPU's loop is unrolled by four: four stores and
				// loads of their lines back, then the adds that use them.
				var dst [4]uint32
				for i := uint64(0); i < hops; i += 4 {
					var a [4]pm.Addr
					for j := range a {
						a[j] = probe.Add((64 + i + uint64(j)) * 128)
						t.Store32(a[j], uint32(i))
					}
					t.Gather32(dst[:], a[:]...)
					t.Work(1)
				}
				for range fences {
					t.EpochBarrier()
				}
				t.AtomicExch32(stop, 1, pm.Device)
				return
			}
			streamUntil(t, stream, stop, threads, region, 64, 0)
		}, nil
	}, func(ev hwmodel.Event) {
		if ev.Warp != 0 {
			return
		}
		switch ev.Kind {
		case pm.OpLoad:
			loads = append(loads, ev)
		case pm.OpStore:
			stores = append(stores, ev)
		case pm.OpEpochBarrier:
			fenceEv = append(fenceEv, ev)
		}
	})
	if err != nil {
		return 0, 0, 0, err
	}
	if len(loads) != 2*hops || len(stores) != hops || len(fenceEv) != fences {
		return 0, 0, 0, fmt.Errorf("bench: rprobe traced %d loads, %d stores, %d fences", len(loads), len(stores), len(fenceEv))
	}
	for _, ev := range loads[:hops] {
		chase += float64(ev.Done - ev.Issue)
	}
	own = float64(fenceEv[0].Issue - stores[0].Issue)
	for _, ev := range fenceEv {
		fence += float64(ev.Done - ev.Issue)
	}
	return chase / hops, own / hops, fence / fences, nil
}

// probes compares host reads beside other SMs' host writes (rprobe).
func (h *hv) probes() error {
	ss := []int{0, 1, 2, 8, 32, 131}
	if h.o.Quick {
		ss = []int{0, 8}
	}
	for _, S := range ss {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		chase, own, fence, err := h.hostProbe(S)
		if err != nil {
			return err
		}
		variant := "S" + strconv.Itoa(S)
		for _, p := range []struct {
			what  string
			model float64
		}{{"chase", chase}, {"own", own}, {"fence", fence}} {
			mv, err := h.get(h100Point{"7/rprobe", variant, p.what, "cycles"})
			if err != nil {
				return err
			}
			h.add("rprobe "+variant+" "+p.what, "cycles", mv, p.model)
		}
	}
	return nil
}

// mixedReadWrite runs gpmbench7.cu's mixed kernel: R blocks of 8 warps
// each read per bytes of host memory (four 16-byte loads in flight a
// thread) while W other blocks each write per bytes to host memory; it
// returns each group's bytes per cycle over its longest block's window.
func (h *hv) mixedReadWrite(R, W int, per uint64) (read, write float64, err error) {
	const threads = 256
	n := per / 16
	steps := int(n / (4 * threads))
	rwin, wwin := map[int]*window{}, map[int]*window{}
	first := map[int]bool{} // a warp's first barrier seen
	_, err = h100Traced(h.o, scope.Grid{Blocks: R + W, Threads: threads}, func(m *pm.Machine) (scope.Kernel, error) {
		rd, err := memBase(m, "read", uint64(max(R, 1))*per, pm.PMem)
		if err != nil {
			return nil, err
		}
		wr, err := memBase(m, "write", uint64(max(W, 1))*per, pm.PMem)
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			t.SyncThreads()
			if b := t.Block(); b < R {
				q := rd.Add((uint64(b)*n + uint64(t.TID())) * 16)
				var dst [4][2]uint64
				for k := range uint64(steps) {
					a := q.Add(k * 4 * threads * 16)
					t.Gather128(dst[:], a, a.Add(threads*16), a.Add(2*threads*16), a.Add(3*threads*16))
					t.Work(1)
				}
			} else {
				var v [16]byte
				q := wr.Add(uint64(b-R) * per)
				for k := uint64(t.TID()); k < n; k += threads {
					t.StoreBytes(q.Add(k*16), v[:])
				}
			}
			t.SyncThreads()
		}, nil
	}, func(ev hwmodel.Event) {
		if ev.Kind == pm.OpSyncThreads {
			wins := rwin
			if ev.Warp/(threads/32) >= R {
				wins = wwin
			}
			w := wins[ev.SM]
			if w == nil {
				w = &window{start: ev.Issue}
				wins[ev.SM] = w
			}
			if !first[ev.Warp] {
				first[ev.Warp] = true
				w.start = min(w.start, ev.Issue)
			} else {
				w.end = max(w.end, ev.Issue)
			}
		}
	})
	if R > 0 {
		read = float64(per*uint64(R)) / float64(longest(rwin))
	}
	if W > 0 {
		write = float64(per*uint64(W)) / float64(longest(wwin))
	}
	return read, write, err
}

// mixed compares host reads and writes at once: PCIe gives each direction
// its own bandwidth, but a read's request travels with the writes.
func (h *hv) mixed() error {
	type v struct{ R, W int }
	vs := []v{{66, 0}, {0, 66}, {66, 66}, {8, 0}, {0, 8}, {8, 8}, {1, 0}, {1, 8}, {8, 1}}
	per := uint64(1 << 20) // the GPU's 4 MB a block, less the model's time
	if h.o.Quick {
		vs, per = []v{{8, 8}}, 64<<10
	}
	for _, c := range vs {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		read, write, err := h.mixedReadWrite(c.R, c.W, per)
		if err != nil {
			return err
		}
		variant := fmt.Sprintf("R%d/W%d", c.R, c.W)
		for _, p := range []struct {
			what  string
			n     int
			model float64
		}{{"read", c.R, read}, {"write", c.W, write}} {
			if p.n == 0 {
				continue
			}
			mv, err := h.get(h100Point{"7/mixed", variant, p.what, "bytes_per_cycle"})
			if err != nil {
				return err
			}
			h.add("mixed "+variant+" "+p.what, "bytes_per_cycle", mv, p.model)
		}
	}
	return nil
}
