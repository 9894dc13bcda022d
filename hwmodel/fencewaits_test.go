package hwmodel

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// TestFenceWaitsForEveryEarlierWrite holds gpu.fence_waits_all to its
// promise beside other SMs' streams: every fence of the fencing warp ends
// no earlier than every write any SM issued before it (in an earlier
// bucket of the watermark) is complete, for the system fence, and has left
// the GPU's queues, for the device fence. Warps run several instructions
// ahead of each other, so a fence timed as soon as its warp reached it saw
// only the writes booked by then: beside 8 streaming SMs its later fences
// cost a round trip each while the queue in front of them was full.
//
// It runs at the step h100 takes (FineBatch) and at Batch, whose longer
// steps let warps run further ahead of each other: there a fence timed
// as soon as its warp reached it ends before earlier writes complete.
func TestFenceWaitsForEveryEarlierWrite(t *testing.T) {
	for _, c := range []struct {
		fence string
		batch int
	}{{"system", FineBatch}, {"device", FineBatch}, {"system", Batch}, {"device", Batch}} {
		fence := c.fence
		t.Run(fmt.Sprintf("%s/batch=%d", fence, c.batch), func(t *testing.T) {
			cfg, err := Preset("h100")
			require.NoError(t, err)
			require.True(t, cfg.GPU.FenceWaitsAll)
			be, err := New(cfg, GPM)
			require.NoError(t, err)
			be.batch = c.batch
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			const streamers, threads, steps = 8, 64, 512
			stream := region(t, m, "stream", streamers*threads*steps*16)
			done, err := m.Alloc(pm.DeviceMem, 8)
			require.NoError(t, err)
			// The calendars keep their whole history, so that the writes
			// booked after a fence was timed are seen too: a fence timed
			// before every warp ran past it would miss exactly those.
			be.keepAll = true
			type span struct{ issue, done uint64 }
			var fences []span
			be.SetTrace(func(ev Event) {
				if ev.Warp == 0 && (ev.Kind == pm.OpFence || ev.Kind == pm.OpEpochBarrier) {
					fences = append(fences, span{ev.Issue, ev.Done})
				}
			})
			_, err = scope.Launch(m, scope.Grid{Blocks: 1 + streamers, Threads: threads}, func(th *scope.Thread) {
				if th.Block() == 0 {
					if th.TID() != 0 {
						return
					}
					for th.Load32(done) < streamers {
						if fence == "system" {
							th.EpochBarrier()
						} else {
							th.Fence(pm.Device)
						}
					}
					return
				}
				var v [16]byte
				g := uint64((th.Block()-1)*threads + th.TID())
				for k := range uint64(steps) {
					th.StoreBytes(stream.Base.Add((k*streamers*threads+g)*16), v[:])
				}
				th.SyncThreads()
				if th.TID() == 0 {
					th.AtomicAdd32(done, 1, pm.Device)
				}
			})
			require.NoError(t, err)
			w := be.ms.acks
			if fence == "device" {
				w = be.ms.gone
			}
			require.Zero(t, w.floor, "the watermark forgot writes: the test's stream is too long to check")
			require.Greater(t, len(fences), 2)
			waited := 0
			for i, f := range fences {
				k := f.issue >> bucketShift
				if k == 0 || k-1 < w.base {
					continue
				}
				before := w.by((k - 1) << bucketShift) // writes that left in an earlier bucket
				require.GreaterOrEqual(t, f.done, before, "fence %d of %d issued at %d ends before a write issued earlier completes", i, len(fences), f.issue)
				if before > f.issue+uint64(cfg.GPU.FenceSystemCycles) {
					waited++
				}
			}
			t.Logf("%s: %d fences, %d waited beyond their round trip for other SMs' writes", fence, len(fences), waited)
			require.Greater(t, waited, len(fences)/2, "most fences beside the streams wait for them")
		})
	}
}

