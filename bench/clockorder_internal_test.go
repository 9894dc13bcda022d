package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// TestClockOrderKeepsBarriers runs gpKVS (quick size), whose warps meet
// at a warp barrier in the step after a block barrier, at the presets' 8
// verbs a step and at 1: timed in clock order, the cycles are the same.
// A warp barrier applied before the block barrier its warp still waited
// at took gpKVS from 44,856 cycles to 50,622 under SBRP (before gpKVS
// cleared its log after the commit; 51,716 with the clear).
func TestClockOrderKeepsBarriers(t *testing.T) {
	for _, model := range []hwmodel.Model{hwmodel.SBRP, hwmodel.Epoch} {
		t.Run(model.String(), func(t *testing.T) {
			run := func(set []string) uint64 {
				o := Options{Quick: true, Set: set}
				w, err := workloads.New("gpkvs-sbrp", o.workloadSize())
				require.NoError(t, err)
				be, err := o.backend("pm-near", model, nil)
				require.NoError(t, err)
				m, err := pm.NewMachine(be)
				require.NoError(t, err)
				require.NoError(t, w.Setup(m))
				t0 := be.Now()
				require.NoError(t, w.Run(m))
				require.NoError(t, w.Check(m))
				return be.Now() - t0
			}
			eight, one := run(nil), run([]string{"gpu.step_verbs=1"})
			t.Logf("%s: %d cycles at 8 verbs a step, %d at 1", model, eight, one)
			require.Equal(t, one, eight)
		})
	}
}
