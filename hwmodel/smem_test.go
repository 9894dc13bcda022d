package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// A block's shared memory is timed on the SM: an access takes one pass per
// distinct word of its busiest bank (gpu.smem_banks) and its data is back
// gpu.smem_latency_cycles after the last pass. It never reaches the L1, the
// L2 or memory.
func TestSharedMemoryBanks(t *testing.T) {
	lat := uint64(PresetVolta().GPU.SmemLatencyCycles)
	require.Equal(t, uint64(20), lat, "the re-study's -gpgpu_smem_latency")
	type access func(t *scope.Thread, sh pm.Addr, lane int)
	word := func(sh pm.Addr, w int) pm.Addr { return sh.Add(uint64(4 * w)) }
	for _, tc := range []struct {
		name   string
		kind   pm.OpKind
		passes uint64
		do     access
	}{
		{"load/conflict-free", pm.OpLoad, 1, func(t *scope.Thread, sh pm.Addr, l int) { t.Load32(word(sh, l)) }},
		{"load/broadcast", pm.OpLoad, 1, func(t *scope.Thread, sh pm.Addr, l int) { t.Load32(word(sh, 0)) }},
		// Lanes alternate between two words of bank 0: two passes, each
		// word's lanes served together.
		{"load/two-words-alternating", pm.OpLoad, 2, func(t *scope.Thread, sh pm.Addr, l int) { t.Load32(word(sh, 32*(l%2))) }},
		{"load/2-way", pm.OpLoad, 2, func(t *scope.Thread, sh pm.Addr, l int) { t.Load32(word(sh, 2*l)) }},
		{"load/32-way", pm.OpLoad, 32, func(t *scope.Thread, sh pm.Addr, l int) { t.Load32(word(sh, 32*l)) }},
		{"load/8-byte", pm.OpLoad, 2, func(t *scope.Thread, sh pm.Addr, l int) { t.Load64(word(sh, 2*l)) }},
		{"store/conflict-free", pm.OpStore, 1, func(t *scope.Thread, sh pm.Addr, l int) { t.Store32(word(sh, l), 1) }},
		{"store/32-way", pm.OpStore, 32, func(t *scope.Thread, sh pm.Addr, l int) { t.Store32(word(sh, 32*l), 1) }},
		{"atomic/distinct", pm.OpAtomic, 1, func(t *scope.Thread, sh pm.Addr, l int) { t.AtomicAdd32(word(sh, l), 1, pm.Block) }},
		{"atomic/one-word", pm.OpAtomic, 1, func(t *scope.Thread, sh pm.Addr, l int) { t.AtomicAdd32(word(sh, 0), 1, pm.Block) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := PresetVolta()
			cfg.GPU.LaunchLatencyCycles = 0
			be, m := setupHW(t, cfg, Epoch)
			var ev []Event
			be.SetTrace(func(e Event) {
				if e.Kind == tc.kind {
					ev = append(ev, e)
				}
			})
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
				tc.do(t, t.Shared(), t.Lane())
			}, scope.WithShared(4*32*32))
			require.NoError(t, err)
			require.Len(t, ev, 1, "one warp instruction")
			e := ev[0]
			require.Equal(t, 32, e.Lanes)
			took := e.Done - e.Issue
			want := tc.passes
			switch tc.kind {
			case pm.OpLoad:
				want += lat
			case pm.OpAtomic:
				want += lat + 1 // and a cycle to write (instruction's persistOps step)
				if tc.name == "atomic/one-word" {
					want += 31 // the lanes' atomics on one word complete a cycle apart
				}
			}
			require.Equal(t, want, took, "cycles from issue to the warp's next issue")
			st := be.LastLaunch()
			require.Equal(t, tc.passes, st.SmemPasses)
			require.Zero(t, st.Loads, "no line access")
			require.Zero(t, st.L1Misses)
			require.Zero(t, st.DRAMReadBytes)
		})
	}
}

// The SM's shared memory serves one pass per cycle to all its warps: two
// warps of one block whose 32-way conflicting loads issue together take
// twice the passes of one, while two warps on different SMs do not wait
// for each other.
func TestSharedMemoryPerSM(t *testing.T) {
	run := func(grid scope.Grid) uint64 {
		cfg := PresetVolta()
		cfg.GPU.LaunchLatencyCycles = 0
		be, m := setupHW(t, cfg, Epoch)
		var last uint64
		be.SetTrace(func(e Event) {
			if e.Kind == pm.OpLoad {
				last = max(last, e.Done)
			}
		})
		_, err := scope.Launch(m, grid, func(t *scope.Thread) {
			t.Load32(t.Shared().Add(uint64(128 * t.Lane())))
		}, scope.WithShared(4*32*32))
		require.NoError(t, err)
		return last // each run's launch starts at cycle 0
	}
	one := run(scope.Grid{Blocks: 1, Threads: 32})
	sameSM := run(scope.Grid{Blocks: 1, Threads: 64})
	twoSMs := run(scope.Grid{Blocks: 2, Threads: 32})
	t.Logf("last load back: one warp %d, two warps on one SM %d, on two SMs %d", one, sameSM, twoSMs)
	require.Equal(t, one+32, sameSM, "the second warp's 32 passes wait for the first's")
	require.Equal(t, one, twoSMs)
}

// Work holds one of the SM's gpu.schedulers execution units: up to that
// many warps of an SM compute side by side, more take turns.
func TestWorkHoldsSchedulers(t *testing.T) {
	const work = 1000
	run := func(t *testing.T, grid scope.Grid) uint64 {
		cfg := PresetVolta()
		cfg.GPU.LaunchLatencyCycles = 0
		be, m := setupHW(t, cfg, Epoch)
		_, err := scope.Launch(m, grid, func(t *scope.Thread) { t.Work(work) })
		require.NoError(t, err)
		return be.LastLaunch().Cycles
	}
	scheds := PresetVolta().GPU.Schedulers
	for _, tc := range []struct {
		name  string
		grid  scope.Grid
		turns uint64 // rounds of work the busiest SM needs
	}{
		{"one warp", scope.Grid{Blocks: 1, Threads: 32}, 1},
		{"a warp per scheduler", scope.Grid{Blocks: 1, Threads: 32 * scheds}, 1},
		{"two warps per scheduler", scope.Grid{Blocks: 1, Threads: 64 * scheds}, 2},
		{"eight warps per scheduler", scope.Grid{Blocks: 1, Threads: 256 * scheds}, 8},
		{"one warp on each of two SMs", scope.Grid{Blocks: 2, Threads: 32}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cycles := run(t, tc.grid)
			t.Logf("%d cycles", cycles)
			require.GreaterOrEqual(t, cycles, tc.turns*work)
			require.Less(t, cycles, tc.turns*work+work/4, "no more than the turns and the launch's overhead")
		})
	}
}
