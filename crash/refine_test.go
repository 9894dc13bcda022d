package crash_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
	"github.com/scopedpm/scopedpm/scope"
)

// recordOne records kernel k, given a 256-byte PM region, on grid g.
func recordOne(t *testing.T, g scope.Grid, sites bool, k func(th *scope.Thread, r pm.Addr)) []record.Event {
	t.Helper()
	rec := record.New(functional.New(pm.GPULimits{}), sites)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	r, err := m.CreateRegion("r", 256)
	require.NoError(t, err)
	_, err = scope.Launch(m, g, func(th *scope.Thread) { k(th, r.Base) })
	require.NoError(t, err)
	return rec.Events()
}

// recordKernel records one thread storing a, OFence, b, then a again.
func recordKernel(t *testing.T) []record.Event {
	return recordOne(t, scope.Grid{Blocks: 1, Threads: 1}, false, func(t *scope.Thread, r pm.Addr) {
		t.Store64(r, 1)
		t.OFence()
		t.Store64(r.Add(128), 2)
		t.Store64(r, 3)
	})
}

// Refines accepts durable cycles that follow the PMO and rejects ones
// that let an ordered-after persist into the image first, unless a later
// write to the same bytes hides the lost one.
func TestRefines(t *testing.T) {
	g := crash.Build(recordKernel(t), crash.SBRP)
	require.Len(t, g.Persists, 3)
	never := uint64(math.MaxUint64)
	for _, tc := range []struct {
		name string
		acks []uint64
		ok   bool
	}{
		{"in order", []uint64{10, 20, 30}, true},
		{"same cycle", []uint64{10, 10, 10}, true},
		{"second before first", []uint64{20, 10, 30}, false},
		// No fence lies between the second and third stores.
		{"third before second", []uint64{10, 30, 20}, true},
		// The first store is never durable itself, but the third, to the
		// same word, hides it from cycle 20: {first, third} at 20.
		{"hidden by a later write", []uint64{never, 30, 20}, true},
		{"lost and not hidden", []uint64{never, 10, never}, false},
		{"hidden too late", []uint64{never, 10, 20}, false},
		{"never durable", []uint64{never, never, never}, true},
	} {
		err := crash.Refines(g, tc.acks)
		if tc.ok {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorIs(t, err, crash.ErrRefinement, tc.name)
		}
	}
	// Under None nothing but same-bytes order holds.
	require.NoError(t, crash.Refines(crash.Build(recordKernel(t), crash.None), []uint64{20, 10, 30}))
	require.Error(t, crash.Refines(g, []uint64{1}))
}

// A wrapped hwmodel (recorder, refiner, crash probe) times a kernel exactly
// like a bare one: the wrappers pass residency through.
func TestWrappedBackendSameCycles(t *testing.T) {
	run := func(wrap func(*hwmodel.Backend) pm.Backend) uint64 {
		be, err := hwmodel.New(hwmodel.PresetPMFar(), hwmodel.SBRP)
		require.NoError(t, err)
		m, err := pm.NewMachine(wrap(be))
		require.NoError(t, err)
		w := newReduction(8, 256, pm.Device)
		require.NoError(t, w.Setup(m))
		require.NoError(t, w.Run(m))
		return be.Stats().Cycles
	}
	bare := run(func(b *hwmodel.Backend) pm.Backend { return b })
	require.Equal(t, bare, run(func(b *hwmodel.Backend) pm.Backend { return record.New(b, true) }))
	require.Equal(t, bare, run(func(b *hwmodel.Backend) pm.Backend { return crash.NewRefiner(b, hwmodel.SBRP) }))
	be, err := hwmodel.New(hwmodel.PresetPMFar(), hwmodel.SBRP)
	require.NoError(t, err)
	found, ok := pm.As[*hwmodel.Backend](record.New(crash.NewRefiner(be, hwmodel.SBRP), false))
	require.True(t, ok)
	require.Same(t, be, found)
	_, ok = pm.As[pm.Storage](record.New(be, false))
	require.False(t, ok)
}

