package crash_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/workloads"
)

func newReduction(blocks, threads int, cross pm.Scope) *workloads.Reduction {
	return workloads.NewReduction(scope.Grid{Blocks: blocks, Threads: threads}, 2, cross)
}

var gpu = pm.GPULimits{SMs: 4, WarpSize: 4, MaxThreadsPerSM: 64, MaxBlocksPerSM: 4, MaxThreadsPerBlock: 64}

func TestCorrectReductionSurvives(t *testing.T) {
	for _, model := range []crash.Model{crash.SBRP, crash.Epoch, crash.Strict} {
		t.Run(model.String(), func(t *testing.T) {
			const seed = 7
			t.Logf("seed = %d", seed)
			rep, err := crash.Check(newReduction(3, 4, pm.Device), gpu, crash.Config{Model: model, States: 3000, Seed: seed})
			require.NoError(t, err)
			require.Empty(t, rep.Violations, "%v", rep.Violations)
			require.True(t, rep.Complete || rep.Checked == 3000, "checked %d", rep.Checked)
			require.Equal(t, 3*4+3+4+2, rep.Persists, "a slot per thread, a sum per block, the last block's tree, total and done")
		})
	}
}

func TestTooNarrowReleaseCaught(t *testing.T) {
	const seed = 11
	t.Logf("seed = %d", seed)
	rep, err := crash.Check(newReduction(3, 4, pm.Block), gpu, crash.Config{Model: crash.SBRP, States: 3000, Seed: seed, Shrink: true})
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1)
	v := rep.Violations[0]
	require.ErrorIs(t, v.Err, workloads.ErrInconsistent)
	require.Len(t, v.Dropped, 1, "shrunk to one lost persist")
	t.Log(v.Explanation)
	require.Contains(t, v.Explanation, "PRel.block at workloads/reduction.go:")
	require.Contains(t, v.Explanation, "is too narrow")
	require.Contains(t, v.Explanation, "need device scope")

	// Under Epoch the same kernel is safe: scopes do not matter there.
	rep, err = crash.Check(newReduction(3, 4, pm.Block), gpu, crash.Config{Model: crash.Epoch, States: 2000, Seed: seed})
	require.NoError(t, err)
	require.Empty(t, rep.Violations)
	// Under None nothing is ordered: even the correct kernel breaks.
	rep, err = crash.Check(newReduction(3, 4, pm.Device), gpu, crash.Config{Model: crash.None, States: 2000, Seed: seed})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Violations)
}

func TestMutationAndAdvice(t *testing.T) {
	w := newReduction(2, 4, pm.Device)
	rec, err := crash.Record(w, gpu)
	require.NoError(t, err)
	cfg := crash.Config{Model: crash.SBRP, States: 500, Seed: 3}
	res, err := rec.Mutate(w, cfg)
	require.NoError(t, err)
	killed := map[string]bool{}
	for _, r := range res {
		killed[r.Mutant.String()] = r.Killed
		t.Logf("%v killed=%v after %d states", r.Mutant, r.Killed, r.Checked)
	}
	var sawCross, sawOFence bool
	for m, k := range killed {
		switch {
		case strings.HasPrefix(m, "PRel") && strings.Contains(m, "device -> block"):
			sawCross = true
			require.True(t, k, "narrowing the cross-block release must be caught: %s", m)
		case strings.HasPrefix(m, "drop OFence"):
			sawOFence = true
			require.True(t, k, "dropping the OFence between total and done must be caught")
		}
	}
	require.True(t, sawCross && sawOFence)

	adv, err := rec.Advise(w, cfg)
	require.NoError(t, err)
	for _, a := range adv {
		t.Logf("%s %s at %s: %s -> %s", a.Kind, a.Current, a.Site, a.Current, a.Narrowest)
		if a.Current == pm.Device {
			require.Equal(t, pm.Device, a.Narrowest, "blocks communicate: persistence needs device scope")
			require.Equal(t, pm.Device, a.Recommended())
		}
		if a.Current == pm.Block {
			// Inside a block, block scope is what visibility needs and
			// enough for persistence (this recovery recomputes a lost
			// slot from the input the host still has, so persistence
			// alone would accept thread scope).
			require.Equal(t, pm.Block, a.Floor)
			require.LessOrEqual(t, a.Narrowest, pm.Block)
			require.Equal(t, pm.Block, a.Recommended())
		}
	}
}

func TestStatesAreValid(t *testing.T) {
	w := newReduction(2, 4, pm.Device)
	rec, err := crash.Record(w, gpu)
	require.NoError(t, err)
	counts := map[crash.Model]int{}
	for _, model := range crash.Models() {
		g := crash.Build(rec.Events, model)
		n := 0
		complete := g.Enumerate(2000, func(s crash.State) bool {
			require.NoError(t, g.Valid(s), "%v", model)
			n++
			return true
		})
		t.Logf("%v: %d persists, %d states, complete=%v", model, len(g.Persists), n, complete)
		for k := 0; k <= len(g.Persists); k++ {
			require.NoError(t, g.Valid(g.Prefix(k)))
		}
		counts[model] = n
		if model == crash.Strict {
			// Persists follow happens-before: every state keeps a prefix
			// of each thread's persists in program order.
			require.True(t, complete)
			g.Enumerate(2000, func(s crash.State) bool {
				dropped := map[int]bool{}
				for i, kept := range s.Kept {
					id := g.Nodes[g.Persists[i]].Persist.Agent.ID
					if i < len(s.Kept) {
						require.False(t, kept && dropped[id], "thread %d keeps a persist after one it lost", id)
						dropped[id] = dropped[id] || !kept
					}
				}
				return true
			})
		}
	}
	// Stronger models allow fewer states.
	require.LessOrEqual(t, counts[crash.Strict], counts[crash.SBRP])
	require.Less(t, counts[crash.Strict], counts[crash.None])
	require.LessOrEqual(t, counts[crash.SBRP], counts[crash.None])
}

