package crash_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/workloads"
)

// handoff: thread 0 of block 0 persists a value and releases a flag;
// thread 0 of block 1 acquires it and persists a result. After a crash, a
// persisted result needs the value: the pair must be device scope. The
// PRel and PAcq scopes are the test's.
func handoff(rel, acq pm.Scope) crash.Func {
	return crash.Func{
		Name:  fmt.Sprintf("handoff(rel=%v,acq=%v)", rel, acq),
		Setup: func(m *pm.Machine) error { _, err := m.CreateRegion("h", 64); return err },
		Run: func(m *pm.Machine) error {
			r, err := m.OpenRegion("h")
			if err != nil {
				return err
			}
			value, flag, result := r.Base, r.Base.Add(8), r.Base.Add(16)
			_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 1}, func(t *scope.Thread) {
				if t.Block() == 0 {
					t.Store64(value, 42) // handoff: value
					t.PRel(flag, 1, rel) // handoff: release
					return
				}
				for t.PAcq(flag, acq) != 1 { // handoff: acquire
				}
				t.Store64(result, 1) // handoff: result
			})
			return err
		},
		Check: func(m *pm.Machine) error {
			r, err := m.OpenRegion("h")
			if err != nil {
				return err
			}
			buf := make([]byte, 24)
			if err := m.CopyOut(r.Base, buf); err != nil {
				return err
			}
			if pm.GetLE(buf[16:24]) == 1 && pm.GetLE(buf[0:8]) != 42 {
				return fmt.Errorf("result persisted without its value")
			}
			return nil
		},
	}
}

// When the current scope fails, the advisor recommends the narrowest scope
// that passes, wider if need be, in agreement with the violation report.
func TestAdviseWidensAFailingScope(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rel, acq pm.Scope
		want     map[pm.OpKind]pm.Scope
	}{
		{"narrow release", pm.Block, pm.Device, map[pm.OpKind]pm.Scope{pm.OpPRel: pm.Device, pm.OpPAcq: pm.Device}},
		{"narrow acquire", pm.Device, pm.Block, map[pm.OpKind]pm.Scope{pm.OpPRel: pm.Device, pm.OpPAcq: pm.Device}},
		{"both narrow", pm.Block, pm.Block, map[pm.OpKind]pm.Scope{pm.OpPRel: pm.Device, pm.OpPAcq: pm.Device}},
		{"both right", pm.Device, pm.Device, map[pm.OpKind]pm.Scope{pm.OpPRel: pm.Device, pm.OpPAcq: pm.Device}},
		{"system", pm.System, pm.System, map[pm.OpKind]pm.Scope{pm.OpPRel: pm.Device, pm.OpPAcq: pm.Device}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const seed = 5
			t.Logf("seed = %d", seed)
			f := handoff(tc.rel, tc.acq)
			cfg := crash.Config{Model: crash.SBRP, States: 200, Seed: seed}
			rep, err := crash.CheckFunc(f, cfg)
			require.NoError(t, err)
			broken := tc.rel < pm.Device || tc.acq < pm.Device
			require.Equal(t, broken, len(rep.Violations) > 0, rep.Summary())
			if broken {
				require.Contains(t, rep.Violations[0].Explanation, "need device scope")
			}
			rec, err := crash.Record(f.Workload(), pm.DefaultGPU())
			require.NoError(t, err)
			adv, err := rec.Advise(f.Workload(), cfg)
			require.NoError(t, err)
			require.Len(t, adv, 2)
			for _, a := range adv {
				t.Logf("%s at %s: current %s, floor %s, narrowest %s, recommended %s", a.Kind, a.Site, a.Current, a.Floor, a.Narrowest, a.Recommended())
				require.Equal(t, tc.want[a.Kind], a.Recommended(), "%s at %s", a.Kind, a.Site)
				require.Equal(t, broken, a.Fails, "the current scopes fail together")
			}
		})
	}
}

// twoFlags: thread 0 persists a value; after a block barrier (which orders
// no persist under SBRP) threads 1 and 2 each persist a flag. Either flag
// without the value breaks recovery, so no single later persist is to
// blame: the explanation names both.
func twoFlags() crash.Func {
	return crash.Func{
		Name:  "two-flags",
		Setup: func(m *pm.Machine) error { _, err := m.CreateRegion("f", 64); return err },
		Run: func(m *pm.Machine) error {
			r, err := m.OpenRegion("f")
			if err != nil {
				return err
			}
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 3}, func(t *scope.Thread) {
				if t.TID() == 0 {
					t.Store64(r.Base, 42) // two-flags: value
				}
				t.SyncThreads() // two-flags: barrier
				if t.TID() > 0 {
					t.Store64(r.Base.Add(uint64(8*t.TID())), 1) // two-flags: flag
				}
			})
			return err
		},
		Check: func(m *pm.Machine) error {
			r, err := m.OpenRegion("f")
			if err != nil {
				return err
			}
			buf := make([]byte, 24)
			if err := m.CopyOut(r.Base, buf); err != nil {
				return err
			}
			if (pm.GetLE(buf[8:16]) == 1 || pm.GetLE(buf[16:24]) == 1) && pm.GetLE(buf[0:8]) != 42 {
				return fmt.Errorf("a flag persisted without the value")
			}
			return nil
		},
	}
}

