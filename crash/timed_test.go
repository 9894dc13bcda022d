package crash_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
)

func TestTimedCrashes(t *testing.T) {
	for _, tc := range []struct {
		model hwmodel.Model
		cross pm.Scope
	}{
		{hwmodel.SBRP, pm.Device}, {hwmodel.Epoch, pm.Device}, {hwmodel.Strict, pm.Device}, {hwmodel.GPM, pm.Device},
	} {
		t.Run(tc.model.String(), func(t *testing.T) {
			const seed = 5
			t.Logf("seed = %d", seed)
			newBE := func() (crash.TimedBackend, error) { return hwmodel.New(hwmodel.PresetPMNear(), tc.model) }
			rep, err := crash.CheckTimed(newReduction(3, 4, tc.cross), newBE, gpu, 400, seed)
			require.NoError(t, err)
			require.Greater(t, rep.Checked, 50)
			require.Empty(t, rep.Violations, "%v", rep.Violations)
		})
	}
}

// Timed crashes span the launch: the first cycle's image has no result,
// the last one's has it. For the narrowed release, report what the timing
// model's crash points find (the PMO exploration finds the bug; whether one
// timing does depends on its flush order).
func TestTimedCrashesSpanTheRun(t *testing.T) {
	be, err := hwmodel.New(hwmodel.PresetPMNear(), hwmodel.SBRP)
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	w := newReduction(3, 4, pm.Device)
	require.NoError(t, w.Setup(m))
	require.NoError(t, w.Run(m))
	first, err := be.CrashAt(be.LastStart())
	require.NoError(t, err)
	last, err := be.CrashAt(be.Now())
	require.NoError(t, err)
	// The done flag is the launch's last slot: (blocks+1)*threads slots of
	// trees, a sum per block, the total, then done.
	done := func(img *pm.Image) byte { r, _ := img.Region("red"); return r.Data[4*((3+1)*4+3+1)] }
	require.Equal(t, byte(0), done(first))
	require.Equal(t, byte(1), done(last), "done")

	newBE := func() (crash.TimedBackend, error) { return hwmodel.New(hwmodel.PresetPMNear(), hwmodel.SBRP) }
	rep, err := crash.CheckTimed(newReduction(3, 4, pm.Block), newBE, gpu, 400, 5)
	require.NoError(t, err)
	t.Logf("narrowed release, timed crashes on SBRP pm-near: %s", rep.Summary())
}
