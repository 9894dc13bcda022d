package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// runVolta runs kernel k on one thread of the volta preset under model and
// returns the backend's statistics of the launch and the durable image at
// its end.
func runVolta(t *testing.T, model Model, lines int, k func(t *scope.Thread, base pm.Addr)) (Stats, *pm.Image) {
	t.Helper()
	be, m := setupHW(t, PresetVolta(), model)
	r := region(t, m, "p", uint64(max(lines, 1))*128)
	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { k(t, r.Base) })
	require.NoError(t, err)
	img, err := be.CrashAt(be.Now())
	require.NoError(t, err)
	return be.LastLaunch(), img
}

// A CLWB writes a dirty line back once; a CLWB of a clean line (never
// written, or written back already) writes nothing to NVM.
func TestWriteBackCLWBOfCleanLine(t *testing.T) {
	st, _ := runVolta(t, WriteBackADR, 1, func(t *scope.Thread, a pm.Addr) {
		t.CLWB(a)
		t.MemBar()
	})
	require.Zero(t, st.NVMWriteBytes, "a clean line")
	st, img := runVolta(t, WriteBackADR, 1, func(t *scope.Thread, a pm.Addr) {
		t.Store64(a, 5)
		t.CLWB(a)
		t.MemBar()
		t.CLWB(a)
		t.MemBar()
	})
	require.Equal(t, uint64(32), st.NVMWriteBytes, "one write-back of the one dirty 32-byte sector")
	require.Equal(t, uint64(5), word(t, img, "p", 0))
}

// A plain store stays in the L2: not durable at the end of the launch.
// Written back (CLWB, write-through, L2WB) and fenced, it is.
func TestWriteBackDurability(t *testing.T) {
	for _, tc := range []struct {
		name    string
		model   Model
		k       func(t *scope.Thread, a pm.Addr)
		durable bool
	}{
		{"plain store", WriteBackADR, func(t *scope.Thread, a pm.Addr) { t.Store64(a, 9); t.MemBar() }, false},
		{"clwb", WriteBackADR, func(t *scope.Thread, a pm.Addr) { t.Store64(a, 9); t.CLWB(a); t.MemBar() }, true},
		{"write-through", WriteBackADR, func(t *scope.Thread, a pm.Addr) { t.StoreWT64(a, 9); t.MemBar() }, true},
		{"l2wb", WriteBackADR, func(t *scope.Thread, a pm.Addr) { t.Store64(a, 9); t.L2WB(); t.MemBar() }, true},
		{"legacy dfence", WriteBackADR, func(t *scope.Thread, a pm.Addr) { t.Store64(a, 9); t.DFence() }, true},
		// Volatile WPQs: acknowledged is not durable until a PCommit.
		{"pct clwb, no pcommit", WriteBackPCT, func(t *scope.Thread, a pm.Addr) { t.Store64(a, 9); t.CLWB(a); t.MemBar() }, false},
		{"pct write-through, no pcommit", WriteBackPCT, func(t *scope.Thread, a pm.Addr) { t.StoreWT64(a, 9); t.MemBar() }, false},
		{"pct clwb, pcommit", WriteBackPCT, func(t *scope.Thread, a pm.Addr) {
			t.Store64(a, 9)
			t.CLWB(a)
			t.MemBar()
			t.PCommit()
			t.MemBar()
		}, true},
		{"pct legacy dfence", WriteBackPCT, func(t *scope.Thread, a pm.Addr) { t.Store64(a, 9); t.DFence() }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, img := runVolta(t, tc.model, 1, tc.k)
			want := uint64(0)
			if tc.durable {
				want = 9
			}
			require.Equal(t, want, word(t, img, "p", 0))
		})
	}
}