// TestFenceIssuedOncePerWarp: where a fence ends its lane's step
// (pm.Waker), the lanes reaching it are timed as one fence instruction,
// however many verbs each ran before it, as a warp issues a fence once for
// all its lanes: lane 0 storing before each of the warp's fences gives one
// store and one fence of 32 lanes per iteration, not a fence of 31 lanes
// and another of lane 0.
func TestFenceIssuedOncePerWarp(t *testing.T) {
	for _, c := range []struct {
		preset string
		model  Model
		kind   pm.OpKind
	}{{"h100", GPM, pm.OpEpochBarrier}, {"h100", GPM, pm.OpFence}, {"pm-near", SBRP, pm.OpDFence}} {
		t.Run(c.preset+"/"+c.model.String()+"/"+c.kind.String(), func(t *testing.T) {
			cfg, err := Preset(c.preset)
			require.NoError(t, err)
			be, m := setupHW(t, cfg, c.model)
			r := region(t, m, "p", 4096)
			const iters = 8
			var lanes []int
			be.SetTrace(func(ev Event) {
				if ev.Kind == c.kind {
					lanes = append(lanes, ev.Lanes)
				}
			})
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(th *scope.Thread) {
				for i := range uint64(iters) {
					if th.Lane() == 0 {
						th.Store64(r.Base.Add(8*i), i)
					}
					switch c.kind {
					case pm.OpEpochBarrier:
						th.EpochBarrier()
					case pm.OpFence:
						th.Fence(pm.System)
					default:
						th.DFence()
					}
				}
			})
			require.NoError(t, err)
			want := make([]int, iters)
			for i := range want {
				want[i] = 32
			}
			require.Equal(t, want, lanes, "lanes of each %v instruction", c.kind)
		})
	}
}

// TestOneSMCannotOverrunTheLink holds mem.sm_far_gbps to what the H100
// shows (bench/h100/measured2.csv, stream host/sms1; measured5.csv): one
// SM streams PM-far writes at no more than its own rate, below the link's,
// so no queue builds in front of the link, and another SM's store and
// system fence beside that stream cost what they cost alone (measured:
// 1,658 cycles against 1,342). Without the SM's rate the stream overran the
// link and the fence waited 2,761 cycles behind a round trip of its writes.
func TestOneSMCannotOverrunTheLink(t *testing.T) {
	fenceBeside := func(t *testing.T, cfg Config, streamers int) (fence uint64, gbps float64) {
		be, m := setupHW(t, cfg, GPM)
		const threads, steps = 256, 256
		own := region(t, m, "own", 128)
		stream := region(t, m, "stream", uint64(max(streamers, 1))*threads*steps*16)
		done, err := m.Alloc(pm.DeviceMem, 8)
		require.NoError(t, err)
		var sum, n uint64
		be.SetTrace(func(ev Event) {
			if ev.Warp == 0 && ev.Kind == pm.OpEpochBarrier {
				sum += ev.Done - ev.Issue
				n++
			}
		})
		_, err = scope.Launch(m, scope.Grid{Blocks: 1 + streamers, Threads: threads}, func(th *scope.Thread) {
			if th.Block() == 0 {
				if th.TID() != 0 {
					return
				}
				for i := 0; streamers > 0 && th.Load32(done) < uint32(streamers) || streamers == 0 && i < 8; i++ {
					th.Store32(own.Base, uint32(i))
					th.EpochBarrier()
				}
				return
			}
			var v [16]byte
			g := uint64((th.Block()-1)*threads + th.TID())
			for k := range uint64(steps) {
				th.StoreBytes(stream.Base.Add((k*uint64(streamers)*threads+g)*16), v[:])
			}
			th.SyncThreads()
			if th.TID() == 0 {
				th.AtomicAdd32(done, 1, pm.Device)
			}
		})
		require.NoError(t, err)
		st := be.LastLaunch()
		cycles := st.Cycles - uint64(cfg.GPU.LaunchLatencyCycles)
		bytes := float64(streamers * threads * steps * 16)
		return sum / max(n, 1), bytes / float64(cycles) * cfg.GPU.ClockMHz / 1e3
	}
	cfg, err := Preset("h100")
	require.NoError(t, err)
	require.Positive(t, cfg.Mem.SMFarGBps)
	alone, _ := fenceBeside(t, cfg, 0)
	beside, gbps := fenceBeside(t, cfg, 1)
	t.Logf("store and system fence alone %d cycles, beside one streaming SM %d; the stream %.1f GB/s", alone, beside, gbps)
	require.LessOrEqual(t, gbps, cfg.Mem.SMFarGBps*1.001, "one SM streamed faster than mem.sm_far_gbps")
	require.Greater(t, gbps, cfg.Mem.SMFarGBps*0.9, "one SM's stream fell well below its own rate")
	require.Less(t, float64(beside), 1.25*float64(alone), "a queue built in front of the link behind one SM's stream")

	// Without the SM's rate, the stream overruns the link (the key is live).
	require.NoError(t, cfg.Set("mem.sm_far_gbps=0"))
	unbounded, _ := fenceBeside(t, cfg, 1)
	require.Greater(t, float64(unbounded), 1.5*float64(alone), "without mem.sm_far_gbps one SM's stream should queue at the link")
}
