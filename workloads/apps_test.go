package workloads

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/internal/testkit/long"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// apps are the four SBRP applications of this package's files other than
// reduction.go.
var apps = []string{"hashmap", "multiqueue", "scan", "srad"}

var sizeNames = map[Size]string{Tiny: "tiny", Quick: "quick", Paper: "paper"}

// runFresh sets w up on a fresh functional machine and runs it.
func runFresh(t *testing.T, w crash.Workload) *pm.Machine {
	t.Helper()
	m, err := pm.NewMachine(functional.New(pm.DefaultGPU()))
	require.NoError(t, err)
	require.NoError(t, w.Setup(m))
	require.NoError(t, w.Run(m))
	return m
}

// TestAppsCorrect runs every app at every size and compares its result
// with the plain Go computation; a crash image of the finished run then
// recovers (a no-op) to the same result.
func TestAppsCorrect(t *testing.T) {
	for _, name := range apps {
		for _, size := range []Size{Tiny, Quick, Paper} {
			t.Run(name+"/"+sizeNames[size], func(t *testing.T) {
				if size == Paper && testing.Short() {
					t.Skip("paper size in -short mode")
				}
				t.Parallel()
				w, err := New(name, size)
				require.NoError(t, err)
				m := runFresh(t, w)
				require.NoError(t, w.Check(m))
				img, err := m.Crash()
				require.NoError(t, err)
				m2, err := pm.Reopen(img, functional.New(pm.DefaultGPU()))
				require.NoError(t, err)
				require.NoError(t, w.Recover(m2))
				require.NoError(t, w.Check(m2))
			})
		}
	}
}

// TestAppsUnderEveryModel runs each app, written once, on the timing
// backend under every persistency model: the models change timing, not
// results.
func TestAppsUnderEveryModel(t *testing.T) {
	for _, name := range apps {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, model := range hwmodel.Models() {
				be, err := hwmodel.New(hwmodel.PresetPMNear(), model)
				require.NoError(t, err)
				m, err := pm.NewMachine(be)
				require.NoError(t, err)
				w, err := New(name, Tiny)
				require.NoError(t, err)
				require.NoError(t, w.Setup(m), "%v", model)
				require.NoError(t, w.Run(m), "%v", model)
				require.NoError(t, w.Check(m), "%v", model)
				t.Logf("%s under %v: %d cycles", name, model, be.Now())
			}
		})
	}
}

// TestTimedCrashes crashes each app on the timing backend at cycles spread
// over its last launch and recovers the durable image on a fresh machine.
func TestTimedCrashes(t *testing.T) {
	for _, name := range apps {
		for _, model := range []hwmodel.Model{hwmodel.SBRP, hwmodel.Epoch} {
			t.Run(name+"/"+model.String(), func(t *testing.T) {
				t.Parallel()
				w, err := New(name, Tiny)
				require.NoError(t, err)
				// Run once to learn the last launch's span.
				be, err := hwmodel.New(hwmodel.PresetPMNear(), model)
				require.NoError(t, err)
				m, err := pm.NewMachine(be)
				require.NoError(t, err)
				require.NoError(t, w.Setup(m))
				require.NoError(t, w.Run(m))
				start, end := be.LastStart(), be.Now()
				const points = 16
				for i := range points + 1 {
					at := start + (end-start)*uint64(i)/points
					be, err := hwmodel.New(hwmodel.PresetPMNear(), model)
					require.NoError(t, err)
					m, err := pm.NewMachine(be)
					require.NoError(t, err)
					require.NoError(t, w.Setup(m))
					require.NoError(t, w.Run(m))
					img, err := be.CrashAt(at)
					require.NoError(t, err)
					m2, err := pm.Reopen(img, functional.New(pm.DefaultGPU()))
					require.NoError(t, err)
					require.NoError(t, w.Recover(m2), "crash at cycle %d", at)
					require.NoError(t, w.Check(m2), "crash at cycle %d", at)
				}
			})
		}
	}
}

// crashStates is how many crash states the exhaustive tests explore: 10,000,
// or 2,000 under the race detector, which makes each state ten times dearer.
func crashStates() int {
	if raceEnabled {
		return 2000
	}
	return 10000
}

