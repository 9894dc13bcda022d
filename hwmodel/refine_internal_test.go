package hwmodel

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The refinement check can fail: with SBRP's merge rule broken (a store
// joins a buffered line across an OFence of its warp), a kernel that
// stores a, c, OFence, b, a again yields an image with the second a durable
// before c, stored before the OFence, which SBRP's PMO forbids.
func TestRefinementCatchesBrokenMerge(t *testing.T) {
	run := func(broken bool) error {
		be, err := New(PresetPMNear(), SBRP)
		require.NoError(t, err)
		be.hooks.brokenMerge = broken
		ref := crash.NewRefiner(be, SBRP)
		m, err := pm.NewMachine(ref)
		require.NoError(t, err)
		r, err := m.CreateRegion("r", 16384)
		require.NoError(t, err)
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			t.Store64(r.Base.Add(uint64(128*t.Lane())), 1)
			t.Store64(r.Base.Add(uint64(8192+128*t.Lane())), 1)
			t.OFence()
			t.Store64(r.Base.Add(uint64(4096+128*t.Lane())), 2)
			t.Store64(r.Base.Add(uint64(128*t.Lane())), 3)
		})
		require.NoError(t, err)
		return ref.Err()
	}
	require.NoError(t, run(false))
	require.ErrorIs(t, run(true), crash.ErrRefinement)
}

// The refiner checks durable verbs' return cycles, which crash images alone
// do not show: with a DFence that returns before its write-backs are acked
// (earlyFence), a kernel that stores one line per lane and fences yields
// images that are all cuts of the PMO, but the fence returned while its
// stores were not yet durable. Under both durable-fence models that time
// write-backs (Epoch, GPM), on a near and a far machine.
func TestRefinerCatchesEarlyDurableReturn(t *testing.T) {
	for _, c := range []struct {
		preset string
		model  Model
	}{{"pm-near", Epoch}, {"pm-far", Epoch}, {"pm-near", GPM}} {
		t.Run(c.preset+"/"+c.model.String(), func(t *testing.T) {
			run := func(early bool) (*crash.Refiner, error) {
				cfg, err := Preset(c.preset)
				require.NoError(t, err)
				be, err := New(cfg, c.model)
				require.NoError(t, err)
				be.hooks.earlyFence = early
				ref := crash.NewRefiner(be, c.model)
				m, err := pm.NewMachine(ref)
				require.NoError(t, err)
				r, err := m.CreateRegion("r", 8192)
				require.NoError(t, err)
				_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
					t.Store64(r.Base.Add(uint64(128*t.Lane())), 1)
					t.DFence()
				})
				require.NoError(t, err)
				return ref, ref.Err()
			}
			ref, err := run(false)
			require.NoError(t, err)
			require.Equal(t, 1, ref.ReturnsChecked())
			_, err = run(true)
			require.ErrorIs(t, err, crash.ErrRefinement)
			require.ErrorContains(t, err, "DFence")
			require.ErrorContains(t, err, "returned at cycle")
		})
	}
}

// The refiner checks a MemBar's return under a volatile WPQ (WriteBackPCT)
// against what the PCommits before it committed: with a MemBar that does
// not wait for its PCommit to drain the WPQs (earlyPCTMemBar), a kernel
// that stores one line per lane, writes it back, fences, commits and
// fences again yields images that are all cuts of the PMO, every persist
// durable by the launch's end, but the second MemBar returned while its
// committed stores were not yet durable. By write-back and by
// write-through.
func TestRefinerCatchesEarlyPCTMemBar(t *testing.T) {
	for _, wt := range []bool{false, true} {
		t.Run(fmt.Sprintf("wt=%v", wt), func(t *testing.T) {
			run := func(early bool) (*crash.Refiner, error) {
				ref := refineVoltaHooks(t, WriteBackPCT, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread, a pm.Addr) {
					p := a.Add(uint64(128 * t.Lane()))
					if wt {
						t.StoreWT64(p, 1)
					} else {
						t.Store64(p, 1)
						t.CLWB(p)
					}
					t.MemBar()
					t.PCommit()
					t.MemBar()
				}, faultHooks{earlyPCTMemBar: early})
				return ref, ref.Err()
			}
			ref, err := run(false)
			require.NoError(t, err)
			require.Equal(t, 1, ref.ReturnsChecked())
			_, err = run(true)
			require.ErrorIs(t, err, crash.ErrRefinement)
			require.ErrorContains(t, err, "MemBar")
			require.ErrorContains(t, err, "returned at cycle")
			require.ErrorContains(t, err, "a PCommit before the MemBar committed it")
		})
	}
}

// The refiner checks CPU runs' fences too: with an SFence that completes
// the cycle after it dispatches (earlySFence), a task that stores eight
// lines, writes them back and fences yields images that are all cuts of
// the PMO, but the SFence returned while its write-backs were on their way
// to the memory controller. Under the X86 and COSPlay models, at ADR and
// with a BMO.
func TestRefinerCatchesEarlySFence(t *testing.T) {
	for _, model := range []crash.Model{crash.X86, crash.COSPlay} {
		for _, bmo := range []int{0, 700} {
			t.Run(fmt.Sprintf("%v/bmo=%d", model, bmo), func(t *testing.T) {
				run := func() (*crash.Refiner, error) {
					cfg := PresetCOSPlay()
					require.NoError(t, cfg.Set(fmt.Sprintf("cpu.bmo_cycles=%d", bmo)))
					be, err := New(cfg, SBRP)
					require.NoError(t, err)
					ref := crash.NewRefiner(be, model)
					m, err := pm.NewMachine(ref)
					require.NoError(t, err)
					r := region(t, m, "r", 8*64)
					_, err = coro.Run(m, []coro.Task{func(c *coro.Ctx) {
						for i := range 8 {
							c.Store64(r.Base.Add(uint64(64*i)), uint64(i+1))
							c.CLWB(r.Base.Add(uint64(64 * i)))
						}
						c.SFence()
					}})
					require.NoError(t, err)
					return ref, ref.Err()
				}
				ref, err := run()
				require.NoError(t, err)
				require.Equal(t, 1, ref.ReturnsChecked())
				earlySFence = true
				defer func() { earlySFence = false }()
				_, err = run()
				require.ErrorIs(t, err, crash.ErrRefinement)
				require.ErrorContains(t, err, "SFence")
				require.ErrorContains(t, err, "returned at cycle")
			})
		}
	}
}
