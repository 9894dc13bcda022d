package hwmodel_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// A lock handed from warp to warp costs time: more warps contending for one
// spin lock take longer than one, and atomics on one word serialize.
func TestAtomicsSerialize(t *testing.T) {
	run := func(blocks int) uint64 {
		cfg := hwmodel.PresetPMNear()
		cfg.GPU.LaunchLatencyCycles = 0 // compare the kernels' own cycles
		be, err := hwmodel.New(cfg, hwmodel.SBRP)
		require.NoError(t, err)
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		lock, err := m.Alloc(pm.DeviceMem, 16)
		require.NoError(t, err)
		res, err := scope.Launch(m, scope.Grid{Blocks: blocks, Threads: 1}, func(t *scope.Thread) {
			for t.AtomicCAS32(lock, 0, 1, pm.Device) != 0 {
			}
			t.Store32(lock.Add(8), t.Load32(lock.Add(8))+1)
			t.Work(100)
			t.AtomicExch32(lock, 0, pm.Device)
		})
		require.NoError(t, err)
		v, err := m.Memory().Load(lock.Add(8), 4)
		require.NoError(t, err)
		require.Equal(t, uint64(blocks), v)
		return res.Stats.Cycles
	}
	one, many := run(1), run(16)
	t.Logf("1 holder: %d cycles, 16 in turn: %d cycles", one, many)
	require.Greater(t, many, 8*one/2, "16 critical sections of 100 cycles cannot overlap")
	require.GreaterOrEqual(t, many, uint64(16*100))
}

// One word written by many warps in turn (some of them waiting on DFence):
// at no crash cycle does the durable image go back to an older value once a
// newer one was durable, and the last value is durable at the end.
func TestDurableValueNeverGoesBack(t *testing.T) {
	for _, model := range []hwmodel.Model{hwmodel.SBRP, hwmodel.Epoch, hwmodel.None} {
		be, err := hwmodel.New(hwmodel.PresetPMFar(), model)
		require.NoError(t, err)
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		r, err := m.CreateRegion("r", 128)
		require.NoError(t, err)
		turn, err := m.Alloc(pm.DeviceMem, 4)
		require.NoError(t, err)
		const warps = 12
		_, err = scope.Launch(m, scope.Grid{Blocks: warps, Threads: 32}, func(t *scope.Thread) {
			if t.Lane() != 0 {
				return
			}
			w := uint32(t.Block())
			for t.PAcq(turn, pm.Device) != w {
			}
			t.Store64(r.Base, uint64(w+1))
			if w%3 == 0 {
				t.DFence() // some writers run far ahead in simulated time
			}
			t.PRel(turn, w+1, pm.Device)
		})
		require.NoError(t, err)
		var last uint64
		for c := be.LastStart(); ; c = min(c+7, be.Now()) {
			img, err := be.CrashAt(c)
			require.NoError(t, err)
			ri, _ := img.Region("r")
			v := pm.GetLE(ri.Data[:8])
			require.GreaterOrEqual(t, v, last, "%s: cycle %d shows %d after %d", model, c, v, last)
			last = v
			if c == be.Now() {
				break
			}
		}
		require.Equal(t, uint64(warps), last, model.String())
	}
}

// The lanes of one warp adding to one word do it in one instruction, the
// memory completing their atomics a cycle apart; a spin lock handed from
// lane to lane still costs the lanes their turns: instructions of their own.
func TestWarpAtomicsOnOneWord(t *testing.T) {
	run := func(t *testing.T, lanes int, lock bool) (events []hwmodel.Event) {
		cfg := hwmodel.PresetVolta()
		cfg.GPU.LaunchLatencyCycles = 0
		be, err := hwmodel.New(cfg, hwmodel.Epoch)
		require.NoError(t, err)
		be.SetTrace(func(e hwmodel.Event) {
			if e.Kind == pm.OpAtomic {
				events = append(events, e)
			}
		})
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		w, err := m.Alloc(pm.DeviceMem, 16)
		require.NoError(t, err)
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: lanes}, func(t *scope.Thread) {
			if !lock {
				t.AtomicAdd32(w, 1, pm.Device)
				return
			}
			for t.AtomicCAS32(w, 0, 1, pm.Device) != 0 {
			}
			t.Store32(w.Add(8), t.Load32(w.Add(8))+1)
			t.AtomicExch32(w, 0, pm.Device)
		})
		require.NoError(t, err)
		counter := w
		if lock {
			counter = w.Add(8)
		}
		v, err := m.Memory().Load(counter, 4)
		require.NoError(t, err)
		require.Equal(t, uint64(lanes), v)
		return events
	}
	t.Run("add", func(t *testing.T) {
		one, all := run(t, 1, false), run(t, 32, false)
		require.Len(t, one, 1)
		require.Len(t, all, 1, "one instruction")
		require.Equal(t, 32, all[0].Lanes)
		require.Equal(t, one[0].Done-one[0].Issue+31, all[0].Done-all[0].Issue, "a cycle per further lane")
	})
	t.Run("lock", func(t *testing.T) {
		// A lane's CAS can take the lock only once the previous holder's
		// Exch has written it: the lanes take turns, each handoff at
		// least one atomic round trip after the last.
		span := func(ev []hwmodel.Event) uint64 { return ev[len(ev)-1].Done - ev[0].Issue }
		one, four := run(t, 1, true), run(t, 4, true)
		trip := uint64(math.MaxUint64)
		for _, e := range four {
			trip = min(trip, e.Done-e.Issue)
		}
		t.Logf("one lane: %d atomic instructions in %d cycles; four: %d in %d; shortest atomic %d", len(one), span(one), len(four), span(four), trip)
		require.Greater(t, len(four), len(one))
		require.GreaterOrEqual(t, span(four), span(one)+3*trip, "three more turns of the lock")
	})
}

// An atomic takes effect in time order with other warps' atomics: a warp
// whose atomic follows a long load must not take the counter before a warp
// whose atomic issues while that load is still out, nor make it wait. (A step's verbs take
// effect when the step runs; scope ends the step before an atomic, so the
// atomic runs once the warp's clock has reached it.)
func TestAtomicsInTimeOrder(t *testing.T) {
	cfg := hwmodel.PresetVolta()
	cfg.GPU.LaunchLatencyCycles = 0
	be, err := hwmodel.New(cfg, hwmodel.Epoch)
	require.NoError(t, err)
	ev := map[int]hwmodel.Event{}
	be.SetTrace(func(e hwmodel.Event) {
		if e.Kind == pm.OpAtomic {
			ev[e.Warp] = e
		}
	})
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	far, err := m.Alloc(pm.DeviceMem, 8) // never cached: a miss to memory
	require.NoError(t, err)
	x, err := m.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	got := make([]uint32, 2)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 64}, func(t *scope.Thread) {
		if t.Lane() != 0 {
			return
		}
		w := t.TID() / 32
		if w == 0 {
			t.Load64(far)
		}
		got[w] = t.AtomicAdd32(x, 1, pm.Device)
	})
	require.NoError(t, err)
	a, b := ev[0], ev[1]
	t.Logf("warp 0's atomic (after its load): %d-%d, old %d; warp 1's: %d-%d, old %d", a.Issue, a.Done, got[0], b.Issue, b.Done, got[1])
	require.Equal(t, []uint32{1, 0}, got, "warp 1 took the counter first")
	require.Less(t, b.Issue, a.Issue)
	require.Less(t, b.Done, a.Done, "warp 1's atomic did not wait for warp 0's")
}
