package hwmodel

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// setupHW returns a backend and a machine on it.
func setupHW(t testing.TB, cfg Config, model Model) (*Backend, *pm.Machine) {
	t.Helper()
	be, err := New(cfg, model)
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	return be, m
}

func word(t testing.TB, img *pm.Image, name string, off int) uint64 {
	t.Helper()
	r, ok := img.Region(name)
	require.True(t, ok)
	return binary.LittleEndian.Uint64(r.Data[off:])
}

// The models that make DFence wait for durability.
var durableModels = []Model{Strict, Epoch, GPM, SBRP, ScopedBarrier}

func TestPersistDFenceLatency(t *testing.T) {
	for _, preset := range []string{"pm-near", "pm-far", "pm-far-eadr", "gope", "volta"} {
		cfg, err := Preset(preset)
		require.NoError(t, err)
		// The least a persist can take from its store to its ack: to the
		// NVM and through its write latency; with persist.ack_at_queue
		// through the L2 to the GPU's memory partition (PM-far's link
		// latency comes after the ack); under eADR to the eADR point.
		floor := uint64(cfg.NVM.WriteLatencyCycles)
		switch {
		case cfg.Persist.AckAtQueue:
			floor = uint64(cfg.L2.LatencyCycles)
		case cfg.Persist.Point == pointEADR:
			floor = uint64(cfg.Persist.EADRLatencyCycles)
		}
		if cfg.PCIe.PMFar && !cfg.Persist.AckAtQueue {
			floor += uint64(cfg.PCIe.LatencyCycles)
		}
		for _, model := range durableModels {
			t.Run(preset+"/"+model.String(), func(t *testing.T) {
				be, m := setupHW(t, cfg, model)
				r := region(t, m, "p", 64)
				store, fence := traceStoreFence(be)
				_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
					t.Store64(r.Base, 42)
					t.DFence()
				})
				require.NoError(t, err)
				require.GreaterOrEqual(t, fence.Done-store.Issue, floor, "persist + DFence faster than the persistence point")
				img, err := be.CrashAt(fence.Done)
				require.NoError(t, err)
				require.Equal(t, uint64(42), word(t, img, "p", 0), "durable when DFence returns")
				img, err = be.CrashAt(store.Issue + floor - 1)
				require.NoError(t, err)
				require.Equal(t, uint64(0), word(t, img, "p", 0), "not durable before the persistence latency")
			})
		}
	}
}

func TestAckPointLatency(t *testing.T) {
	// A persist's ack on PM-far: with persist.ack_at_queue (the SBRP
	// artifact, ADR and eADR alike) when the GPU's memory partition passes
	// it on, after the L2 and the link's transfer but before the link's
	// latency; without it under eADR when it reaches the host's LLC (the
	// link's latency and the eADR point's too), never the NVM write
	// latency.
	for _, tc := range []struct {
		preset string
		atQ    bool
	}{{"pm-far", true}, {"pm-far-eadr", true}, {"pm-far-eadr", false}, {"h100", false}} {
		t.Run(fmt.Sprintf("%s/ack_at_queue=%v", tc.preset, tc.atQ), func(t *testing.T) {
			cfg, err := Preset(tc.preset)
			require.NoError(t, err)
			require.NoError(t, cfg.Set(fmt.Sprintf("persist.ack_at_queue=%v", tc.atQ)))
			be, m := setupHW(t, cfg, SBRP)
			r := region(t, m, "p", 64)
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store64(r.Base, 1) })
			require.NoError(t, err)
			require.Equal(t, 1, be.entries.len())
			e := *be.entries.at(0)
			lat := e.ack - e.start
			base := uint64(cfg.L2.LatencyCycles)
			if !tc.atQ {
				require.Equal(t, pointEADR, cfg.Persist.Point)
				base += uint64(cfg.PCIe.LatencyCycles + cfg.Persist.EADRLatencyCycles)
			}
			xfer := uint64(float64(128+cfg.PCIe.TLPBytes)*cfg.GPU.ClockMHz/(cfg.PCIe.GBps*1e3)) + 1
			require.GreaterOrEqual(t, lat, base)
			require.LessOrEqual(t, lat, base+2*xfer)
		})
	}
}

