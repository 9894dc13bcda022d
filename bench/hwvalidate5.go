package bench

import (
	"fmt"
	"strconv"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The comparisons against bench/h100/measured5-h100.csv (gpmbench5.cu):
// a system fence beside streams that offer a chosen fraction of the host
// link's bandwidth.

// h100LinkBytesPerCycle is the host link's rate gpmbench5.cu paces its
// streams against (26.3 B per cycle: 52 GB/s at the measured clock).
const h100LinkBytesPerCycle = 26.3

// offered compares one SM's system fence (no store of its own) beside S
// streaming SMs of 8 warps, each warp storing 512 B (16 B a lane) once
// every period cycles, so that the streams offer a fraction f of the link:
// below the link's rate no queue forms and a fence costs about its round
// trip; above it the fence waits for the queue in front of the link.
func (h *hv) offered() error {
	type v struct {
		S int
		f float64
	}
	var vs []v
	for _, f := range []float64{0.25, 0.5, 0.75, 0.9, 1.1, 1.5, 3.0} {
		vs = append(vs, v{8, f})
	}
	for _, f := range []float64{0.5, 0.9, 1.5} {
		vs = append(vs, v{131, f})
	}
	if h.o.Quick {
		vs = []v{{8, 0.5}, {8, 1.5}}
	}
	for _, c := range vs {
		if err := h.ctx.Err(); err != nil {
			return err
		}
		period := uint64(float64(c.S) * 4096 / (c.f * h100LinkBytesPerCycle))
		lat, err := h.fenceOffered(c.S, period)
		if err != nil {
			return err
		}
		variant := fmt.Sprintf("S%d/f%.2f", c.S, c.f)
		mv, err := h.get(h100Point{"5/offered", variant, strconv.FormatUint(period, 10), "fence_cycles"})
		if err != nil {
			return err
		}
		h.add("offered "+variant, "fence_cycles", mv, lat)
	}
	return nil
}

// fenceOffered runs gpmbench5.cu's offered kernel: block 0's thread 0
// waits 400,000 cycles (the streams reach their steady state), times 16
// system fences (4 at quick size; the GPU's 64) and raises a stop flag;
// blocks 1..S of 8 warps
// each store 16 B a lane into their own region once every period cycles
// until they see it (every 8 stores). It returns the fencer's mean fence.
//
// The GPU kernel paces each warp by spinning on its clock until the next
// period; the model's warps wait as Work, which holds one of the SM's
// schedulers, so the 8 warps of a streaming block (one block an SM) each
// charge period x schedulers / 8 cycles of it: together they keep the
// SM's schedulers busy and each warp stores once a period, as the GPU's do.
func (h *hv) fenceOffered(S int, period uint64) (float64, error) {
	const threads, wait = 256, 400000
	cfg, err := h.o.config("h100", nil)
	if err != nil {
		return 0, err
	}
	spin := max(1, period*uint64(cfg.GPU.Schedulers)/(threads/32))
	fences := 16
	if h.o.Quick {
		fences = 4
	}
	const region = 1 << 16 // 16-byte elements an SM's stream wraps in (1 MB)
	var sum, n float64
	_, err = h100Traced(h.o, scope.Grid{Blocks: 1 + S, Threads: threads}, func(m *pm.Machine) (scope.Kernel, error) {
		stream, stop, err := streamSetup(m, S, region)
		if err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			if t.Block() == 0 {
				if t.TID() != 0 {
					return
				}
				t.Work(wait)
				for range fences {
					t.EpochBarrier()
				}
				t.AtomicExch32(stop, 1, pm.Device)
				return
			}
			streamUntil(t, stream, stop, threads, region, 8, spin)
		}, nil
	}, func(ev hwmodel.Event) {
		if ev.Warp == 0 && ev.Kind == pm.OpEpochBarrier {
			sum += float64(ev.Done - ev.Issue)
			n++
		}
	})
	return sum / max(n, 1), err
}

// streamSetup allocates the host memory S streaming blocks write into
// (region 16-byte elements each) and the device word that stops them.
func streamSetup(m *pm.Machine, S int, region uint64) (stream, stop pm.Addr, err error) {
	if stream, err = memBase(m, "stream", uint64(max(S, 1))*region*16, pm.PMem); err != nil {
		return 0, 0, err
	}
	stop, err = m.Alloc(pm.DeviceMem, 128)
	return stream, stop, err
}

// streamUntil has thread t of streaming block t.Block() (from 1) store 16
// bytes at a time into its block's region of stream (region 16-byte
// elements, wrapping), its block's threads side by side, until it sees the
// word at stop set (read every every stores); with spin, each store is
// followed by spin cycles of Work.
func streamUntil(t *scope.Thread, stream, stop pm.Addr, threads, region, every, spin uint64) {
	var v [16]byte
	base := stream.Add(uint64(t.Block()-1) * region * 16)
	for k := uint64(0); ; k++ {
		if k%every == 0 && t.Load32(stop) != 0 {
			return
		}
		t.StoreBytes(base.Add(((k*threads+uint64(t.TID()))%region)*16), v[:])
		if spin > 0 {
			t.Work(spin)
		}
	}
}