// BenchmarkCheck reports crash states checked per second (each: build the
// image, reopen, run the recovery kernel, check) on the reduction workload.
func BenchmarkCheck(b *testing.B) {
	w := newReduction(4, 8, pm.Device)
	rec, err := crash.Record(w, gpu)
	require.NoError(b, err)
	g := crash.Build(rec.Events, crash.SBRP)
	states := 0
	for b.Loop() {
		rep, err := rec.Explore(w, g, crash.Config{Model: crash.SBRP, States: 1000, Seed: 1, Strategy: crash.RandomStates})
		require.NoError(b, err)
		require.Empty(b, rep.Violations)
		states += rep.Checked
	}
	b.ReportMetric(float64(states)/b.Elapsed().Seconds(), "states/s")
}

// The advisor narrows a too-wide scope inside a block and measures what it
// buys on hwmodel.
func TestAdviceSpeedup(t *testing.T) {
	size := workloads.Quick
	if testing.Short() {
		size = workloads.Tiny
	}
	w, err := workloads.New("reduction-wide", size)
	require.NoError(t, err)
	rec, err := crash.Record(w, gpu)
	require.NoError(t, err)
	adv, err := rec.Advise(w, crash.Config{Model: crash.SBRP, States: 300, Seed: 1})
	require.NoError(t, err)
	newBE := func() (pm.Backend, error) { return hwmodel.New(hwmodel.PresetPMFar(), hwmodel.SBRP) }
	require.NoError(t, crash.Speedups(w, adv, newBE))
	narrowed := 0
	for _, a := range adv {
		t.Logf("%s %s at %s: %s -> %s, speedup %.3f", a.Kind, a.Current, a.Site, a.Current, a.Recommended(), a.Speedup)
		if a.Current == pm.Device && a.Floor == pm.Block {
			require.Equal(t, pm.Block, a.Recommended(), "inside a block, block scope is enough")
			require.Greater(t, a.Speedup, 1.0)
			narrowed++
		}
		if a.Floor == pm.Device {
			require.Equal(t, pm.Device, a.Recommended())
			require.Equal(t, 1.0, a.Speedup)
		}
	}
	require.Positive(t, narrowed)
}

// SingleDrops gives, per persist, a valid state that loses that persist and
// exactly what is PMO-ordered after it, keeps every other persist issued by
// its crash point, and crashes as late as the persist can be lost: before
// the first durability fence after it, or at the end.
func TestSingleDrops(t *testing.T) {
	rec, err := crash.Record(newReduction(3, 4, pm.Device), gpu)
	require.NoError(t, err)
	for _, model := range []crash.Model{crash.SBRP, crash.Epoch, crash.Strict} {
		t.Run(model.String(), func(t *testing.T) {
			g := crash.Build(rec.Events, model)
			var fences []int
			for _, n := range g.Nodes {
				if n.Durable {
					fences = append(fences, n.Event)
				}
			}
			var states []crash.State
			require.True(t, g.SingleDrops(len(g.Persists), func(s crash.State) bool {
				states = append(states, s)
				return true
			}))
			require.NotEmpty(t, states)
			for _, s := range states {
				require.NoError(t, g.Valid(s))
				// The lost persist: the first issued one not kept.
				p, issued := -1, 0
				for i, n := range g.Persists {
					if g.Nodes[n].Event < s.Point {
						issued = i + 1
						if !s.Kept[i] && p < 0 {
							p = i
						}
					}
				}
				require.GreaterOrEqual(t, p, 0, "a state that loses nothing")
				e := g.Nodes[g.Persists[p]].Event
				for _, f := range fences {
					require.False(t, f > e && f < s.Point, "a durability fence at event %d between the persist (%d) and the crash (%d)", f, e, s.Point)
				}
				// Every other lost persist is ordered after p.
				after := map[int32]bool{g.Persists[p]: true}
				for n := g.Persists[p] + 1; int(n) < len(g.Nodes); n++ {
					for _, q := range g.Nodes[n].Preds {
						if after[q] {
							after[n] = true
							break
						}
					}
				}
				for i := range issued {
					require.Equal(t, !after[g.Persists[i]], s.Kept[i], "persist %d", i)
				}
			}
			// Fewer than the persists: that many, spread over them.
			var some int
			g.SingleDrops(3, func(crash.State) bool { some++; return true })
			require.LessOrEqual(t, some, 3)
			require.NotZero(t, some)
		})
	}
}