func TestStreamingBandwidth(t *testing.T) {
	const blocks, bs = 30, 256
	iters := 48
	if testing.Short() {
		iters = 12 // still 2,880 lines: far past every queue and window
	}
	lines := uint64(blocks * bs / 32 * iters)
	for _, preset := range []string{"pm-near", "pm-far"} {
		cfg, err := Preset(preset)
		require.NoError(t, err)
		gbps := min(cfg.NVM.WriteGBps, cfg.PCIe.GBps)
		if !cfg.PCIe.PMFar {
			gbps = cfg.NVM.WriteGBps
		}
		bound := uint64(float64(lines*128) * cfg.GPU.ClockMHz / (gbps * 1e3))
		for _, model := range Models() {
			t.Run(preset+"/"+model.String(), func(t *testing.T) {
				be, m := setupHW(t, cfg, model)
				r := region(t, m, "s", lines*128)
				_, err := scope.Launch(m, scope.Grid{Blocks: blocks, Threads: bs}, func(t *scope.Thread) {
					n := uint64(t.GridDim() * t.BlockDim())
					for i := range uint64(iters) {
						t.Store32(r.Base.Add(4*(i*n+uint64(t.ID()))), uint32(i))
					}
					t.DFence()
				})
				require.NoError(t, err)
				s := be.Stats()
				require.GreaterOrEqual(t, s.NVMWriteBytes, uint64(lines*128))
				require.GreaterOrEqual(t, be.Now(), bound, "streaming beat the write bandwidth")
				t.Logf("%d lines: %d cycles to durable, bound %d (%.2fx)", lines, be.Now(), bound, float64(be.Now())/float64(bound))
			})
		}
	}
}

func TestSBRPReleaseScope(t *testing.T) {
	for _, sc := range []pm.Scope{pm.Block, pm.Device} {
		t.Run(sc.String(), func(t *testing.T) {
			be, m := setupHW(t, PresetPMNear(), SBRP)
			r := region(t, m, "d", 4096)
			flag := alloc(t, m, 4)
			var rel Event
			be.SetTrace(func(e Event) {
				if e.Kind == pm.OpPRel {
					rel = e
				}
			})
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 64}, func(t *scope.Thread) {
				switch t.TID() {
				case 0:
					t.Store64(r.Base, 7)
					t.PRel(flag, 1, sc)
				case 32:
					for t.PAcq(flag, sc) == 0 {
					}
					t.Store64(r.Base.Add(1024), 8)
				}
			})
			require.NoError(t, err)
			img, err := be.CrashAt(rel.Done)
			require.NoError(t, err)
			// The acquirer's persist is ordered after the releaser's in
			// both cases: it never becomes durable first.
			require.Equal(t, 2, be.entries.len())
			require.GreaterOrEqual(t, be.entries.at(1).start, be.entries.at(0).ack)
			s := be.Stats()
			if sc == pm.Block {
				require.Zero(t, s.Stalls.Release, "a block-scope release does not wait for NVM")
				require.Equal(t, uint64(0), word(t, img, "d", 0), "nothing reached NVM by the release")
				require.Less(t, rel.Done-rel.Issue, uint64(PresetPMNear().NVM.WriteLatencyCycles))
			} else {
				require.NotZero(t, s.Stalls.Release, "a device-scope release waits for NVM")
				require.Equal(t, uint64(7), word(t, img, "d", 0), "the release made the data durable")
			}
		})
	}
}