// crashWorkload returns workload name at size for the crash tests. At
// Quick size scan and SRAD keep the shapes their Quick sizes had before
// they grew for the figures (pmbench -quick must agree in direction with
// paper scale: scan 120 blocks, SRAD 128x128): every explored state re-runs
// recovery, and a crash test needs a run larger than Tiny, not the figure's
// load on the persist window.
func crashWorkload(name string, size Size) (crash.Workload, error) {
	if size == Quick {
		switch name {
		case "scan", "scan-narrow":
			rel := pm.Block
			if name == "scan-narrow" {
				rel = pm.Thread
			}
			return NewScan(scope.Grid{Blocks: 4, Threads: 128}, rel, 1)
		case "srad", "srad-nofence":
			c := sradConfig(Quick)
			c.Rows, c.Cols = 64, 64
			c.SkipFence = name == "srad-nofence"
			return NewSRAD(c)
		}
	}
	return New(name, size)
}

// TestCrashStatesRecover explores 10,000 crash states (or every allowed
// one, if fewer) of each app at Tiny size and 2,000 at Quick size (whose
// every state re-runs a recovery kernel of thousands of threads; scan's and
// SRAD's in TestCrashStatesRecoverLong) under SBRP and Epoch.
func TestCrashStatesRecover(t *testing.T) {
	for _, name := range apps {
		crashStatesRecover(t, name, Tiny)
		if !testing.Short() && !longQuickCrash[name] {
			crashStatesRecover(t, name, Quick)
		}
	}
}

// longQuickCrash are the apps whose Quick-size crash exploration is left
// to the long run: each explored state re-runs the app, so scan's takes
// 12 s a model and SRAD's 54 s on two cores.
var longQuickCrash = map[string]bool{"scan": true, "srad": true}

// TestCrashStatesRecoverLong is TestCrashStatesRecover's Quick size for
// the apps the default run leaves out.
func TestCrashStatesRecoverLong(t *testing.T) {
	long.Skip(t, "scan's and SRAD's Quick-size crash states")
	for _, name := range apps {
		if longQuickCrash[name] {
			crashStatesRecover(t, name, Quick)
		}
	}
}

// crashStatesRecover checks that app name at size recovers from every
// explored crash state under SBRP and Epoch (a fifth of the states at
// Quick size).
func crashStatesRecover(t *testing.T, name string, size Size) {
	states := crashStates()
	if size == Quick {
		states /= 5
	}
	for _, model := range []crash.Model{crash.SBRP, crash.Epoch} {
		t.Run(fmt.Sprintf("%s/%s/%v", name, sizeNames[size], model), func(t *testing.T) {
			t.Parallel()
			const seed = 1
			t.Logf("seed = %d, states = %d", seed, states)
			w, err := crashWorkload(name, size)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: model, States: states, Seed: seed})
			require.NoError(t, err)
			for _, v := range rep.Violations {
				t.Logf("violation (seed %d): %v", v.Seed, v.Err)
			}
			require.Empty(t, rep.Violations)
			require.True(t, rep.Complete || rep.Checked == states, "checked %d of %d, complete %v", rep.Checked, states, rep.Complete)
			t.Logf("%s %s %v: %d persists, %s, complete %v", w.Name(), sizeNames[size], model, rep.Persists, rep.Summary(), rep.Complete)
		})
	}
}

// siteOf returns the site ("workloads/file:line") of the only line of file
// containing marker.
func siteOf(t *testing.T, file, marker string) string {
	t.Helper()
	// Sites are module-relative paths (internal/callsite): this package's
	// directory, then the file.
	wd, err := os.Getwd()
	require.NoError(t, err)
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), marker) {
			found = append(found, fmt.Sprintf("%s/%s:%d", filepath.Base(wd), file, n))
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, found, 1, "marker %q in %s", marker, file)
	return found[0]
}

