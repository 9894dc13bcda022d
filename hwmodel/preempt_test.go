package hwmodel

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// TestDeviceBarrierWaves holds the emulated preemption at a device-scope
// persist barrier to the GPU's slots: a grid larger than the GPU holds runs
// in waves, before the barrier and after it, as kernels split at the
// barrier would. A block swapped out at the barrier frees its slot when it
// arrives there, so the block that takes the slot starts then, not at the
// launch; once the barrier opens, a swapped-out block comes back (to its
// own SM, or another with room) no earlier than the slot it takes is free.
// Each block computes for work cycles and meets the barrier, twice; with
// one block an SM, a grid of waves x SMs blocks takes 2 x waves x work
// cycles, within 10%.
func TestDeviceBarrierWaves(t *testing.T) {
	const work = 10000
	for _, waves := range []int{1, 3} {
		t.Run(fmt.Sprintf("waves=%d", waves), func(t *testing.T) {
			cfg, err := Preset("gope")
			require.NoError(t, err)
			require.NoError(t, cfg.Set("gpu.max_blocks_per_sm=1"))
			be, m := setupHW(t, cfg, ScopedBarrier)
			blocks := waves * cfg.GPU.SMs
			res, err := scope.Launch(m, scope.Grid{Blocks: blocks, Threads: cfg.GPU.WarpSize}, func(th *scope.Thread) {
				for range 2 {
					th.Work(work)
					th.PBarrier(pm.Device)
				}
			})
			require.NoError(t, err)
			got := be.Stats().Cycles
			t.Logf("%d blocks on %d slots: %d cycles, %d preemptions", blocks, cfg.GPU.SMs, got, res.Preempted)
			require.InDelta(t, 1, float64(got)/float64(2*waves*work), 0.10, "the blocks did not run in waves")
		})
	}
}