func TestEpochInvalidates(t *testing.T) {
	verbs := map[string]func(t *scope.Thread, flag pm.Addr){
		"OFence":       func(t *scope.Thread, _ pm.Addr) { t.OFence() },
		"DFence":       func(t *scope.Thread, _ pm.Addr) { t.DFence() },
		"PRel.block":   func(t *scope.Thread, f pm.Addr) { t.PRel(f, 1, pm.Block) },
		"PAcq.block":   func(t *scope.Thread, f pm.Addr) { t.PAcq(f, pm.Block) },
		"PBarrier":     func(t *scope.Thread, _ pm.Addr) { t.PBarrier(pm.Thread) },
		"EpochBarrier": func(t *scope.Thread, _ pm.Addr) { t.EpochBarrier() },
		"SyncThreads":  func(t *scope.Thread, _ pm.Addr) { t.SyncThreads() },
	}
	for _, name := range []string{"OFence", "DFence", "PRel.block", "PAcq.block", "PBarrier", "EpochBarrier", "SyncThreads"} {
		verb := verbs[name]
		for _, model := range []Model{Epoch, GPM, SBRP} {
			t.Run(name+"/"+model.String(), func(t *testing.T) {
				be, m := setupHW(t, PresetPMNear(), model)
				r := region(t, m, "x", 64)
				flag := alloc(t, m, 4)
				_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
					t.Load64(r.Base)
					t.Load64(r.Base)
					verb(t, flag)
					t.Load64(r.Base)
				})
				require.NoError(t, err)
				want := uint64(1) // the first load misses
				if model != SBRP && name != "" {
					want = 2 // the verb invalidated the L1: the last load misses too
				}
				if model == SBRP && name == "EpochBarrier" {
					want = 2 // a system-scope barrier invalidates under SBRP too
				}
				require.Equal(t, want, be.Stats().L1PMMisses)
			})
		}
	}
}

// maxOutstanding returns the most flushes outstanding at once: started
// and not yet acknowledged.
func maxOutstanding(entries []entry) int {
	most := 0
	for _, e := range entries {
		n := 0
		for _, o := range entries {
			if o.start <= e.start && e.start < o.ack {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func TestWindowBoundsFlushes(t *testing.T) {
	var cycles []uint64
	for _, w := range []int{2, 6} {
		cfg := PresetPMNear()
		require.NoError(t, cfg.Set("persist.window="+string(rune('0'+w))))
		be, m := setupHW(t, cfg, SBRP)
		r := region(t, m, "w", 64*128)
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			for i := range uint64(64) {
				t.Store32(r.Base.Add(128*i+4*uint64(t.Lane())), uint32(i))
			}
			t.DFence()
		})
		require.NoError(t, err)
		require.Equal(t, 64, be.entries.len())
		most := maxOutstanding(entriesOf(be))
		require.LessOrEqual(t, most, w, "outstanding flushes on one SM")
		require.Equal(t, w, most, "the window is used in full")
		cycles = append(cycles, be.Stats().Cycles)
	}
	require.Greater(t, cycles[0], cycles[1], "a narrower window is slower")
}

// The memory system's mem.sm_writes bounds every model's outstanding line
// writes per SM; SBRP's flush window (persist.window) bounds SBRP's alone.
func TestSMWritesBoundEveryModel(t *testing.T) {
	most := func(small bool, model Model) int {
		cfg := PresetPMNear()
		if small {
			cfg.Mem.SMWrites = 4
		}
		be, m := setupHW(t, cfg, model)
		r := region(t, m, "w", 64*128)
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			for i := range uint64(64) {
				t.Store32(r.Base.Add(128*i+4*uint64(t.Lane())), uint32(i))
			}
			t.DFence()
		})
		require.NoError(t, err)
		return maxOutstanding(entriesOf(be))
	}
	require.Equal(t, 4, most(true, Epoch))
	require.Equal(t, 4, most(true, SBRP))
	require.Greater(t, most(false, Epoch), 6)
	require.Equal(t, 6, most(false, SBRP))
}

// With persist.ack_at_queue a persist is durable when the PM queue takes
// it, without the NVM write latency.
func TestAckAtQueue(t *testing.T) {
	lat := func(atQueue bool) uint64 {
		cfg := PresetPMNear()
		cfg.Persist.AckAtQueue = atQueue
		be, m := setupHW(t, cfg, SBRP)
		r := region(t, m, "a", 128)
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
			t.Store64(r.Base, 1)
			t.DFence()
		})
		require.NoError(t, err)
		return be.LastLaunch().Cycles
	}
	slow, fast := lat(false), lat(true)
	require.GreaterOrEqual(t, slow-fast, uint64(PresetPMNear().NVM.WriteLatencyCycles)-8)
}

