package examples

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// restudyCase makes a re-study workload at a size under a scheme, with the
// scheme the re-study recommends for it (Table V).
type restudyCase struct {
	name        string
	make        func(Size, persistency.Scheme) (RestudyWorkload, error)
	recommended persistency.Scheme
	// check makes the workload at a size between Tiny and Quick, whose
	// crash states are too many to enumerate: the crash tests sample
	// 10,000 of them.
	check func(persistency.Scheme) (RestudyWorkload, error)
}

var restudyCases = []restudyCase{
	{"histo", func(s Size, sc persistency.Scheme) (RestudyWorkload, error) { return NewHisto(histoShape(s), sc, 1) }, persistency.KernelSchemes[0],
		func(sc persistency.Scheme) (RestudyWorkload, error) {
			return NewHisto(HistoShape{Elements: 96, Bins: 8, Grid: scope.Grid{Blocks: 3, Threads: 4}}, sc, 2)
		}},
	{"stencil", func(s Size, sc persistency.Scheme) (RestudyWorkload, error) {
		return NewStencil(stencilShape(s), sc, 1)
	}, persistency.CTASchemes[2],
		func(sc persistency.Scheme) (RestudyWorkload, error) {
			return NewStencil(StencilShape{NX: 5, NY: 5, NZ: 4, Steps: 2, Threads: 4}, sc, 2)
		}},
	{"bfs", func(s Size, sc persistency.Scheme) (RestudyWorkload, error) { return NewBFS(bfsShape(s), sc, 1) }, persistency.LoopSchemes[1],
		func(sc persistency.Scheme) (RestudyWorkload, error) {
			return NewBFS(BFSShape{Nodes: 40, Degree: 2, Threads: 8}, sc, 2)
		}},
}

// allSchemes is every scheme of the re-study and the baseline.
func allSchemes() []persistency.Scheme {
	out := []persistency.Scheme{persistency.NVM}
	for _, g := range [][]persistency.Scheme{persistency.StrictSchemes, persistency.KernelSchemes, persistency.CTASchemes, persistency.LoopSchemes} {
		out = append(out, g...)
	}
	out = append(out, persistency.Scheme{Gran: persistency.PerCTA, Mech: persistency.CLWB, PCT: true},
		persistency.Scheme{Gran: persistency.PerCTA, Mech: persistency.L2WB, PCT: true})
	return out
}

// Every re-study workload computes the reference result under every scheme,
// on the functional backend and on hwmodel's volta preset under the
// scheme's machine.
func TestRestudyCorrectUnderEveryScheme(t *testing.T) {
	for _, rc := range restudyCases {
		for _, sc := range allSchemes() {
			t.Run(rc.name+"/"+sc.String(), func(t *testing.T) {
				for _, timed := range []bool{false, true} {
					w, err := rc.make(Tiny, sc)
					require.NoError(t, err)
					var be pm.Backend = functional.New(pm.GPULimits{})
					if timed {
						be, err = hwmodel.New(hwmodel.PresetVolta(), sc.Model())
						require.NoError(t, err)
					}
					m, err := pm.NewMachine(be)
					require.NoError(t, err)
					require.NoError(t, w.Setup(m))
					require.NoError(t, w.Run(m))
					require.NoError(t, w.Check(m))
				}
			})
		}
	}
}

// Under the scheme the re-study recommends, every explored crash state
// recovers; under the nvm baseline, and with the recommended kernels on a
// machine whose WPQ is volatile although they issue no PCommit, the
// checker finds a state that does not.
func TestRestudyCrashConsistency(t *testing.T) {
	for _, rc := range restudyCases {
		t.Run(rc.name, func(t *testing.T) {
			const seed = 5
			t.Logf("seed = %d", seed)
			w, err := rc.check(rc.recommended)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: rc.recommended.Model(), States: 10000, Seed: seed})
			require.NoError(t, err)
			t.Logf("%s under %v: %d persists, %s, complete=%v", w.Name(), rc.recommended, rep.Persists, rep.Summary(), rep.Complete)
			require.Empty(t, rep.Violations)
			require.True(t, rep.Complete || rep.Checked >= 10000)

			w, err = rc.check(persistency.NVM)
			require.NoError(t, err)
			rep, err = crash.Check(w, pm.GPULimits{}, crash.Config{Model: persistency.Restudy, States: 10000, Seed: seed, Shrink: true})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations, "the nvm baseline persists nothing in order")
			t.Log(rep.Violations[0].Explanation)
			require.ErrorIs(t, rep.Violations[0].Err, ErrInconsistent)

			if !rc.recommended.PCT {
				w, err = rc.check(rc.recommended)
				require.NoError(t, err)
				rep, err = crash.Check(w, pm.GPULimits{}, crash.Config{Model: persistency.RestudyPCT, States: 10000, Seed: seed})
				require.NoError(t, err)
				require.NotEmpty(t, rep.Violations, "without PCommit a volatile WPQ loses acknowledged write-backs")
			}
		})
	}
}
