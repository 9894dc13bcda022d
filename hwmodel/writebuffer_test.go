package hwmodel

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// probeBeside runs, on cfg under GPM, S blocks of threads threads
// streaming 16-byte stores to PM until told to stop, beside a probe (block 0's
// thread 0) that waits wait cycles, then loads a PM line no one writes and
// makes four system fences, and stops the streams. It returns the load's
// and the mean fence's cycles.
func probeBeside(t *testing.T, cfg Config, S, threads int, wait uint64) (load, fence float64) {
	t.Helper()
	be, m := setupHW(t, cfg, GPM)
	stream := region(t, m, "stream", uint64(max(S, 1))*streamElems*16)
	probe := region(t, m, "probe", 128)
	stop, err := m.Alloc(pm.DeviceMem, 128)
	require.NoError(t, err)
	var fences, nf, loaded float64
	be.SetTrace(func(ev Event) {
		if ev.Warp != 0 {
			return
		}
		switch ev.Kind {
		case pm.OpEpochBarrier:
			fences += float64(ev.Done - ev.Issue)
			nf++
		case pm.OpLoad: // warp 0 loads only the probe's line
			loaded = float64(ev.Done - ev.Issue)
		}
	})
	_, err = scope.Launch(m, scope.Grid{Blocks: 1 + S, Threads: threads}, func(th *scope.Thread) {
		if th.Block() == 0 {
			if th.TID() == 0 {
				th.Work(wait)
				th.Load32(probe.Base)
				for range 4 {
					th.EpochBarrier()
				}
				th.Store32(stop, 1)
			}
			return
		}
		streamUntil(th, stream.Base, threads, stop)
	})
	require.NoError(t, err)
	require.Positive(t, loaded, "the probe's load was not traced")
	return loaded, fences / max(nf, 1)
}

// streamElems is the 16-byte elements each streaming block of probeBeside
// and fenceBesideDevice writes over and over: 512 KB.
const streamElems = 1 << 15

// streamUntil stores 16-byte values from th over its block's streamElems
// elements of base (block 1 the first: block 0 probes) until stop reads
// non-zero, reading it every 8 stores.
func streamUntil(th *scope.Thread, base pm.Addr, threads int, stop pm.Addr) {
	var v [16]byte
	own := base.Add(uint64(th.Block()-1) * streamElems * 16)
	for k := uint64(0); ; k++ {
		if k%8 == 0 && th.Load32(stop) != 0 {
			return
		}
		th.StoreBytes(own.Add(((k*uint64(threads)+uint64(th.TID()))%streamElems)*16), v[:])
	}
}

// TestWriteBufferInFrontOfTheLink holds pcie.write_buffer_bytes to Little's
// law on h100: beside SMs that together offer more than the link takes, a
// system fence waits for the buffer's bytes and the SMs' outstanding-write
// slots (mem.sm_writes lines each, waiting to enter it) to cross the link,
// within 10%, with 8 warps an SM and with 32 (FineBatch: at Batch, 32 SMs
// of 32 warps put 2.9 times the law in front of the fence); a host read's
// request waits only for what the buffer holds, not for the writes
// waiting to enter it, as the H100's reads wait a quarter to a half of
// what a fence beside the same streams waits (bench/h100/measured7.csv,
// rprobe); and without the buffer the fence waits less (the key is live).
func TestWriteBufferInFrontOfTheLink(t *testing.T) {
	base, err := Preset("h100")
	require.NoError(t, err)
	require.Positive(t, base.PCIe.WriteBufferBytes)
	const wait = 60000
	loadAlone, fenceAlone := probeBeside(t, base, 0, 32, wait)
	// The link's data rate: each line of 128 bytes takes pcie.tlp_bytes more.
	line := float64(base.L1.LineBytes)
	rate := base.PCIe.GBps * 1e3 / base.GPU.ClockMHz * line / (line + float64(base.PCIe.TLPBytes))
	for _, c := range []struct{ S, threads int }{{2, 256}, {8, 256}, {32, 1024}} {
		t.Run(fmt.Sprintf("S=%d/threads=%d", c.S, c.threads), func(t *testing.T) {
			load, fence := probeBeside(t, base, c.S, c.threads, wait)
			buf := float64(base.PCIe.WriteBufferBytes)
			slots := float64(c.S*base.Mem.SMWrites) * line
			want := (buf+slots)/rate + fenceAlone
			wantLoad := buf/rate + loadAlone
			t.Logf("fence %.0f cycles (alone %.0f), want %.0f: ratio %.3f; load %.0f (alone %.0f), want %.0f", fence, fenceAlone, want, fence/want, load, loadAlone, wantLoad)
			require.InDelta(t, 1, fence/want, 0.10, "the fence's wait is not the buffer and the slots over the link's rate")
			require.InDelta(t, 1, load/wantLoad, 0.15, "a read's request waits for other than what the buffer holds")
			require.Less(t, load, fence, "a read waited for the writes behind the buffer too")
			if c.threads > 256 {
				return
			}
			cfg := base
			require.NoError(t, cfg.Set("pcie.write_buffer_bytes=0"))
			_, without := probeBeside(t, cfg, c.S, c.threads, wait)
			t.Logf("without the buffer: fence %.0f cycles", without)
			require.Less(t, without, fence-buf/rate/2, "pcie.write_buffer_bytes changes no fence beside the streams")
		})
	}
}