// L2WB walks the whole L2: it costs at least the walk with nothing dirty,
// and more with more dirty lines to write back.
func TestWriteBackL2WBCostGrowsWithDirtyLines(t *testing.T) {
	cfg := PresetVolta()
	lines := cfg.L2.SizeBytes / cfg.L2.LineBytes
	walk := uint64(lines / (cfg.WriteBack.Channels * cfg.WriteBack.L2BanksPerChannel * cfg.WriteBack.L2TagChecksPerCycle))
	var last uint64
	for _, n := range []int{0, 16, 256, 2048} {
		st, img := runVolta(t, WriteBackADR, n, func(t *scope.Thread, a pm.Addr) {
			for i := range n {
				t.Store64(a+pm.Addr(i*128), uint64(i+1))
			}
			t.L2WB()
			t.MemBar()
		})
		t.Logf("%d dirty lines: %d cycles, %d bytes to NVM", n, st.Cycles, st.NVMWriteBytes)
		require.Equal(t, uint64(n*32), st.NVMWriteBytes, "a dirty sector per line")
		require.Greater(t, st.Cycles, walk)
		require.Greater(t, st.Cycles, last)
		last = st.Cycles
		if n > 0 {
			require.Equal(t, uint64(n), word(t, img, "p", (n-1)*128))
		}
	}
}

// The L2WB walk of the re-study's GPGPU-Sim (data_cache::nvm_wb_timing):
// every bank walks its lines in parallel, examining up to
// writeback.l2_tag_checks_per_cycle of them a cycle and stopping at a dirty
// one, which it writes back that cycle, then takes a cycle to report. On
// volta a bank holds 32 sets of 24 ways: a clean walk takes 768/24 + 1
// cycles after the L2 latency; dirty lines a way apart in one set cost a
// cycle each, as many dirty lines spread one per examined window cost
// almost nothing more.
func TestWriteBackL2WBWalk(t *testing.T) {
	cfg := PresetVolta()
	sets := cfg.L2.SizeBytes / cfg.L2.LineBytes / cfg.L2.Assoc
	banks := cfg.WriteBack.Channels * cfg.WriteBack.L2BanksPerChannel
	require.Equal(t, 2048, sets)
	l2 := uint64(cfg.L2.LatencyCycles)
	for _, tc := range []struct {
		name  string
		lines []int // line numbers stored
		walk  uint64
	}{
		{"clean", nil, 768/24 + 1},
		// One line in each of 32 sets of bank 0 (one a window): each found
		// by a cycle that then starts right after it.
		{"one line a set", func() []int {
			var ls []int
			for i := range 32 {
				ls = append(ls, i*banks)
			}
			return ls
		}(), 32 + (768-(31*24+1)+23)/24 + 1},
		// 24 lines of one set: a cycle each, then the rest of the bank.
		{"a dirty set", func() []int {
			var ls []int
			for i := range 24 {
				ls = append(ls, i*sets)
			}
			return ls
		}(), 24 + (768-24)/24 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, m := setupHW(t, cfg, WriteBackADR)
			n := 1
			for _, l := range tc.lines {
				n = max(n, l+1)
			}
			r := region(t, m, "p", uint64(n)*128)
			require.Zero(t, uint64(r.Base)>>7%uint64(sets), "the region starts at set 0 of bank 0")
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
				for _, l := range tc.lines {
					t.Store64(r.Base.Add(uint64(128*l)), 1)
				}
				t.L2WB()
			})
			require.NoError(t, err)
			rs := be.WriteBackStats()
			require.Equal(t, uint64(1), rs.L2WBs)
			require.Equal(t, l2+tc.walk, rs.WalkCycles)
			require.Equal(t, uint64(32*len(tc.lines)), be.LastLaunch().NVMWriteBytes)
		})
	}
}

// PCommit costs a round trip to the memory controllers under PCT and
// nothing under ADR.
func TestWriteBackPCommitCost(t *testing.T) {
	k := func(t *scope.Thread, a pm.Addr) {
		t.StoreWT64(a, 1)
		t.MemBar()
		t.PCommit()
		t.MemBar()
	}
	adr, _ := runVolta(t, WriteBackADR, 1, k)
	pct, _ := runVolta(t, WriteBackPCT, 1, k)
	l2 := uint64(PresetVolta().L2.LatencyCycles)
	require.Greater(t, pct.Cycles, adr.Cycles+l2, "the PCommit's trip to the controllers and back")
}