// linked is a workload where each thread writes a node and then links it;
// the invariant is that a durable link points at a durable node. Without
// the OFence between the two the checker must blame exactly that.
type linked struct{ fence bool }

func (l *linked) Name() string { return "linked" }
func (l *linked) Setup(m *pm.Machine) error {
	_, err := m.CreateRegion("nodes", 8*64)
	if err != nil {
		return err
	}
	_, err = m.CreateRegion("links", 8*64)
	return err
}
func (l *linked) Run(m *pm.Machine) error {
	nodes, _ := m.OpenRegion("nodes")
	links, _ := m.OpenRegion("links")
	flag, err := m.Alloc(pm.DeviceMem, 8)
	if err != nil {
		return err
	}
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
		if t.ID() == 40 { // a release/acquire pair elsewhere in the kernel
			t.PRel(flag, 1, pm.Device)
		}
		if t.ID() == 10 {
			for t.PAcq(flag, pm.Device) == 0 {
			}
		}
		t.Store64(nodes.Base.Add(uint64(8*t.ID())), 42)
		if l.fence {
			t.OFence()
		}
		t.Store64(links.Base.Add(uint64(8*t.ID())), 1)
	})
	return err
}
func (l *linked) Recover(*pm.Machine) error { return nil }
func (l *linked) Check(m *pm.Machine) error {
	nodes, _ := m.OpenRegion("nodes")
	links, _ := m.OpenRegion("links")
	nb, lb := make([]byte, 8*64), make([]byte, 8*64)
	if err := m.CopyOut(nodes.Base, nb); err != nil {
		return err
	}
	if err := m.CopyOut(links.Base, lb); err != nil {
		return err
	}
	for i := range 64 {
		if pm.GetLE(lb[8*i:8*i+8]) == 1 && pm.GetLE(nb[8*i:8*i+8]) != 42 {
			return fmt.Errorf("link %d points at a lost node", i)
		}
	}
	return nil
}

// The explanation of a missing OFence names the thread's own missing
// ordering, not an unrelated release of another thread.
func TestExplainMissingOFence(t *testing.T) {
	rep, err := crash.Check(&linked{fence: true}, pm.DefaultGPU(), crash.Config{Model: crash.SBRP, States: 300, Seed: 3, Shrink: true})
	require.NoError(t, err)
	require.Empty(t, rep.Violations)
	rep, err = crash.Check(&linked{}, pm.DefaultGPU(), crash.Config{Model: crash.SBRP, States: 300, Seed: 3, Shrink: true})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Violations)
	ex := rep.Violations[0].Explanation
	t.Log(ex)
	require.Contains(t, ex, "no ordering verb (OFence, DFence, ...) between them")
	require.NotContains(t, ex, "no release by")
}

// A release's own write to a PM flag persists after the persists the
// release orders (the persist buffer drains the flag behind the release
// marker; Epoch drains before writing it), under every ordering model, so
// a recovery may trust a durable flag.
func TestReleaseFlagPersistsAfterData(t *testing.T) {
	events := recordOne(t, scope.Grid{Blocks: 1, Threads: 1}, false, func(t *scope.Thread, r pm.Addr) {
		t.Store64(r, 1)
		t.PRel(r.Add(128), 1, pm.Block)
	})
	for _, model := range []crash.Model{crash.SBRP, crash.Epoch, crash.GPM, crash.ScopedBarrier, crash.Strict} {
		g := crash.Build(events, model)
		require.Len(t, g.Persists, 2)
		require.ErrorIs(t, crash.Refines(g, []uint64{20, 10}), crash.ErrRefinement, "%v", model)
		require.NoError(t, crash.Refines(g, []uint64{10, 20}), "%v", model)
	}
	require.NoError(t, crash.Refines(crash.Build(events, crash.None), []uint64{20, 10}))
}

