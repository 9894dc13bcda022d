package workloads_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/workloads"
)

// gpKVS with the conventional (locked) log recovers at every cycle where
// the durable image changes, in every launch of its run, under every
// model that orders persists (None promises nothing).
func TestGPKVSConvEveryTimedCycle(t *testing.T) {
	sizes := []workloads.Size{workloads.Tiny}
	if !testing.Short() {
		sizes = append(sizes, workloads.Quick)
	}
	for _, size := range sizes {
		for _, model := range hwmodel.Models() {
			if model == hwmodel.None {
				continue
			}
			if size == workloads.Quick && model != hwmodel.SBRP {
				continue
			}
			w, err := workloads.New("gpkvs-conv", size)
			require.NoError(t, err)
			cfg := hwmodel.PresetPMNear()
			rep, err := crash.CheckTimed(w, func() (crash.TimedBackend, error) { return hwmodel.New(cfg, model) }, cfg.GPULimits(), 0, 1)
			require.NoError(t, err)
			require.Positive(t, rep.Checked)
			for _, v := range rep.Violations {
				t.Log(v.Explanation)
			}
			require.Empty(t, rep.Violations, "%v size %d: %d of %d crash cycles fail", model, size, len(rep.Violations), rep.Checked)
			t.Logf("%v size %d: %d crash cycles recover", model, size, rep.Checked)
		}
	}
}