func TestWriteBackConfigKeys(t *testing.T) {
	c := PresetVolta()
	require.Equal(t, WriteBackConfig{Channels: 32, L2BanksPerChannel: 2, L2TagChecksPerCycle: 24, SectorBytes: 32}, c.WriteBack)
	require.ErrorIs(t, c.Set("writeback.sector_bytes=24"), ErrConfig)
	require.NoError(t, c.Set("writeback.channels=16", "writeback.l2_tag_checks_per_cycle=4"))
	require.Equal(t, 16, c.WriteBack.Channels)
	require.ErrorIs(t, c.Set("writeback.channels=-1"), ErrConfig)
	require.Contains(t, Keys(), "writeback.l2_banks_per_channel")
	_, err := New(c, WriteBackADR)
	require.NoError(t, err)
	for name, want := range map[string]Model{"writeback-adr": WriteBackADR, "writeback-pct": WriteBackPCT, "restudy": WriteBackADR, "restudy-pct": WriteBackPCT} {
		m, err := ParseModel(name)
		require.NoError(t, err, name)
		require.Equal(t, want, m, name)
	}
	// The keys' former spelling still sets and reads them.
	require.NoError(t, c.Set("restudy.channels=8"))
	require.Equal(t, 8, c.WriteBack.Channels)
	v, err := c.Value("restudy.channels")
	require.NoError(t, err)
	require.Equal(t, "8", v)
	require.Equal(t, "writeback.channels", CanonicalKey("restudy.channels"))
	require.Equal(t, "nvm.read_gbps", CanonicalKey("nvm.read_gbps"))
	// And so does a JSON configuration.
	for _, js := range []string{`{"restudy":{"channels":4}}`, `{"writeback":{"channels":4}}`} {
		got, err := LoadConfig([]byte(js), PresetVolta())
		require.NoError(t, err, js)
		require.Equal(t, 4, got.WriteBack.Channels, js)
	}
	_, err = LoadConfig([]byte(`{"restudy":{"channels":4},"writeback":{"channels":2}}`), PresetVolta())
	require.ErrorIs(t, err, ErrConfig)
}

// A sectored L2 writes back the sectors written: a whole line of
// write-through stores sends the line once per store's sector, and with
// writeback.sector_bytes=0 every write-back sends the whole line.
func TestWriteBackSectors(t *testing.T) {
	k := func(t *scope.Thread, a pm.Addr) {
		for i := range 16 {
			t.Store64(a+pm.Addr(8*i), uint64(i))
		}
		t.CLWB(a)
		t.StoreWT64(a+128, 1)
		t.MemBar()
	}
	st, _ := runVolta(t, WriteBackADR, 2, k)
	require.Equal(t, uint64(128+32), st.NVMWriteBytes, "four dirty sectors, then one written through")
	be, m := setupHW(t, func() Config { c := PresetVolta(); c.WriteBack.SectorBytes = 0; return c }(), WriteBackADR)
	r := region(t, m, "p", 256)
	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { k(t, r.Base) })
	require.NoError(t, err)
	require.Equal(t, uint64(256), be.LastLaunch().NVMWriteBytes)
}

// A kernel's dirty lines stay dirty in the L2 after it ends: an L2WB in a
// later launch (the kernel-level epoch's epilogue) writes them back and
// pays for it.
func TestWriteBackDirtyLinesOutliveTheLaunch(t *testing.T) {
	be, m := setupHW(t, PresetVolta(), WriteBackADR)
	r := region(t, m, "p", 64*128)
	_, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
		t.Store64(r.Base+pm.Addr(128*t.ID()), 1)
	})
	require.NoError(t, err)
	require.Zero(t, be.LastLaunch().NVMWriteBytes, "nothing written back yet")
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		t.L2WB()
		t.MemBar()
	})
	require.NoError(t, err)
	require.Equal(t, uint64(64*32), be.LastLaunch().NVMWriteBytes, "the epilogue's L2WB writes back 64 dirty sectors")
}

