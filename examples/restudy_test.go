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

// restudyCheckShapes makes each re-study workload at a size between Tiny
// and Quick, whose crash states are too many to enumerate for most: the
// crash tests sample 10,000 of them.
var restudyCheckShapes = map[string]func(persistency.Scheme) (RestudyWorkload, error){
	"histo": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewHisto(HistoShape{Elements: 96, Bins: 8, Grid: scope.Grid{Blocks: 3, Threads: 4}}, sc, 2)
	},
	"stencil": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewStencil(StencilShape{NX: 5, NY: 5, NZ: 4, Steps: 2, Threads: 4}, sc, 2)
	},
	"bfs": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewBFS(BFSShape{Nodes: 40, Degree: 2, Threads: 8}, sc, 2)
	},
	"sgemm": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewSGEMM(SGEMMShape{M: 6, N: 4, K: 3, Tile: 2}, sc, 2)
	},
	"spmv": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewSpMV(SpMVShape{Rows: 24, MaxPerRow: 3, Threads: 4}, sc, 2)
	},
	"lbm": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewLBM(LBMShape{NX: 4, NY: 3, Steps: 2, Threads: 4}, sc, 2)
	},
	"sad": func(sc persistency.Scheme) (RestudyWorkload, error) { return NewSAD(SADShape{W: 8, H: 8, R: 1}, sc, 2) },
	"scan": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewRSScan(ScanShape{Blocks: 3, Threads: 8}, sc, 2)
	},
	"kv-search": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewMegaKV(KVSearch, KVShape{Buckets: 8, Keys: 8, Batch: 8, Threads: 4}, sc, 2)
	},
	"kv-insert": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewMegaKV(KVInsert, KVShape{Buckets: 8, Keys: 4, Batch: 12, Threads: 4}, sc, 2)
	},
	"kv-delete": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewMegaKV(KVDelete, KVShape{Buckets: 8, Keys: 12, Batch: 4, Threads: 4}, sc, 2)
	},
	"pow-dag": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewProgPoW(true, PoWShape{Items: 6, Cache: 16, Rounds: 2, Nonces: 4, Loops: 2, Threads: 4}, sc, 2)
	},
	"pow-search": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewProgPoW(false, PoWShape{Items: 8, Cache: 16, Rounds: 2, Nonces: 24, Loops: 2, Threads: 4}, sc, 2)
	},
}

// allSchemes is every scheme of the re-study and the baseline.
func allSchemes() []persistency.Scheme {
	out := []persistency.Scheme{persistency.NVM}
	for _, g := range [][]persistency.Scheme{persistency.StrictSchemes, persistency.KernelSchemes, persistency.CTASchemes, persistency.LoopSchemes} {
		out = append(out, g...)
	}
	out = append(out, persistency.Scheme{Gran: persistency.PerCTA, Mech: persistency.CLWB, PCT: true},
		persistency.Scheme{Gran: persistency.PerCTA, Mech: persistency.L2WB, PCT: true})
	out = append(out, persistency.UndoSchemes...)
	return append(out, persistency.Scheme{Gran: persistency.PerLoop, Mech: persistency.CLWB, PCT: true, Undo: true})
}

// Every re-study workload computes the reference result under every scheme,
// on the functional backend and on hwmodel's volta preset under the
// scheme's machine.
func TestRestudyCorrectUnderEveryScheme(t *testing.T) {
	for _, rc := range RestudyWorkloads() {
		for _, sc := range allSchemes() {
			t.Run(rc.Name+"/"+sc.String(), func(t *testing.T) {
				for _, timed := range []bool{false, true} {
					w, err := NewRestudy(rc.Name, Tiny, sc)
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
	for _, rc := range RestudyWorkloads() {
		t.Run(rc.Name, func(t *testing.T) {
			check := restudyCheckShapes[rc.Name]
			require.NotNil(t, check, "no crash-check shape for %s", rc.Name)
			const seed = 5
			t.Logf("seed = %d", seed)
			w, err := check(rc.Recommended)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: rc.Recommended.Model(), States: 10000, Seed: seed})
			require.NoError(t, err)
			t.Logf("%s under %v: %d persists, %s, complete=%v", w.Name(), rc.Recommended, rep.Persists, rep.Summary(), rep.Complete)
			require.Empty(t, rep.Violations)
			require.True(t, rep.Complete || rep.Checked >= 10000)

			w, err = check(persistency.NVM)
			require.NoError(t, err)
			rep, err = crash.Check(w, pm.GPULimits{}, crash.Config{Model: persistency.Restudy, States: 10000, Seed: seed, Shrink: true})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations, "the nvm baseline persists nothing in order")
			t.Log(rep.Violations[0].Explanation)
			require.ErrorIs(t, rep.Violations[0].Err, ErrInconsistent)
			require.Contains(t, rep.Violations[0].Explanation, "stayed dirty in the L2")

			if !rc.Recommended.PCT {
				w, err = check(rc.Recommended)
				require.NoError(t, err)
				rep, err = crash.Check(w, pm.GPULimits{}, crash.Config{Model: persistency.RestudyPCT, States: 10000, Seed: seed, Shrink: true})
				require.NoError(t, err)
				require.NotEmpty(t, rep.Violations, "without PCommit a volatile WPQ loses acknowledged write-backs")
				t.Log(rep.Violations[0].Explanation)
			}
		})
	}
}