// A device-scope persist barrier orders persists across blocks; the same
// barrier narrowed to block scope (a mutant, or a site override) orders
// only within each block, though the recorded group is still the grid.
func TestNarrowedBarrierOrdersPerBlock(t *testing.T) {
	events := recordOne(t, scope.Grid{Blocks: 2, Threads: 1}, true, func(t *scope.Thread, r pm.Addr) {
		if t.Block() == 0 {
			t.Store64(r, 1)
		}
		t.PBarrier(pm.Device)
		if t.Block() == 1 {
			t.Store64(r.Add(128), 2)
		}
	})
	g := crash.Build(events, crash.ScopedBarrier)
	require.ErrorIs(t, crash.Refines(g, []uint64{20, 10}), crash.ErrRefinement)
	var site string
	for _, e := range events {
		if e.Op.Kind == pm.OpPBarrier {
			site = e.Site
		}
	}
	narrowed := crash.Mutant{Site: site, Kind: pm.OpPBarrier, From: pm.Device, To: pm.Block, Valid: true}.Apply(events)
	require.NoError(t, crash.Refines(crash.Build(narrowed, crash.ScopedBarrier), []uint64{20, 10}))
}

// earlyLast is hwmodel with a broken Durability: once the first persist
// it reports and the last are both durable, it reports the last one
// durable a cycle before the first.
type earlyLast struct{ *hwmodel.Backend }

func (l earlyLast) Durability(fn func(a pm.Addr, size int, ack uint64)) {
	type rec struct {
		a    pm.Addr
		size int
		ack  uint64
	}
	var rs []rec
	l.Backend.Durability(func(a pm.Addr, size int, ack uint64) { rs = append(rs, rec{a, size, ack}) })
	if n := len(rs); n > 1 && rs[0].ack != math.MaxUint64 && rs[n-1].ack != math.MaxUint64 {
		rs[n-1].ack = rs[0].ack - 1
	}
	for _, r := range rs {
		fn(r.a, r.size, r.ack)
	}
}

// Under a write-back model a persist left dirty by one launch becomes
// durable in a later one, and the PMO orders it before that launch's
// persists: the refiner checks the launches as one window (the persists
// of both, one graph, CrashAt images against the image before the first),
// and catches a backend that gets the order across the launches wrong,
// which a check of the second launch alone could not see.
func TestRefinerWindowAcrossLaunches(t *testing.T) {
	for _, model := range []crash.Model{crash.WriteBackADR, crash.WriteBackPCT} {
		for _, broken := range []bool{false, true} {
			be, err := hwmodel.New(hwmodel.PresetVolta(), model)
			require.NoError(t, err)
			var inner crash.DurabilityBackend = be
			if broken {
				inner = earlyLast{be}
			}
			ref := crash.NewRefiner(inner, model)
			m, err := pm.NewMachine(ref)
			require.NoError(t, err)
			p, err := m.CreateRegion("p", 256)
			require.NoError(t, err)
			commit := func(t *scope.Thread) {
				t.MemBar()
				if model.VolatileWPQ() {
					t.PCommit()
					t.MemBar()
				}
			}
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
				t.Store64(p.Base, 1) // dirty in the L2 when the launch ends
				t.MemBar()
			})
			require.NoError(t, err)
			require.NoError(t, ref.Err())
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
				t.L2WB()
				commit(t)
				t.Store64(p.Base.Add(128), 2)
				t.CLWB(p.Base.Add(128))
				commit(t)
			})
			require.NoError(t, err)
			require.Equal(t, 2, ref.Launches())
			if broken {
				require.ErrorIs(t, ref.Err(), crash.ErrRefinement, "%v", model)
				require.ErrorContains(t, ref.Err(), "ordered before it")
				continue
			}
			require.NoError(t, ref.Err(), "%v", model)
			require.Positive(t, ref.Images())
			img, err := be.Crash()
			require.NoError(t, err)
			r, _ := img.Region("p")
			require.Equal(t, uint64(1), pm.GetLE(r.Data[:8]))
		}
	}
}
