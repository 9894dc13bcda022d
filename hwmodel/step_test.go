package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// TestStepKeepsNoFalseLocality holds gpu.step_verbs to what the gope
// machine's L1 can keep. Each of 40 wavefronts a CU loads 64 lines of its
// own, computes for 2,000 cycles, and loads them again. In those cycles
// the CU's other 39 wavefronts bring 2,496 lines through a 256-line L1, so
// every reload misses too: the L1 misses twice per line. A step of
// several verbs times a warp's load, work and load before any other
// warp's, so at 8 verbs a step the second loads hit (1.0 misses a line).
func TestStepKeepsNoFalseLocality(t *testing.T) {
	for _, c := range []struct {
		step    string  // gpu.step_verbs ("": the preset's)
		perLine float64 // L1 misses a line
	}{{"", 2}, {"8", 1}} {
		name := "step=" + c.step
		if c.step == "" {
			name = "preset"
		}
		t.Run(name, func(t *testing.T) {
			cfg, err := Preset("gope")
			require.NoError(t, err)
			if c.step != "" {
				require.NoError(t, cfg.Set("gpu.step_verbs="+c.step))
			}
			be, m := setupHW(t, cfg, None)
			warps := cfg.GPU.SMs * cfg.GPU.MaxThreadsPerSM / cfg.GPU.WarpSize
			threads := warps * cfg.GPU.WarpSize
			line := uint64(cfg.L1.LineBytes)
			base, err := m.Alloc(pm.DeviceMem, uint64(threads)*line)
			require.NoError(t, err)
			_, err = scope.Launch(m, scope.Grid{Blocks: warps, Threads: cfg.GPU.WarpSize}, func(th *scope.Thread) {
				a := base.Add(uint64(th.ID()) * line)
				th.Load32(a)
				th.Work(2000)
				th.Load32(a)
			})
			require.NoError(t, err)
			got := float64(be.Stats().L1Misses) / float64(threads)
			t.Logf("gpu.step_verbs=%q: %.3f L1 misses a line", c.step, got)
			require.InDelta(t, c.perLine, got, 0.05, "L1 misses a line")
		})
	}
}
