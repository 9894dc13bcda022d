package workloads

import (
	"fmt"
	"strings"
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
	"accumulate": func(sc persistency.Scheme) (RestudyWorkload, error) {
		return NewAccumulate(AccumulateShape{Elements: 12, Per: 2, Threads: 2}, sc, 2, false)
	},
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
			if strings.Contains(rep.Violations[0].Explanation, "because:") {
				require.Contains(t, rep.Violations[0].Explanation, "stayed dirty in the L2")
			}

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

// The recommended durable transaction of each granularity keeps every
// workload consistent, and on a non-idempotent kernel the undo log is what
// does it: plain CTA-level epochs, and an undo scheme whose +idem skips
// the log because the kernel is (wrongly) declared idempotent, are caught;
// the correct declaration keeps the log and passes.
func TestRestudyIdempotencyDeclaration(t *testing.T) {
	const seed = 9
	t.Logf("seed = %d", seed)
	sh := AccumulateShape{Elements: 12, Per: 2, Threads: 2}
	for _, tc := range []struct {
		scheme     persistency.Scheme
		declareIdm bool
		ok         bool
	}{
		{persistency.CTASchemes[1], false, false}, // EP_C_clwb: re-running a half-durable block adds twice
		{persistency.UndoSchemes[4], false, true}, // undo_C+clwb
		{persistency.UndoSchemes[5], false, true}, // undo_C+clwb+idem, declared not idempotent: logs
		{persistency.UndoSchemes[5], true, false}, // declared idempotent: no log, caught
		{persistency.UndoSchemes[2], false, true}, // undo_C+wt
		{persistency.UndoSchemes[0], false, true}, // undo_K
	} {
		t.Run(fmt.Sprintf("%v/declared-idempotent=%v", tc.scheme, tc.declareIdm), func(t *testing.T) {
			w, err := NewAccumulate(sh, tc.scheme, 2, tc.declareIdm)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: tc.scheme.Model(), States: 10000, Seed: seed})
			require.NoError(t, err)
			t.Logf("%s: %d persists, %s, complete=%v", w.Name(), rep.Persists, rep.Summary(), rep.Complete)
			if tc.ok {
				require.Empty(t, rep.Violations)
			} else {
				require.NotEmpty(t, rep.Violations)
				require.ErrorIs(t, rep.Violations[0].Err, ErrInconsistent)
			}
		})
	}
}

// Every workload stays consistent under the durable transaction of its
// granularity.
func TestRestudyUndoCrashConsistency(t *testing.T) {
	const seed = 13
	t.Logf("seed = %d", seed)
	for _, rc := range RestudyWorkloads() {
		s := persistency.UndoSchemes[4] // undo_C+clwb
		switch rc.Category {
		case "S", "KV":
			s = persistency.UndoSchemes[0] // undo_K
		case "LL":
			s = persistency.UndoSchemes[6] // undo_L+clwb
		}
		t.Run(rc.Name+"/"+s.String(), func(t *testing.T) {
			w, err := restudyCheckShapes[rc.Name](s)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: s.Model(), States: 3000, Seed: seed})
			require.NoError(t, err)
			t.Logf("%s: %d persists, %s, complete=%v", w.Name(), rep.Persists, rep.Summary(), rep.Complete)
			require.Empty(t, rep.Violations)
		})
	}
}

// The timing model refines the persistency model: every crash image
// hwmodel's write-back GPU can produce, at any cycle of every launch, is
// one the re-study model's persist memory order allows (crash.Refines),
// for every workload under a scheme of each granularity and mechanism.
func TestRestudyTimingRefinesPMO(t *testing.T) {
	schemes := []persistency.Scheme{
		persistency.StrictSchemes[0], persistency.StrictSchemes[2], persistency.KernelSchemes[0], persistency.KernelSchemes[1],
		persistency.CTASchemes[1], persistency.CTASchemes[2], persistency.LoopSchemes[2], persistency.UndoSchemes[2],
	}
	for _, rc := range RestudyWorkloads() {
		for _, s := range schemes {
			t.Run(rc.Name+"/"+s.String(), func(t *testing.T) {
				w, err := NewRestudy(rc.Name, Tiny, s)
				require.NoError(t, err)
				be, err := hwmodel.New(hwmodel.PresetVolta(), s.Model())
				require.NoError(t, err)
				ref := crash.NewRefiner(be, s.Model())
				m, err := pm.NewMachine(ref)
				require.NoError(t, err)
				require.NoError(t, w.Setup(m))
				require.NoError(t, w.Run(m))
				require.NoError(t, ref.Err())
				require.Positive(t, ref.Launches())
				require.NoError(t, w.Check(m))
			})
		}
	}
}

// Written once, the re-study kernels also run under every other model
// hwmodel times (where MemBar acts as a DFence and the write-backs have
// nothing to do) and compute the same result.
func TestRestudyUnderOtherModels(t *testing.T) {
	for _, rc := range RestudyWorkloads() {
		for _, model := range hwmodel.Models() {
			t.Run(rc.Name+"/"+model.String(), func(t *testing.T) {
				w, err := NewRestudy(rc.Name, Tiny, rc.Recommended)
				require.NoError(t, err)
				be, err := hwmodel.New(hwmodel.PresetVolta(), model)
				require.NoError(t, err)
				m, err := pm.NewMachine(be)
				require.NoError(t, err)
				require.NoError(t, w.Setup(m))
				require.NoError(t, w.Run(m))
				require.NoError(t, w.Check(m))
			})
		}
	}
}
