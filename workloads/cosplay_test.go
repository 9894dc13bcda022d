package workloads

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// cpuConfigs are the six COSPlay configurations at a window of 4.
var cpuConfigs = []coro.Config{
	{Mode: coro.Baseline, Window: 1},
	{Mode: coro.Unordered, Window: 1},
	{Mode: coro.COSPlay, Window: 4},
	{Mode: coro.SBatch, Window: 4},
	{Mode: coro.StrandWeaver, Window: 1, StrandWidth: 4, StrandDepth: 4},
	{Mode: coro.FreeSwitch, Window: 4},
}

// TestCPUWorkloadsRun runs every COSPlay benchmark under every
// configuration: the invariant holds before and after, and a recovery after
// the run changes nothing.
func TestCPUWorkloadsRun(t *testing.T) {
	for _, app := range cpuApps {
		for _, cfg := range cpuConfigs {
			t.Run(app.name+"/"+cfg.Name(), func(t *testing.T) {
				sh := cpuShape(Tiny)
				sh.Tasks, sh.Config = 24, cfg
				w, err := NewCPU(app.name, sh, NoBug)
				require.NoError(t, err)
				m, err := pm.NewMachine(functional.New(pm.DefaultGPU))
				require.NoError(t, err)
				require.NoError(t, w.Setup(m))
				require.NoError(t, w.Check(m))
				require.NoError(t, w.Run(m))
				require.NoError(t, w.Check(m))
				require.NoError(t, w.Recover(m))
				require.NoError(t, w.Check(m))
				r := w.LastRun()
				require.Equal(t, sh.Tasks, r.Tasks)
				require.Positive(t, r.CLWBs)
				if cfg.Mode == coro.Unordered {
					require.Zero(t, r.Fences)
				} else {
					require.Positive(t, r.Fences)
				}
			})
		}
	}
}

func TestCPUSmokeCrash(t *testing.T) {
	for _, app := range cpuApps {
		for _, model := range []crash.Model{crash.X86, crash.COSPlay} {
			t.Run(app.name+"/"+model.String(), func(t *testing.T) {
				w, err := New("cosplay-"+app.name, Tiny)
				require.NoError(t, err)
				start := time.Now()
				rep, err := crash.Check(w, pm.DefaultGPU, crash.Config{Model: model, States: 2000, Seed: 1})
				require.NoError(t, err)
				t.Log(rep.Summary(), rep.Persists, time.Since(start))
				for _, v := range rep.Violations {
					t.Log(v.Err)
				}
				require.Empty(t, rep.Violations)
			})
		}
	}
	_ = fmt.Sprint
}

func TestCPUSmokeBugs(t *testing.T) {
	for _, app := range []string{"sps", "pc", "tatp", "tpcc", "cq4"} {
		for _, bug := range []string{"no-cfence", "no-log-clwb"} {
			for _, model := range []crash.Model{crash.X86, crash.COSPlay} {
				t.Run(app+"/"+bug+"/"+model.String(), func(t *testing.T) {
					w, err := New("cosplay-"+app+"-"+bug, Tiny)
					require.NoError(t, err)
					rep, err := crash.Check(w, pm.DefaultGPU, crash.Config{Model: model, States: 10000, Seed: 1, Shrink: true})
					require.NoError(t, err)
					t.Log(rep.Summary())
					require.NotEmpty(t, rep.Violations)
					t.Log(rep.Violations[0].Explanation)
				})
			}
		}
	}
}