// With pcie.full_duplex, PM-far reads and writes no longer share the
// link's bandwidth: a kernel streaming both is faster.
func TestPCIeFullDuplex(t *testing.T) {
	run := func(duplex bool) uint64 {
		cfg := PresetPMFar()
		cfg.PCIe.FullDuplex = duplex
		be, m := setupHW(t, cfg, SBRP)
		// Each thread copies 16 lines: later loads overlap the writes
		// of earlier stores draining from the persist buffer.
		src := region(t, m, "src", 16*256*128)
		dst := region(t, m, "dst", 16*256*128)
		_, err := scope.Launch(m, scope.Grid{Blocks: 8, Threads: 32}, func(t *scope.Thread) {
			for i := range uint64(16) {
				line := (i*256 + uint64(t.ID())) * 128
				t.Store64(dst.Base.Add(line), t.Load64(src.Base.Add(line))+1)
			}
			t.DFence()
		})
		require.NoError(t, err)
		return be.LastLaunch().Cycles
	}
	shared, duplex := run(false), run(true)
	t.Logf("shared link %d cycles, full duplex %d", shared, duplex)
	require.Less(t, duplex, shared)
}

// A ScopedBarrier NVW-FIFO entry leaves when its cache writes the line
// back, not when NVRAM acknowledges it: one CU streaming 512 lines through
// a 16-entry L1 FIFO takes less than the 512/16 NVRAM
// write latencies a FIFO held to the ack would take (13,332 cycles then).
func TestNVWFIFOFreesOnWriteBack(t *testing.T) {
	cfg := PresetGOPE()
	be, m := setupHW(t, cfg, ScopedBarrier)
	r := region(t, m, "s", 512*64)
	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 64}, func(t *scope.Thread) {
		for k := range uint64(8) {
			t.Store64(r.Base.Add((k*64+uint64(t.TID()))*64), k)
		}
		t.PBarrier(pm.Block)
	})
	require.NoError(t, err)
	held := uint64(512/cfg.Persist.NVWFIFOL1) * uint64(cfg.NVM.WriteLatencyCycles)
	t.Logf("%d cycles; a FIFO held to the ack would take at least %d", be.LastLaunch().Cycles, held)
	require.Less(t, be.LastLaunch().Cycles, held)
}

// TestBufferFull: a full persist buffer flushes every entry at its head
// that its order lets go, whatever the window (the SBRP artifact's
// beginFlush with ignoreLimit), so unordered stores never wait for room;
// stores whose warp ordered them (OFence) wait for the head's order.
func TestBufferFull(t *testing.T) {
	for _, c := range []struct {
		name    string
		ordered bool
	}{{"unordered", false}, {"ordered", true}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := PresetPMNear()
			require.NoError(t, cfg.Set("persist.buffer_entries=8", "persist.window=2"))
			be, m := setupHW(t, cfg, SBRP)
			r := region(t, m, "b", 64*128)
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
				for i := range uint64(64) {
					t.Store32(r.Base.Add(128*i+4*uint64(t.Lane())), uint32(i))
					if c.ordered {
						t.OFence()
					}
				}
			})
			require.NoError(t, err)
			if c.ordered {
				require.NotZero(t, be.Stats().Stalls.BufferFull)
			} else {
				require.Zero(t, be.Stats().Stalls.BufferFull)
			}
		})
	}
}