// The explanation names every verb to blame and every durable persist that
// got ahead of the lost one.
func TestExplanationNamesAll(t *testing.T) {
	rel, acq := siteIn(t, "// handoff: release"), siteIn(t, "// handoff: acquire")
	for _, tc := range []struct {
		name    string
		f       crash.Func
		want    []string
		notWant []string
	}{
		{"release too narrow", handoff(pm.Block, pm.Device), []string{"PRel.block at " + rel + " is too narrow", "need device scope"}, []string{"PAcq.device at " + acq + " is too narrow"}},
		{"acquire too narrow", handoff(pm.Device, pm.Block), []string{"PAcq.block at " + acq + " is too narrow", "need device scope"}, []string{"PRel.device at " + rel + " is too narrow"}},
		{"both too narrow", handoff(pm.Block, pm.Block), []string{"PRel.block at " + rel + " is too narrow, and so is PAcq.block at " + acq, "need device scope"}, nil},
		{"two later persists", twoFlags(), []string{
			"lost:    persist 0x1:0 (8 bytes) by thread 0 (block 0, warp 0, lane 0) at " + siteIn(t, "// two-flags: value"),
			"durable: any of 2 persists, each issued after it but not ordered after it:",
			"persist 0x1:8 by thread 1 (block 0, warp 0, lane 1) at " + siteIn(t, "// two-flags: flag"),
			"persist 0x1:10 by thread 2 (block 0, warp 0, lane 2) at " + siteIn(t, "// two-flags: flag"),
			"the SyncThreads at " + siteIn(t, "// two-flags: barrier") + " between them does not order them under sbrp",
		}, []string{"no single later durable persist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const seed = 3
			t.Logf("seed = %d", seed)
			rep, err := crash.CheckFunc(tc.f, crash.Config{Model: crash.SBRP, States: 500, Seed: seed})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations, rep.Summary())
			x := rep.Violations[0].Explanation
			t.Log(x)
			for _, w := range tc.want {
				require.Contains(t, x, w)
			}
			for _, w := range tc.notWant {
				require.NotContains(t, x, w)
			}
		})
	}
}

// The default strategy finds a too-narrow release in a GPU-sized
// aggregation (30 blocks of 256 threads, about 8,000 persists) within
// 1,000 states: growing prefixes, which cannot lose a persist ahead of a
// later one, get only a small share of the budget.
func TestMixedFindsNarrowReleaseAtScale(t *testing.T) {
	if testing.Short() && raceEnabled {
		t.Skip("-short -race: 30 s under the race detector; the small tests cover the same code")
	}
	const seed = 1
	t.Logf("seed = %d", seed)
	w := workloads.NewReduction(scope.Grid{Blocks: 30, Threads: 256}, 2, pm.Block)
	// A generous budget: the bug must be found early in it, not after a
	// share of it spent on prefixes.
	rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: crash.SBRP, States: 20000, Seed: seed, Shrink: true})
	require.NoError(t, err)
	t.Log(rep.Summary(), "persists:", rep.Persists)
	require.NotEmpty(t, rep.Violations, rep.Summary())
	require.LessOrEqual(t, rep.Checked, 1000)
	require.Contains(t, rep.Violations[0].Explanation, "PRel.block at workloads/reduction.go:")
}

// siteIn returns the call site of the line of this file that ends with
// marker.
func siteIn(t *testing.T, marker string) string {
	t.Helper()
	src, err := os.ReadFile("advise_test.go")
	require.NoError(t, err)
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(l, marker) {
			return "crash/advise_test.go:" + strconv.Itoa(i+1)
		}
	}
	t.Fatalf("no line ends with %q", marker)
	return ""
}

// README's kernel pattern, with the consumers persisting what they read:
// one PRel by thread 0 after a block barrier orders only thread 0's
// persists under SBRP (the barrier orders none), so a consumer's persist
// may outlive another producer's data; a release per producer, acquired by
// its consumer, orders each pair.
func TestReadmeLaunchPattern(t *testing.T) {
	for _, tc := range []struct {
		name       string
		perThread  bool
		violations bool
	}{
		{"one release after a barrier", false, true},
		{"a release per producer", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const seed = 2
			t.Logf("seed = %d", seed)
			f := crash.Func{
				Name: "readme-launch",
				Setup: func(m *pm.Machine) error {
					if _, err := m.CreateRegion("data", 8*32); err != nil {
						return err
					}
					_, err := m.CreateRegion("copy", 8*32)
					return err
				},
				Run: func(m *pm.Machine) error {
					data, _ := m.OpenRegion("data")
					out, _ := m.OpenRegion("copy")
					flags, err := m.Alloc(pm.DeviceMem, 4*32)
					if err != nil {
						return err
					}
					_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
						slot := data.Base.Add(uint64(8 * t.TID()))
						flag := flags.Add(uint64(4 * t.TID()))
						if !tc.perThread {
							flag = flags
						}
						if t.Block() == 0 {
							t.Store64(slot, uint64(t.TID()+1))
							if tc.perThread {
								t.PRel(flag, 1, pm.Device)
								return
							}
							t.SyncThreads()
							if t.TID() == 0 {
								t.PRel(flag, 1, pm.Device)
							}
							return
						}
						for t.PAcq(flag, pm.Device) == 0 {
						}
						t.Store64(out.Base.Add(uint64(8*t.TID())), t.Load64(slot)) // the consumer persists what it read
					})
					return err
				},
				Check: func(m *pm.Machine) error {
					data, _ := m.OpenRegion("data")
					out, _ := m.OpenRegion("copy")
					for i := range 32 {
						c, _ := m.Memory().Load(out.Base.Add(uint64(8*i)), 8)
						d, _ := m.Memory().Load(data.Base.Add(uint64(8*i)), 8)
						if c != 0 && d != c {
							return fmt.Errorf("copy %d persisted, its data not", i)
						}
					}
					return nil
				},
			}
			rep, err := crash.CheckFunc(f, crash.Config{Model: crash.SBRP, States: 2000, Seed: seed})
			require.NoError(t, err)
			require.Equal(t, tc.violations, len(rep.Violations) > 0, rep.Summary())
		})
	}
}
