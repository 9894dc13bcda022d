package crash_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
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

// A timed report names the model the backend timed (and the backend), not
// the zero model.
func TestTimedReportNamesModel(t *testing.T) {
	const seed = 5
	t.Logf("seed = %d", seed)
	// The check wants the value persisted: a crash before it is a failure.
	f := crash.Func{
		Name:  "value",
		Setup: func(m *pm.Machine) error { _, err := m.CreateRegion("v", 64); return err },
		Run: func(m *pm.Machine) error {
			r, err := m.OpenRegion("v")
			if err != nil {
				return err
			}
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { t.Store64(r.Base, 42) })
			return err
		},
		Check: func(m *pm.Machine) error {
			r, err := m.OpenRegion("v")
			if err != nil {
				return err
			}
			buf := make([]byte, 8)
			if err := m.CopyOut(r.Base, buf); err != nil {
				return err
			}
			if pm.GetLE(buf) != 42 {
				return fmt.Errorf("no value")
			}
			return nil
		},
	}
	for _, model := range []hwmodel.Model{hwmodel.SBRP, hwmodel.Epoch} {
		t.Run(model.String(), func(t *testing.T) {
			newBE := func() (crash.TimedBackend, error) { return hwmodel.New(hwmodel.PresetPMNear(), model) }
			rep, err := crash.CheckTimed(f.Workload(), newBE, gpu, 20, seed)
			require.NoError(t, err)
			require.Equal(t, model, rep.Model)
			require.NotEmpty(t, rep.Violations, rep.Summary())
			require.ErrorContains(t, rep.Err(), "value under "+model.String()+" on hwmodel/"+model.String()+"/pm-near, seed 5")
		})
	}
}