// Under ADR the WPQ is in the persistence domain: with persist.ack_at_queue
// (volta) a CLWB's write-back is durable, and its MemBar returns, once the
// WPQ accepts it, about the NVM write latency sooner than without the key.
// Under PCT the write is durable only when a PCommit has drained it to the
// media, so there the NVM write latency is paid either way: no earlier
// than the WPQ's acceptance plus that latency.
func TestWriteBackAckAtQueue(t *testing.T) {
	durableAt := func(model Model, atQueue bool) (memBar, durable uint64) {
		cfg := PresetVolta()
		cfg.GPU.LaunchLatencyCycles = 0
		cfg.Persist.AckAtQueue = atQueue
		be, m := setupHW(t, cfg, model)
		r := region(t, m, "p", 128)
		var bars []Event
		be.SetTrace(func(e Event) {
			if e.Kind == pm.OpMemBar {
				bars = append(bars, e)
			}
		})
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
			t.Store64(r.Base, 9)
			t.CLWB(r.Base)
			t.MemBar()
			if model == WriteBackPCT {
				t.PCommit()
				t.MemBar()
			}
		})
		require.NoError(t, err)
		last := bars[len(bars)-1]
		// The first cycle whose crash image holds the store.
		lo, hi := uint64(0), be.Now()
		for lo < hi {
			mid := (lo + hi) / 2
			img, err := be.CrashAt(mid)
			require.NoError(t, err)
			if word(t, img, "p", 0) == 9 {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		require.GreaterOrEqual(t, last.Done, lo, "the last MemBar returned before the store was durable")
		return last.Done, lo
	}
	wr := uint64(PresetVolta().NVM.WriteLatencyCycles)
	adrLate, adrDurLate := durableAt(WriteBackADR, false)
	adrQueue, adrDurQueue := durableAt(WriteBackADR, true)
	t.Logf("ADR: MemBar %d -> %d, durable %d -> %d", adrLate, adrQueue, adrDurLate, adrDurQueue)
	// Durable when the WPQ accepts it: before its transfer to the NVM (a
	// cycle or two of the channel's bandwidth) and its write latency.
	require.InDelta(t, wr+1, adrDurLate-adrDurQueue, 1, "durable when the WPQ accepts it")
	require.InDelta(t, wr+1, adrLate-adrQueue, 1)
	pctLate, pctDurLate := durableAt(WriteBackPCT, false)
	pctQueue, pctDurQueue := durableAt(WriteBackPCT, true)
	t.Logf("PCT: MemBar %d -> %d, durable %d -> %d", pctLate, pctQueue, pctDurLate, pctDurQueue)
	require.GreaterOrEqual(t, pctDurQueue, adrDurQueue+wr, "a PCommit waits for the drain to the media")
	require.GreaterOrEqual(t, pctDurLate, adrDurLate, "without the key the MemBar before the PCommit already waited for it")
}

// With nvm.shared_bus (volta) NVM reads and writes share one bus: a kernel
// that streams both at once takes longer than with a bus each.
func TestNVMSharedBus(t *testing.T) {
	run := func(shared bool) uint64 {
		cfg := PresetVolta()
		cfg.NVM.SharedBus = shared
		cfg.NVM.ReadGBps, cfg.NVM.WriteGBps = 20, 20 // slow enough that the bus binds
		be, m := setupHW(t, cfg, WriteBackADR)
		const lines = 8 // a thread's: each one's read overlaps other warps' writes
		src := region(t, m, "src", lines*512*128)
		dst := region(t, m, "dst", lines*512*128)
		_, err := scope.Launch(m, scope.Grid{Blocks: 16, Threads: 32}, func(t *scope.Thread) {
			for i := range uint64(lines) {
				line := (i*512 + uint64(t.ID())) * 128
				t.StoreWT64(dst.Base.Add(line), t.Load64(src.Base.Add(line))+1)
			}
			t.MemBar()
		})
		require.NoError(t, err)
		return be.LastLaunch().Cycles
	}
	apart, shared := run(false), run(true)
	t.Logf("a bus each %d cycles, shared %d", apart, shared)
	require.Greater(t, shared, apart)
}
