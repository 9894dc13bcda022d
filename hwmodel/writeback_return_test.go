package hwmodel

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// refineVolta runs kernel k (grid g) on the volta preset under model behind
// a refiner and returns the refiner, once the launch has ended.
func refineVolta(t *testing.T, model Model, g scope.Grid, k func(t *scope.Thread, base pm.Addr)) *crash.Refiner {
	t.Helper()
	return refineVoltaHooks(t, model, g, k, faultHooks{})
}

// refineVoltaHooks is refineVolta on a backend with hooks h.
func refineVoltaHooks(t *testing.T, model Model, g scope.Grid, k func(t *scope.Thread, base pm.Addr), h faultHooks) *crash.Refiner {
	t.Helper()
	be, err := New(PresetVolta(), model)
	require.NoError(t, err)
	be.hooks = h
	ref := crash.NewRefiner(be, model)
	m, err := pm.NewMachine(ref)
	require.NoError(t, err)
	r := region(t, m, "p", 4096)
	_, err = scope.Launch(m, g, func(t *scope.Thread) { k(t, r.Base) })
	require.NoError(t, err)
	return ref
}

// A CLWB of a line whose dirty data another warp's write-back has already
// taken (the line is clean in the L2, its write-back still on its way to
// the WPQ) must not let the warp's MemBar return before that write-back is
// acknowledged: the CLWB covers the warp's own store, which travels in it.
// Two warps store into one line, meet at a block barrier, and each writes
// the line back and fences; one of them waits first, so the other's CLWB
// takes the line (earlier in time, or earlier in the order the engine
// times the warps). hwmodel used to acknowledge the second CLWB at the L2
// and return its MemBar (and, under PCT, commit nothing with its PCommit)
// hundreds of cycles before the warp's store was durable; the refiner's
// return-time check catches that.
func TestWriteBackCLWBWaitsForInFlightWriteBack(t *testing.T) {
	for _, model := range []Model{WriteBackADR, WriteBackPCT} {
		for _, late := range []int{0, 1} {
			t.Run(fmt.Sprintf("%v/warp%d-waits", model, late), func(t *testing.T) {
				ref := refineVolta(t, model, scope.Grid{Blocks: 1, Threads: 64}, func(t *scope.Thread, a pm.Addr) {
					if t.Lane() == 0 {
						t.Store64(a.Add(uint64(8*t.Warp())), uint64(1+t.Warp()))
					}
					t.SyncThreads()
					if t.Lane() != 0 {
						return
					}
					if t.Warp() == late {
						t.Work(20) // the other warp's CLWB takes the line
					}
					t.CLWB(a)
					wbFence(t, model)
				})
				require.NoError(t, ref.Err())
				require.Equal(t, 1, ref.ReturnsChecked())
			})
		}
	}
}

// Under PCT a PCommit makes durable every write its WPQs acknowledged by
// its arrival, even one that a PCommit timed before it (the engine times
// warps a few instructions out of time order) but issued later in
// simulated time already committed. Block 0 writes through, fences,
// passes a block barrier and commits; block 1 waits, writes through,
// fences and commits: its PCommit is timed first, later in time, and
// takes block 0's write with it. hwmodel used to leave block 0's write
// durable only at block 1's commit, after block 0's MemBar had returned.
func TestWriteBackPCommitOutOfTimeOrder(t *testing.T) {
	ref := refineVolta(t, WriteBackPCT, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread, a pm.Addr) {
		if t.Lane() != 0 {
			t.SyncThreads()
			return
		}
		if t.Block() == 1 {
			t.Work(200)
			t.SyncThreads()
		}
		t.StoreWT64(a.Add(uint64(128*t.Block())), 1)
		t.MemBar()
		if t.Block() == 0 {
			t.SyncThreads()
		}
		t.PCommit()
		t.MemBar()
	})
	require.NoError(t, ref.Err())
	require.Equal(t, 1, ref.ReturnsChecked())
}

