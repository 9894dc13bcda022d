package workloads

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// shapeBackends are the backends the artifact-shaped workloads' correctness
// tests run on.
var shapeBackends = []string{"functional", "sbrp", "epoch"}

// newShapeMachine returns a machine on backend name: "functional", or an
// hwmodel model on the pm-near machine.
func newShapeMachine(t *testing.T, name string) *pm.Machine {
	t.Helper()
	var b pm.Backend = functional.New(pm.DefaultGPU())
	if name != "functional" {
		model, err := hwmodel.ParseModel(name)
		require.NoError(t, err)
		h, err := hwmodel.New(hwmodel.PresetPMNear(), model)
		require.NoError(t, err)
		b = h
	}
	m, err := pm.NewMachine(b)
	require.NoError(t, err)
	return m
}

// requireRecovers explores up to states crash states of w under model
// and requires every one to recover.
func requireRecovers(t *testing.T, w crash.Workload, model crash.Model, states int, seed uint64) *crash.Report {
	t.Helper()
	t.Logf("seed = %d", seed)
	rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: model, States: states, Seed: seed})
	require.NoError(t, err)
	for _, v := range rep.Violations {
		t.Logf("violation: %v", v.Err)
	}
	require.Empty(t, rep.Violations, rep.Summary())
	return rep
}

// requireBugFound explores up to 10,000 crash states of the buggy w under
// model, requires a violation of its invariant and returns it, shrunk and
// explained.
func requireBugFound(t *testing.T, w crash.Workload, model crash.Model, seed uint64) crash.Violation {
	t.Helper()
	t.Logf("seed = %d", seed)
	rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: model, States: 10000, Seed: seed, Shrink: true})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Violations, rep.Summary())
	v := rep.Violations[0]
	t.Log(v.Explanation)
	require.ErrorIs(t, v.Err, ErrInconsistent)
	return v
}

// checkCrashesAndBug explores the Tiny crash states of workload good under
// SBRP and Epoch and requires none to break recovery, then requires the
// checker to find its seeded bug, explained at the line of file holding
// marker.
func checkCrashesAndBug(t *testing.T, good, bug string, seed uint64, file, marker string) {
	for _, model := range []crash.Model{crash.SBRP, crash.Epoch} {
		t.Run(model.String(), func(t *testing.T) {
			w, err := New(good, Tiny)
			require.NoError(t, err)
			t.Log(requireRecovers(t, w, model, crashStates(), seed).Summary())

			b, err := New(bug, Tiny)
			require.NoError(t, err)
			v := requireBugFound(t, b, model, seed)
			require.Contains(t, v.Explanation, "at "+siteOf(t, file, marker))
		})
	}
}