func TestCrashAtAndState(t *testing.T) {
	be, m := setupHW(t, PresetPMNear(), SBRP)
	r := region(t, m, "c", 64)
	require.NoError(t, m.CopyIn(r.Base, []byte{1, 2, 3}))
	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store8(r.Base, 9) })
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store8(r.Base.Add(1), 8) })
	require.NoError(t, err)
	_, err = be.CrashAt(0)
	require.ErrorIs(t, err, ErrCrashTime, "history before the last launch is gone")
	img, err := be.CrashAt(be.LastStart())
	require.NoError(t, err)
	rg, _ := img.Region("c")
	require.Equal(t, []byte{9, 2, 3}, rg.Data[:3], "host copy and first launch durable, second not yet")
	img, err = m.Crash()
	require.NoError(t, err)
	rg, _ = img.Region("c")
	require.Equal(t, []byte{9, 8, 3}, rg.Data[:3])
	require.ErrorIs(t, be.Begin(pm.Launch{Blocks: 1, Threads: 1}), ErrState)
	_, err = be.CrashAt(1 << 40)
	require.ErrorIs(t, err, ErrState)

	// Reopen on a fresh backend: the image carries over.
	be2, err := New(PresetPMFar(), Epoch)
	require.NoError(t, err)
	m2, err := pm.Reopen(img, be2)
	require.NoError(t, err)
	img2, err := m2.Crash()
	require.NoError(t, err)
	require.True(t, img.Equal(img2))
}

func TestBadInputIsAnError(t *testing.T) {
	be, err := New(PresetPMNear(), SBRP)
	require.NoError(t, err)
	require.ErrorIs(t, be.Begin(pm.Launch{Blocks: 1, Threads: 1}), ErrState, "Begin before Attach")
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	require.ErrorIs(t, be.Begin(pm.Launch{Blocks: -1, Threads: 4}), ErrGeometry)
	require.ErrorIs(t, be.Begin(pm.Launch{Blocks: 0, Threads: 0}), ErrGeometry)
	require.ErrorIs(t, be.Begin(pm.Launch{Blocks: 1, Threads: 4096}), ErrGeometry)
	_, err = be.End()
	require.ErrorIs(t, err, ErrState, "End without Begin")
	require.NoError(t, be.Begin(pm.Launch{Blocks: 1, Threads: 1}))
	require.ErrorIs(t, be.Begin(pm.Launch{Blocks: 1, Threads: 1}), ErrState, "Begin twice")
	// Odd agents do not crash the model.
	be.Op(&pm.Agent{Warp: 0, Unit: -3, Lane: 40}, &pm.Op{Kind: pm.OpStore, PM: false, Size: 4, Addr: 1 << pm.OffsetBits})
	require.NotZero(t, be.Step(0))
	_, err = be.End()
	require.NoError(t, err)
	_, err = m.Crash()
	require.NoError(t, err)
}

// With persist.epoch_own_acks an Epoch fence waits only for the lines its
// own warp dirtied: a warp that stored nothing fences at once though its
// fence writes back another warp's dirty lines; without it the fence waits
// for those flushes too.
func TestEpochOwnAcks(t *testing.T) {
	fenceCost := func(own bool) uint64 {
		cfg := PresetPMNear()
		cfg.Persist.EpochOwnAcks = own
		cfg.Persist.EpochWriteThrough = false // the other warp's fence writes warp 0's dirty lines back
		be, m := setupHW(t, cfg, Epoch)
		r := region(t, m, "a", 64*128)
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 64}, func(t *scope.Thread) {
			if t.WarpInBlock() == 0 {
				for i := range uint64(64) {
					t.Store32(r.Base.Add(128*i+4*uint64(t.Lane())), uint32(i))
				}
				return // its lines are flushed by the other warp's fence
			}
			t.Work(200)
			t.OFence()
		})
		require.NoError(t, err)
		return be.LastLaunch().Stalls.Epoch
	}
	shared, own := fenceCost(false), fenceCost(true)
	t.Logf("epoch stall cycles: SM-wide %d, own lines %d", shared, own)
	require.Less(t, own, shared)
}

// An Epoch DFence makes every persist before it durable by the time it
// returns, also when the SM's outstanding-write limit starts its write-backs
// later than the fence (SM-wide or own-warp waiting).
func TestEpochFenceWaitsForWindowedWriteBacks(t *testing.T) {
	for _, own := range []bool{false, true} {
		cfg := PresetPMNear()
		cfg.Mem.SMWrites = 6
		cfg.Persist.EpochOwnAcks = own
		be, m := setupHW(t, cfg, Epoch)
		r := region(t, m, "a", 64*128)
		var fence Event
		be.SetTrace(func(e Event) {
			if e.Kind == pm.OpDFence {
				fence = e
			}
		})
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			for i := range uint64(64) {
				t.Store32(r.Base.Add(128*i+4*uint64(t.Lane())), uint32(i+1))
			}
			t.DFence()
		})
		require.NoError(t, err)
		img, err := be.CrashAt(fence.Done)
		require.NoError(t, err)
		for i := range 64 {
			require.NotZero(t, word(t, img, "a", 128*i), "own=%v: line %d not durable when the DFence returned at %d", own, i, fence.Done)
		}
	}
}