// A write-back leaves no earlier than the latest store into its line. The
// engine times warp 0 (which stores a, writes it back, fences, and stores
// b into the same line) before warp 1, which stores c into the line and
// writes it back at an earlier cycle than warp 0's store of b. hwmodel
// used to start that write-back at warp 1's cycle, carrying b, so b was
// durable before a, which warp 0's MemBar orders before it: a crash image
// the PMO forbids (the refiner's Refines check catches it).
func TestWriteBackWriteBackAfterLatestStore(t *testing.T) {
	for _, model := range []Model{WriteBackADR, WriteBackPCT} {
		t.Run(model.String(), func(t *testing.T) {
			fence := func(t *scope.Thread) { wbFence(t, model) }
			ref := refineVolta(t, model, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread, a pm.Addr) {
				if t.Lane() != 0 {
					t.SyncThreads()
					return
				}
				if t.Block() == 1 {
					t.SyncThreads()
					t.Store64(a.Add(64), 3)
					t.CLWB(a)
					fence(t)
					return
				}
				t.Work(200)
				t.Store64(a, 1)
				t.CLWB(a)
				fence(t)
				t.Store64(a.Add(32), 2)
				t.SyncThreads() // warp 1 runs here, at earlier cycles
				t.CLWB(a)
				fence(t)
			})
			require.NoError(t, ref.Err())
			require.Equal(t, 1, ref.ReturnsChecked())
		})
	}
}

// An L2WB that finds a line clean because another warp's write-back took
// it waits for that write-back if the line held a store made before the
// walk ended, even when the write-back leaves later (after a store the
// engine timed earlier but made later: TestWriteBackWriteBackAfterLatestStore).
// Warp 0 stores into a line late; warps 1 and 2 store into it
// earlier (timed after warp 0) and each write the L2 back; warp 1's walk,
// timed first, takes the line, its write-back leaving after warp 0's
// store. Warp 2's walk ends before that and finds the line clean: its
// MemBar used to return without waiting for the write-back that carries
// its store.
func TestWriteBackL2WBWaitsForLateWriteBack(t *testing.T) {
	for _, model := range []Model{WriteBackADR, WriteBackPCT} {
		t.Run(model.String(), func(t *testing.T) {
			ref := refineVolta(t, model, scope.Grid{Blocks: 3, Threads: 32}, func(t *scope.Thread, a pm.Addr) {
				if t.Lane() != 0 {
					t.SyncThreads()
					if t.Block() != 0 {
						t.SyncThreads()
					}
					return
				}
				if t.Block() == 0 {
					t.Work(400)
					t.Store64(a, 1)
					t.SyncThreads()
					return
				}
				t.SyncThreads()
				t.Store64(a.Add(uint64(8*t.Block())), 2)
				t.SyncThreads() // warps 1 and 2 store before either walks
				if t.Block() == 1 {
					t.Work(10)
				}
				t.L2WB()
				wbFence(t, model)
			})
			require.NoError(t, ref.Err())
			require.Equal(t, 1, ref.ReturnsChecked())
		})
	}
}

// A warp that finds its line taken by another warp's write-back waits for
// it even when it does not remember storing to the line (a store of an
// earlier launch, or one older than the lines it remembers): the line's
// latest write-back took its store, or an earlier one did. Thread 32
// stores a line and the launch ends with it dirty; in the next launch warp
// 0 writes the line back and warp 1 (thread 32 again) writes it back a
// little later and fences: its MemBar covers its store of the first
// launch (the refiner checks both launches as one window).
func TestWriteBackCLWBWaitsForEarlierLaunchStore(t *testing.T) {
	for _, model := range []Model{WriteBackADR, WriteBackPCT} {
		t.Run(model.String(), func(t *testing.T) {
			be, err := New(PresetVolta(), model)
			require.NoError(t, err)
			ref := crash.NewRefiner(be, model)
			m, err := pm.NewMachine(ref)
			require.NoError(t, err)
			a := region(t, m, "p", 4096).Base
			grid := scope.Grid{Blocks: 1, Threads: 64}
			_, err = scope.Launch(m, grid, func(t *scope.Thread) {
				if t.ID() == 32 {
					t.Store64(a.Add(8), 2) // dirty when the launch ends
				}
			})
			require.NoError(t, err)
			_, err = scope.Launch(m, grid, func(t *scope.Thread) {
				if t.Lane() != 0 {
					return
				}
				if t.Warp() == 1 {
					t.Work(20) // warp 0's CLWB takes the line first
				}
				t.CLWB(a)
				wbFence(t, model)
			})
			require.NoError(t, err)
			require.NoError(t, ref.Err())
			require.Equal(t, 2, ref.ReturnsChecked())
		})
	}
}

// wbFence is the re-study's durable fence: a MemBar, and under a
// volatile WPQ a PCommit and a second MemBar.
func wbFence(t *scope.Thread, model Model) {
	t.MemBar()
	if model.VolatileWPQ() {
		t.PCommit()
		t.MemBar()
	}
}