// TestSeededBugsFound checks that the crash checker finds the seeded bug of
// every app, shrinks it, and names the call sites to blame.
func TestSeededBugsFound(t *testing.T) {
	for _, tc := range []struct {
		workload string
		models   []crash.Model
		want     func(t *testing.T) []string // substrings of the explanation
	}{
		{"srad-nofence", []crash.Model{crash.SBRP, crash.Epoch}, func(t *testing.T) []string {
			return []string{"durable without its noise values",
				"lost:    persist", "at " + siteOf(t, "srad.go", "// srad: noise"),
				"durable: persist", "at " + siteOf(t, "srad.go", "// srad: pixel"),
				"no ordering verb"}
		}},
		{"hashmap-nofence", []crash.Model{crash.SBRP, crash.Epoch}, func(t *testing.T) []string {
			return []string{"lost:    persist", "at " + siteOf(t, "hashmap.go", "// hashmap: log"),
				"durable: persist", "at " + siteOf(t, "hashmap.go", "// hashmap: update"),
				"no ordering verb"}
		}},
		{"multiqueue-narrow", []crash.Model{crash.SBRP}, func(t *testing.T) []string {
			return []string{"PRel.thread at " + siteOf(t, "multiqueue.go", "// multiqueue: entries to the leader"),
				"is too narrow", "need block scope"}
		}},
		{"scan-narrow", []crash.Model{crash.SBRP}, func(t *testing.T) []string {
			return []string{"PRel.thread at " + siteOf(t, "scan.go", "// scan: release"),
				"is too narrow", "need block scope", "PAcq.block at " + siteOf(t, "scan.go", "// scan: wait for the reader")}
		}},
	} {
		for _, model := range tc.models {
			t.Run(tc.workload+"/"+model.String(), func(t *testing.T) {
				const seed = 11
				t.Logf("seed = %d", seed)
				w, err := New(tc.workload, Tiny)
				require.NoError(t, err)
				rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: model, States: 10000, Seed: seed, Shrink: true})
				require.NoError(t, err)
				require.Len(t, rep.Violations, 1, rep.Summary())
				v := rep.Violations[0]
				t.Log(v.Explanation)
				require.ErrorIs(t, v.Err, ErrInconsistent)
				require.NotEmpty(t, v.Dropped)
				for _, s := range tc.want(t) {
					require.Contains(t, v.Explanation, s)
				}
			})
		}
	}
	// The scoped bugs are scope bugs only: under Epoch the scope does not
	// matter and the narrowed kernels are safe.
	for _, name := range []string{"multiqueue-narrow", "scan-narrow"} {
		w, err := New(name, Tiny)
		require.NoError(t, err)
		rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: crash.Epoch, States: 10000, Seed: 3})
		require.NoError(t, err)
		require.Empty(t, rep.Violations, name)
	}
}

// TestSeededBugsFoundAtQuick checks that the seeded bugs are also found in
// the larger Quick runs (explanations there may be less specific).
func TestSeededBugsFoundAtQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestSeededBugsFound finds them at Tiny size")
	}
	for _, name := range []string{"srad-nofence", "hashmap-nofence", "multiqueue-narrow", "scan-narrow"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const seed = 5
			t.Logf("seed = %d", seed)
			w, err := crashWorkload(name, Quick)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: crash.SBRP, States: 10000, Seed: seed})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations, rep.Summary())
			t.Logf("%s after %d states: %v", name, rep.Checked, rep.Violations[0].Err)
		})
	}
}

// TestMutantsAndAdvice runs mutation analysis and the scope advisor on the
// Tiny scan and multiqueue: narrowing the block-scope release or dropping
// the OFence ordering a thread's persists is caught, and the advisor keeps
// block scope for the releases that hand data to another thread.
func TestMutantsAndAdvice(t *testing.T) {
	for _, tc := range []struct {
		name, relMarker, relFile string
	}{
		{"scan", "// scan: release", "scan.go"},
		{"multiqueue", "// multiqueue: entries to the leader", "multiqueue.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(tc.name, Tiny)
			require.NoError(t, err)
			rec, err := crash.Record(w, pm.DefaultGPU())
			require.NoError(t, err)
			cfg := crash.Config{Model: crash.SBRP, States: 3000, Seed: 3}
			res, err := rec.Mutate(w, cfg)
			require.NoError(t, err)
			rel := siteOf(t, tc.relFile, tc.relMarker)
			sawRel := false
			for _, r := range res {
				t.Logf("%v killed=%v after %d states", r.Mutant, r.Killed, r.Checked)
				if r.Mutant.Kind == pm.OpPRel && r.Mutant.Site == rel {
					sawRel = true
					require.True(t, r.Killed, "%v", r.Mutant)
				}
			}
			require.True(t, sawRel)
			adv, err := rec.Advise(w, cfg)
			require.NoError(t, err)
			for _, a := range adv {
				t.Logf("%s %s at %s -> %s", a.Kind, a.Current, a.Site, a.Narrowest)
				if a.Site == rel && a.Kind == pm.OpPRel {
					require.Equal(t, pm.Block, a.Narrowest)
				}
			}
		})
	}
}