// A warp's gathered loads overlap: four independent loads to four lines of
// PM take about one memory latency, four plain loads about four, and with
// gpu.serial_loads gathered loads are plain again. The instruction after
// the gather waits for the data: a DFence of a store that follows the
// gather returns no earlier than the loads' latency.
func TestGatheredLoadsOverlap(t *testing.T) {
	const lines = 4
	run := func(serial, gather bool) (cycles, memStall uint64) {
		cfg := PresetPMNear()
		cfg.GPU.SerialLoads = serial
		cfg.GPU.LaunchLatencyCycles = 0 // the kernel's own cycles
		be, m := setupHW(t, cfg, SBRP)
		r := region(t, m, "g", lines*128)
		out := region(t, m, "o", 128)
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			var addrs [lines]pm.Addr
			for i := range addrs {
				addrs[i] = r.Base.Add(uint64(i*128 + 4*t.Lane()))
			}
			var v [lines]uint32
			if gather {
				t.Gather32(v[:], addrs[:]...)
			} else {
				for i, a := range addrs {
					v[i] = t.Load32(a)
				}
			}
			t.Store32(out.Base.Add(uint64(4*t.Lane())), v[0]+v[1]+v[2]+v[3])
		})
		require.NoError(t, err)
		st := be.LastLaunch()
		return st.Cycles, st.Stalls.Memory
	}
	read := uint64(PresetPMNear().NVM.ReadLatencyCycles)
	plain, plainStall := run(false, false)
	gathered, gatheredStall := run(false, true)
	serial, serialStall := run(true, true)
	t.Logf("plain %d cycles (memory stalls %d), gathered %d (%d), gathered with serial_loads %d (%d)",
		plain, plainStall, gathered, gatheredStall, serial, serialStall)
	require.Equal(t, plain, serial, "serial_loads: a gather is plain loads")
	require.Equal(t, plainStall, serialStall)
	require.GreaterOrEqual(t, plain, lines*read, "plain loads wait for each other")
	require.GreaterOrEqual(t, gathered, read, "the store waits for the gathered data")
	require.Less(t, gathered, 2*read, "gathered loads overlap")
	require.Less(t, gatheredStall, plainStall)
}

// With persist.sector_bytes a PM line's write-back or flush sends only
// the sectors written: one 4-byte store per line sends a sector, two
// stores to two sectors of a line (in two instructions, merged into one
// dirty line or persist-buffer entry) send two.
func TestSectorWriteBack(t *testing.T) {
	const lines = 64
	for _, model := range []Model{Epoch, GPM, SBRP, Strict} {
		for _, sector := range []int{0, 32} {
			t.Run(fmt.Sprintf("%v/sector=%d", model, sector), func(t *testing.T) {
				cfg := PresetPMNear()
				cfg.Persist.SectorBytes = sector
				be, m := setupHW(t, cfg, model)
				r := region(t, m, "s", lines*128)
				_, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: lines / 2}, func(t *scope.Thread) {
					line := r.Base.Add(uint64(128 * t.ID()))
					t.Store32(line, 1)
					t.Store32(line.Add(64), 2)
					t.DFence()
				})
				require.NoError(t, err)
				st := be.LastLaunch()
				want := uint64(lines * 128)
				if sector > 0 {
					want = lines * 2 * uint64(sector)
				}
				switch {
				case sector == 0 && (model == Strict || cfg.Persist.EpochWriteThrough && model != SBRP):
					want *= 2 // a write-through per store
				case model == SBRP && sector == 0:
					// The second store merges into the line's buffer
					// entry only if its flush has not started yet.
					require.GreaterOrEqual(t, st.NVMWriteBytes, want)
					require.LessOrEqual(t, st.NVMWriteBytes, 2*want)
					return
				}
				require.Equal(t, want, st.NVMWriteBytes)
			})
		}
	}
	cfg := PresetPMNear()
	cfg.Persist.SectorBytes = 24
	require.ErrorIs(t, cfg.Validate(), ErrConfig)
}

