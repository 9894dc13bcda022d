package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// TestStepKeepsNoFalseLocality holds the engine's timing to what the gope
// machine's L1 can keep. Each of 40 wavefronts a CU loads 64 lines of its
// own, computes for 2,000 cycles, and loads them again. In those cycles
// the CU's other 39 wavefronts bring 2,496 lines through a 256-line L1, so
// every reload misses too: the L1 misses twice per line. Timing a step as
// a whole (gpu.whole_steps) times a warp's load, work and load before any
// other warp's, so the second loads hit (1.0 misses a line); timed in
// clock order they miss at 8 verbs a step as at 1.
func TestStepKeepsNoFalseLocality(t *testing.T) {
	for _, c := range []struct {
		step    string  // gpu.step_verbs ("": the preset's)
		whole   bool    // gpu.whole_steps
		perLine float64 // L1 misses a line
	}{{"", false, 2}, {"1", false, 2}, {"", true, 1}, {"1", true, 2}} {
		name := "step=" + c.step
		if c.step == "" {
			name = "preset"
		}
		if c.whole {
			name += "/whole-steps"
		}
		t.Run(name, func(t *testing.T) {
			cfg, err := Preset("gope")
			require.NoError(t, err)
			if c.step != "" {
				require.NoError(t, cfg.Set("gpu.step_verbs="+c.step))
			}
			cfg.GPU.WholeSteps = c.whole
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
			t.Logf("%s: %.3f L1 misses a line", name, got)
			require.InDelta(t, c.perLine, got, 0.05, "L1 misses a line")
		})
	}
}

// TestClockOrder holds the engine's clock-order timing (the default) to
// stepping every verb: a kernel of loads, rereads after other warps'
// loads, compute, stores and block barriers takes the same cycles and L1
// misses at the presets' 8 verbs a step as at 1. Timed a step at a time
// (gpu.whole_steps), the same kernel runs several times faster on pm-near,
// since a warp's rereads hit lines the other warps' loads would have
// evicted, which shows the test can tell.
func TestClockOrder(t *testing.T) {
	for _, c := range []struct {
		preset string
		model  Model
	}{{"pm-near", SBRP}, {"pm-near", None}, {"gope", Epoch}, {"gope", None}} {
		t.Run(c.preset+"/"+c.model.String(), func(t *testing.T) {
			run := func(step string, whole bool) Stats {
				cfg, err := Preset(c.preset)
				require.NoError(t, err)
				if step != "" {
					require.NoError(t, cfg.Set("gpu.step_verbs="+step))
				}
				cfg.GPU.WholeSteps = whole
				be, m := setupHW(t, cfg, c.model)
				// Half the resident warps, in blocks of 4.
				bs := 4 * cfg.GPU.WarpSize
				blocks := cfg.GPU.SMs * cfg.GPU.MaxThreadsPerSM / bs / 2
				n := uint64(blocks * bs)
				line := uint64(cfg.L1.LineBytes)
				src, err := m.Alloc(pm.DeviceMem, n*line)
				require.NoError(t, err)
				dst := region(t, m, "dst", 4*n*8)
				_, err = scope.Launch(m, scope.Grid{Blocks: blocks, Threads: bs}, func(th *scope.Thread) {
					id := uint64(th.ID())
					for it := range uint64(4) {
						s := th.Load64(src.Add(id * line))
						s += th.Load64(src.Add((id + 37) % n * line))
						th.Work(50)
						s += th.Load64(src.Add(id * line))
						th.Store64(dst.Base.Add((it*n+id)*8), s)
						th.SyncThreads()
					}
					th.DFence()
				})
				require.NoError(t, err)
				return be.LastLaunch()
			}
			one, ord, whole := run("1", false), run("", false), run("", true)
			t.Logf("cycles: 1 verb a step %d, 8 in clock order %d, 8 whole %d; L1 misses %d, %d, %d",
				one.Cycles, ord.Cycles, whole.Cycles, one.L1Misses, ord.L1Misses, whole.L1Misses)
			require.InEpsilon(t, float64(one.Cycles), float64(ord.Cycles), 0.01, "cycles")
			require.InEpsilon(t, float64(one.L1Misses), float64(ord.L1Misses), 0.01, "L1 misses")
			if c.preset == "pm-near" {
				require.Less(t, float64(whole.Cycles), 0.5*float64(one.Cycles), "whole steps: the kernel does not tell")
			}
		})
	}
}