// TestBadConfigs checks that invalid shapes are errors, not panics.
func TestBadConfigs(t *testing.T) {
	good := hashmapConfig(Tiny)
	for _, c := range []HashmapConfig{{}, {Buckets: 1, Slots: 2, Keys: 1, Batch: 1, Threads: 1, MaxChain: 1},
		func() HashmapConfig { c := good; c.Keys = 100; return c }(),
		func() HashmapConfig { c := good; c.MaxChain = 0; return c }()} {
		_, err := NewHashmap(c)
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	for _, c := range []SRADConfig{{}, {Rows: 2, Cols: 2, Iterations: 0, Threads: 4}, {Rows: -1, Cols: 2, Iterations: 1, Threads: 4}} {
		_, err := NewSRAD(c)
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	goodMQ := multiqueueConfig(Tiny)
	for _, c := range []MultiqueueConfig{{},
		func() MultiqueueConfig { c := goodMQ; c.Prefill = c.Capacity + 1; return c }(),
		func() MultiqueueConfig { c := goodMQ; c.RelScope = pm.Scope(99); return c }(),
		func() MultiqueueConfig { c := goodMQ; c.Queues = 1 << 13; return c }()} {
		_, err := NewMultiqueue(c)
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	_, err := NewScan(scanShape(Tiny), pm.Scope(42), 1)
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewScan(scanShape(Tiny), pm.Block, 1)
	require.NoError(t, err)

	// A kernel for a nonexistent iteration or batch is an error too.
	s := mustWorkload(NewSRAD(sradConfig(Tiny)))
	m := runFresh(t, s)
	_, _, _, err = s.kernels(m, 5, 1)
	require.ErrorIs(t, err, ErrConfig)
	h := mustWorkload(NewHashmap(hashmapConfig(Tiny)))
	m = runFresh(t, h)
	_, _, err = h.insertKernel(m, h.Batches())
	require.ErrorIs(t, err, ErrConfig)
	// Kernels on a machine without the regions fail cleanly.
	bare, err := pm.NewMachine(functional.New(pm.DefaultGPU()))
	require.NoError(t, err)
	for _, name := range apps {
		w, err := New(name, Tiny)
		require.NoError(t, err)
		require.Error(t, w.Run(bare), name)
		require.Error(t, w.Recover(bare), name)
		require.Error(t, w.Check(bare), name)
	}
}

// TestRegistry checks the registered names.
func TestRegistry(t *testing.T) {
	names := map[string]bool{}
	for _, n := range Names() {
		names[n[0]] = true
		require.NotEmpty(t, n[1])
	}
	for _, n := range []string{"hashmap", "hashmap-nofence", "multiqueue", "multiqueue-narrow", "scan", "scan-narrow", "srad", "srad-nofence", "gpkvs-sbrp", "gpkvs-sbrp-no-ofence"} {
		require.True(t, names[n], n)
		w, err := New(n, Tiny)
		require.NoError(t, err)
		require.NotEmpty(t, w.Name())
	}
}

// TestHashmapEvicts makes sure the Tiny hashmap exercises cuckoo eviction
// (an insert writing two slots), which the seeded bug needs.
func TestHashmapEvicts(t *testing.T) {
	w, err := New("hashmap", Tiny)
	require.NoError(t, err)
	rec, err := crash.Record(w, pm.DefaultGPU())
	require.NoError(t, err)
	chains := 0
	for _, e := range rec.Events {
		if e.Op.Kind == pm.OpStore && e.Op.Size > hmEntry && e.Op.Size%hmEntry == 0 {
			chains++ // a log of more than one entry
		}
	}
	require.Positive(t, chains)
}

// TestScanOutput checks what the scan writes to device memory, the
// inclusive scan of each block's inputs, on the functional backend and
// under SBRP and Epoch on hwmodel.
func TestScanOutput(t *testing.T) {
	for _, size := range []Size{Tiny, Quick} {
		backends := map[string]func() pm.Backend{
			"functional": func() pm.Backend { return functional.New(pm.DefaultGPU()) },
		}
		for _, model := range []hwmodel.Model{hwmodel.SBRP, hwmodel.Epoch} {
			backends[model.String()] = func() pm.Backend {
				be, err := hwmodel.New(hwmodel.PresetPMNear(), model)
				require.NoError(t, err)
				return be
			}
		}
		for name, be := range backends {
			t.Run(fmt.Sprintf("%s/%s", sizeNames[size], name), func(t *testing.T) {
				s, err := NewScan(scanShape(size), pm.Block, 7)
				require.NoError(t, err)
				m, err := pm.NewMachine(be())
				require.NoError(t, err)
				require.NoError(t, s.Setup(m))
				out, err := s.Output(m)
				require.NoError(t, err)
				require.Equal(t, s.Want(), out)
				require.NoError(t, s.Check(m))
			})
		}
	}
}