// A launch pays gpu.launch_latency_cycles before its first instruction, and
// launches run one after another: two launches of a one-thread kernel take
// at least twice the latency, and the latency is what separates them from
// the same launches without it.
func TestLaunchLatency(t *testing.T) {
	run := func(latency int) (one, two uint64) {
		cfg := PresetPMNear()
		cfg.GPU.LaunchLatencyCycles = latency
		be, m := setupHW(t, cfg, SBRP)
		r := region(t, m, "l", 128)
		k := func(t *scope.Thread) { t.Store32(r.Base, 1) }
		t0 := be.Now()
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, k)
		require.NoError(t, err)
		one = be.LastLaunch().Cycles
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, k)
		require.NoError(t, err)
		return one, be.Now() - t0
	}
	one0, two0 := run(0)
	one, two := run(5000)
	t.Logf("one launch %d cycles (%d without latency), two %d (%d)", one, one0, two, two0)
	require.Equal(t, one0+5000, one)
	require.GreaterOrEqual(t, two, uint64(2*5000))
	require.Equal(t, two0+2*5000, two)
	require.Equal(t, 5000, PresetPMNear().GPU.LaunchLatencyCycles, "the SBRP artifact's gpgpusim.config")
	require.Equal(t, 5000, PresetVolta().GPU.LaunchLatencyCycles, "the re-study's gpgpusim.config")
}

// With persist.epoch_write_through (the SBRP machines) an Epoch or GPM
// store is written through as it executes: its persist starts at the store,
// not at the fence, the warp does not wait for it, and the fence waits for
// the acks. Off, the line stays dirty in the L1 until the fence writes it
// back. Either way the DFence returns only once the data is durable.
func TestEpochWriteThrough(t *testing.T) {
	for _, model := range []Model{Epoch, GPM} {
		for _, wt := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/wt=%v", model, wt), func(t *testing.T) {
				cfg := PresetPMNear()
				cfg.GPU.LaunchLatencyCycles = 0
				cfg.Persist.EpochWriteThrough = wt
				cfg.GPU.FenceLatencyCycles = 0 // the fence's wait alone, not its instruction latency
				be, m := setupHW(t, cfg, model)
				r := region(t, m, "w", 128)
				store, fence := traceStoreFence(be)
				_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
					t.Store64(r.Base, 7)
					t.Work(2000) // longer than a persist's round trip
					t.DFence()
				})
				require.NoError(t, err)
				require.Equal(t, 1, be.entries.len())
				e := *be.entries.at(0)
				if wt {
					require.Equal(t, store.Issue, e.start, "the write-through starts at the store")
					require.Less(t, e.ack, fence.Issue, "acked during the work: the fence has nothing to wait for")
					require.LessOrEqual(t, fence.Done-fence.Issue, uint64(cfg.L2.LatencyCycles)+1)
				} else {
					require.GreaterOrEqual(t, e.start, fence.Issue, "written back by the fence")
					require.GreaterOrEqual(t, fence.Done, e.ack)
				}
				img, err := be.CrashAt(fence.Done)
				require.NoError(t, err)
				require.Equal(t, uint64(7), word(t, img, "w", 0))
			})
		}
	}
}

