package workloads

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/internal/testkit/long"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// kernelSite returns "btree/kernel.go:N" (the module-relative site) of the line of ../btree/kernel.go that
// holds marker.
func kernelSite(t *testing.T, marker string) string {
	t.Helper()
	f, err := os.Open("../btree/kernel.go")
	require.NoError(t, err)
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), marker) {
			found = append(found, fmt.Sprintf("btree/kernel.go:%d", n))
		}
	}
	require.Len(t, found, 1)
	return found[0]
}

var btreeWorkloads = []string{"btree", "btree-alg1"}

// TestBTreeCorrect runs the B+tree workloads at every size: the tree
// passes Check with both batches; a crash image of the finished run
// recovers (committing the batch) to the same tree.
func TestBTreeCorrect(t *testing.T) {
	for _, name := range btreeWorkloads {
		for _, size := range []Size{Tiny, Quick, Paper} {
			t.Run(name+"/"+sizeNames[size], func(t *testing.T) {
				if size == Paper && testing.Short() {
					t.Skip("paper size in -short mode")
				}
				w, err := New(name, size)
				require.NoError(t, err)
				m := runFresh(t, w)
				require.NoError(t, w.Check(m)) // the batch is not committed yet: batch 2's content
				img, err := m.Crash()
				require.NoError(t, err)
				m2, err := pm.Reopen(img, functional.New(pm.DefaultGPU()))
				require.NoError(t, err)
				require.NoError(t, w.Recover(m2))
				require.NoError(t, w.Check(m2))
				bt := w.(*BTree)
				require.Len(t, bt.Want(3), mustLen(t, m2))
			})
		}
	}
}

func mustLen(t *testing.T, m *pm.Machine) int {
	tr, err := openTree(m)
	require.NoError(t, err)
	require.Equal(t, uint64(3), tr.Batches())
	return tr.Len()
}

// TestBTreeCrashStates explores 10,000 crash states of each B+tree
// workload at Tiny size under the ScopedBarrier model (2,000 in -short
// mode).
func TestBTreeCrashStates(t *testing.T) {
	states := crashStates()
	if testing.Short() || !long.Enabled() {
		states = 2000 // 10,000 in the long run: 13 s a variant on two cores
	}
	for _, name := range btreeWorkloads {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const seed = 1
			t.Logf("seed = %d, states = %d", seed, states)
			w, err := New(name, Tiny)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: crash.ScopedBarrier, States: states, Seed: seed})
			require.NoError(t, err)
			for _, v := range rep.Violations {
				t.Logf("violation (seed %d): %v", v.Seed, v.Err)
			}
			require.Empty(t, rep.Violations)
			require.True(t, rep.Complete || rep.Checked == states, "checked %d of %d", rep.Checked, states)
			t.Logf("%s: %d persists, %s", w.Name(), rep.Persists, rep.Summary())
		})
	}
}

// TestBTreeSeededBugs: narrowing Algorithm 2's per-level barrier to thread
// scope, or its barriers above d to block scope, is caught and shrunk to a
// lost persist; mutation analysis of the correct kernel kills the
// narrowed level barrier at its site, and the advisor keeps block scope
// there.
func TestBTreeSeededBugs(t *testing.T) {
	for _, tc := range []struct{ name, blame string }{
		{"btree-narrow", "PBarrier.thread at btree/kernel.go:"},
		{"btree-narrow-top", "PBarrier.block at btree/kernel.go:"},
	} {
		name := tc.name
		t.Run(name, func(t *testing.T) {
			const seed = 1
			t.Logf("seed = %d", seed)
			w, err := New(name, Tiny)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: crash.ScopedBarrier, States: 10000, Seed: seed, Shrink: true})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations, rep.Summary())
			v := rep.Violations[0]
			t.Log(v.Explanation)
			require.NotEmpty(t, v.Dropped)
			require.Contains(t, v.Explanation, "lost:    persist")
			// The report names the barrier, its site and the scope needed.
			require.Contains(t, v.Explanation, tc.blame)
			require.Contains(t, v.Explanation, "is too narrow")
		})
	}
	w, err := New("btree", Tiny)
	require.NoError(t, err)
	rec, err := crash.Record(w, pm.DefaultGPU())
	require.NoError(t, err)
	cfg := crash.Config{Model: crash.ScopedBarrier, States: 2000, Seed: 1}
	res, err := rec.Mutate(w, cfg)
	require.NoError(t, err)
	level := kernelSite(t, "// btree: level barrier")
	killed := false
	for _, r := range res {
		t.Logf("%v killed=%v", r.Mutant, r.Killed)
		if r.Mutant.Site == level && r.Mutant.To == pm.Thread {
			killed = r.Killed
		}
	}
	require.True(t, killed, "narrowing %s to thread scope survived", level)
	adv, err := rec.Advise(w, cfg)
	require.NoError(t, err)
	seen := false
	for _, a := range adv {
		t.Logf("%s %v: %v -> %v", a.Site, a.Kind, a.Current, a.Recommended())
		if a.Site == level {
			seen = true
			require.Equal(t, pm.Block, a.Narrowest)
		}
	}
	require.True(t, seen)
}

// TestBTreeTimedCrashes crashes the B+tree workloads on the gope machine
// under ScopedBarrier at many cycles of the insertion kernel.
func TestBTreeTimedCrashes(t *testing.T) {
	for _, name := range btreeWorkloads {
		for _, size := range []Size{Tiny, Quick} {
			t.Run(name+"/"+sizeNames[size], func(t *testing.T) {
				if size == Quick && testing.Short() {
					t.Skip("quick size in -short mode")
				}
				t.Parallel()
				w, err := New(name, size)
				require.NoError(t, err)
				cfg := hwmodel.PresetGOPE()
				newBE := func() (crash.TimedBackend, error) { return hwmodel.New(cfg, hwmodel.ScopedBarrier) }
				rep, err := crash.CheckTimed(w, newBE, cfg.GPULimits(), 200, 1)
				require.NoError(t, err)
				for _, v := range rep.Violations {
					t.Log(v.Explanation)
				}
				require.Empty(t, rep.Violations)
				require.Greater(t, rep.Checked, 100)
				t.Log(rep.Summary())
			})
		}
	}
}
