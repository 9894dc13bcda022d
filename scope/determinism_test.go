package scope_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
	"github.com/scopedpm/scopedpm/scope"
)

// mixedKernel exercises barriers, atomics, spins and persists, so that the
// schedule matters.
func mixedRun(t *testing.T, seed uint64) ([]record.Event, *pm.Image, scope.Result) {
	t.Helper()
	rec := record.New(functional.New(pm.GPULimits{SMs: 2, WarpSize: 8, MaxThreadsPerSM: 64, MaxBlocksPerSM: 2, MaxThreadsPerBlock: 64}), true)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	const blocks, bs = 6, 24
	data, err := m.CreateRegion("data", 8*blocks*bs)
	require.NoError(t, err)
	ctl, err := m.Alloc(pm.DeviceMem, 64)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(seed, 0))
	work := make([]uint64, blocks*bs)
	for i := range work {
		work[i] = rng.Uint64N(5)
	}
	res, err := scope.Launch(m, scope.Grid{Blocks: blocks, Threads: bs}, func(t *scope.Thread) {
		me := data.Base.Add(uint64(8 * t.ID()))
		for range work[t.ID()] {
			t.Store64(me, t.Load64(me)+1)
		}
		t.OFence()
		t.SyncThreads()
		ticket := t.AtomicAdd32(ctl, 1, pm.Device)
		t.Store64(me, t.Load64(me)<<8|uint64(ticket%256))
		if t.Block() == 0 && t.TID() == 0 {
			t.PRel(ctl.Add(8), 1, pm.Device)
		}
		for t.PAcq(ctl.Add(8), pm.Device) == 0 {
		}
		t.DFence()
	})
	require.NoError(t, err)
	img, err := m.Crash()
	require.NoError(t, err)
	return rec.Events(), img, res
}

func TestDeterminism(t *testing.T) {
	seed := uint64(20261122)
	t.Logf("seed = %d", seed)
	ev1, img1, res1 := mixedRun(t, seed)
	ev2, img2, res2 := mixedRun(t, seed)
	require.Equal(t, res1, res2)
	require.True(t, img1.Equal(img2))
	require.Equal(t, len(ev1), len(ev2))
	for i := range ev1 {
		require.Equal(t, ev1[i].String(), ev2[i].String(), "event %d", i)
	}
	verbs, barriers := 0, 0
	for _, e := range ev1 {
		if e.Group != nil {
			barriers++
		} else {
			verbs++
		}
	}
	require.Equal(t, uint64(verbs), res1.Verbs)
	require.Equal(t, 6, barriers, "one SyncThreads per block")
	require.Contains(t, ev1[0].Site, "determinism_test.go:")
}

func TestCrashAndReopen(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	r, err := m.CreateRegion("log", 4096)
	require.NoError(t, err)
	vol, err := m.Alloc(pm.DeviceMem, 4096)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 4, Threads: 128}, func(t *scope.Thread) {
		t.Store64(r.Base.Add(uint64(8*t.ID())), uint64(t.ID())*3+1)
		t.Store64(vol.Add(uint64(8*t.ID())), 9)
		t.DFence()
	})
	require.NoError(t, err)
	img, err := m.Crash()
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(*scope.Thread) {})
	require.ErrorIs(t, err, pm.ErrCrashed)

	m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	r2, err := m2.OpenRegion("log")
	require.NoError(t, err)
	require.Equal(t, r.Base, r2.Base)
	_, err = m2.Memory().Lookup(vol)
	require.ErrorIs(t, err, pm.ErrUnmapped, "volatile memory does not survive a crash")
	sum, err := m2.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	_, err = scope.Launch(m2, scope.Grid{Blocks: 1, Threads: 512}, func(t *scope.Thread) {
		t.AtomicAdd64(sum, t.Load64(r2.Base.Add(uint64(8*t.ID()))), pm.Device)
	})
	require.NoError(t, err)
	got, err := m2.Memory().Load(sum, 8)
	require.NoError(t, err)
	require.Equal(t, uint64(3*511*512/2+512), got)
	img2, err := m2.Crash()
	require.NoError(t, err)
	require.True(t, img.Equal(img2), "the reopened machine sees exactly the durable image")
}

func TestDeviceBarrierPreemption(t *testing.T) {
	// 16 blocks, room for 2 at a time: the device-scope PBarrier needs the
	// waiting blocks swapped out so the rest can start.
	lim := pm.GPULimits{SMs: 1, WarpSize: 32, MaxThreadsPerSM: 64, MaxBlocksPerSM: 2, MaxThreadsPerBlock: 64}
	m := newMachine(t, lim)
	a, err := m.CreateRegion("a", 8*16*32)
	require.NoError(t, err)
	out, err := m.Alloc(pm.DeviceMem, 8*16*32)
	require.NoError(t, err)
	const n = 16 * 32
	res, err := scope.Launch(m, scope.Grid{Blocks: 16, Threads: 32}, func(t *scope.Thread) {
		t.Store64(a.Base.Add(uint64(8*t.ID())), uint64(t.ID()))
		t.PBarrier(pm.Device)
		// After the barrier every thread sees every other thread's store.
		t.Store64(out.Add(uint64(8*t.ID())), t.Load64(a.Base.Add(uint64(8*((t.ID()+200)%n)))))
	})
	require.NoError(t, err)
	require.Greater(t, res.Preempted, 0)
	require.LessOrEqual(t, res.PeakResident, 64)
	buf := make([]byte, 8*n)
	require.NoError(t, m.CopyOut(out, buf))
	for i := range n {
		v := pm.GetLE(buf[8*i : 8*i+8])
		require.Equal(t, uint64((i+200)%n), v, "thread %d", i)
	}
}

func TestWarpBarrier(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	a, err := m.Alloc(pm.DeviceMem, 4*64)
	require.NoError(t, err)
	out, err := m.Alloc(pm.DeviceMem, 4*64)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 64}, func(t *scope.Thread) {
		t.Store32(a.Add(uint64(4*t.TID())), uint32(t.TID()+1))
		t.PBarrier(pm.Warp)
		peer := t.WarpInBlock()*32 + (t.Lane()+1)%32
		t.Store32(out.Add(uint64(4*t.TID())), t.Load32(a.Add(uint64(4*peer))))
	})
	require.NoError(t, err)
	got := u32s(t, m, out, 64)
	for i, v := range got {
		require.Equal(t, uint32((i/32)*32+(i%32+1)%32+1), v)
	}
}