// TestFenceLatency: on the SBRP machines a fence of device or system scope
// holds its warp at least the artifact's fence latency (200 cycles) from
// its issue, as GPGPU-Sim's fence opcode latency does, except SBRP's
// persistency verbs (persistent ops under -pm_model 5) and None's free
// verbs; a block fence does not take it. The kernel has nothing to wait
// for: one thread, no store.
func TestFenceLatency(t *testing.T) {
	require.Equal(t, 200, PresetPMNear().GPU.FenceLatencyCycles)
	require.Equal(t, 200, PresetPMFar().GPU.FenceLatencyCycles)
	require.Zero(t, PresetVolta().GPU.FenceLatencyCycles)
	require.Zero(t, PresetGOPE().GPU.FenceLatencyCycles)
	require.Zero(t, PresetH100().GPU.FenceLatencyCycles)
	const floor = 200
	l2 := uint64(PresetPMNear().L2.LatencyCycles)
	for _, tc := range []struct {
		model Model
		kind  pm.OpKind
		sc    pm.Scope
		want  uint64 // cycles from the verb's issue to its end
	}{
		{Strict, pm.OpOFence, pm.Device, floor},
		{Strict, pm.OpDFence, pm.System, floor},
		{Epoch, pm.OpOFence, pm.Device, floor},
		{Epoch, pm.OpDFence, pm.System, floor},
		{GPM, pm.OpDFence, pm.System, 2 * floor}, // and the fence GPM adds after it
		{SBRP, pm.OpOFence, pm.Device, 1},
		{SBRP, pm.OpDFence, pm.System, 1},
		{SBRP, pm.OpFence, pm.Device, floor},
		{SBRP, pm.OpFence, pm.Block, 1},
		{Epoch, pm.OpFence, pm.Device, floor},
		{None, pm.OpDFence, pm.System, 1},
	} {
		t.Run(fmt.Sprintf("%v/%v.%v", tc.model, tc.kind, tc.sc), func(t *testing.T) {
			require.Less(t, l2, uint64(floor), "the floor binds only above the L2 round trip")
			for _, lat := range []int{floor, 0} {
				cfg := PresetPMNear()
				cfg.GPU.FenceLatencyCycles = lat
				be, m := setupHW(t, cfg, tc.model)
				var got Event
				be.SetTrace(func(e Event) {
					if e.Kind == tc.kind {
						got = e
					}
				})
				_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
					switch tc.kind {
					case pm.OpOFence:
						t.OFence()
					case pm.OpDFence:
						t.DFence()
					default:
						t.Fence(tc.sc)
					}
				})
				require.NoError(t, err)
				took := got.Done - got.Issue
				if lat == 0 {
					require.Less(t, took, uint64(floor), "without the key the verb ends sooner")
					continue
				}
				require.Equal(t, tc.want, took)
			}
		})
	}
}

// traceStoreFence traces be's launches and returns the last store and the
// last DFence they issued, filled in as the launch runs.
func traceStoreFence(be *Backend) (store, fence *Event) {
	store, fence = new(Event), new(Event)
	be.SetTrace(func(e Event) {
		switch e.Kind {
		case pm.OpStore:
			*store = e
		case pm.OpDFence:
			*fence = e
		}
	})
	return store, fence
}

// TestFarEADRReadLatency: the artifact's sbrp_far_eadr configuration
// differs from sbrp_far only by -pm_latency (600 for 900), which every PM
// request crosses: a cold PM load on pm-far-eadr takes 300 cycles less
// than on pm-far, and a device-memory load the same.
func TestFarEADRReadLatency(t *testing.T) {
	load := func(cfg Config, kind pm.Kind) uint64 {
		be, m := setupHW(t, cfg, SBRP)
		var a pm.Addr
		if kind == pm.DeviceMem {
			a = alloc(t, m, 128)
		} else {
			a = region(t, m, "r", 128).Base
		}
		var ev Event
		be.SetTrace(func(e Event) {
			if e.Kind == pm.OpLoad {
				ev = e
			}
		})
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Load64(a) })
		require.NoError(t, err)
		return ev.Done - ev.Issue
	}
	far, eadr := PresetPMFar(), PresetPMFarEADR()
	require.Equal(t, load(far, pm.PMem)-300, load(eadr, pm.PMem))
	require.Equal(t, load(far, pm.DeviceMem), load(eadr, pm.DeviceMem))
}

// entriesOf returns a copy of be's flush entries in order.
func entriesOf(be *Backend) []entry {
	out := make([]entry, be.entries.len())
	for i := range out {
		out[i] = *be.entries.at(int32(i))
	}
	return out
}
