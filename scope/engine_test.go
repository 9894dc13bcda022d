package scope_test

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
	"github.com/scopedpm/scopedpm/scope"
)

func newMachine(t testing.TB, gpu pm.GPULimits) *pm.Machine {
	t.Helper()
	m, err := pm.NewMachine(functional.New(gpu))
	require.NoError(t, err)
	return m
}

func u32s(t testing.TB, m *pm.Machine, a pm.Addr, n int) []uint32 {
	t.Helper()
	buf := make([]byte, 4*n)
	require.NoError(t, m.CopyOut(a, buf))
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(buf[4*i:])
	}
	return out
}

func putU32s(t testing.TB, m *pm.Machine, a pm.Addr, vs []uint32) {
	t.Helper()
	buf := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(buf[4*i:], v)
	}
	require.NoError(t, m.CopyIn(a, buf))
}

func TestVectorAdd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n, bs  int
		limits pm.GPULimits
	}{
		{"one-block", 32, 32, pm.DefaultGPU()},
		{"ragged", 1000, 96, pm.DefaultGPU()},
		{"few-resident", 4096, 64, pm.GPULimits{SMs: 2, WarpSize: 32, MaxThreadsPerSM: 128, MaxBlocksPerSM: 2, MaxThreadsPerBlock: 128}},
		{"warp-size-8", 300, 40, pm.GPULimits{SMs: 1, WarpSize: 8, MaxThreadsPerSM: 80, MaxBlocksPerSM: 2, MaxThreadsPerBlock: 80}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t, tc.limits)
			n := tc.n
			a, err := m.Alloc(pm.DeviceMem, uint64(4*n))
			require.NoError(t, err)
			b, err := m.Alloc(pm.DeviceMem, uint64(4*n))
			require.NoError(t, err)
			c, err := m.CreateRegion("c", uint64(4*n))
			require.NoError(t, err)
			av, bv := make([]uint32, n), make([]uint32, n)
			for i := range n {
				av[i], bv[i] = uint32(i), uint32(3*i+1)
			}
			putU32s(t, m, a, av)
			putU32s(t, m, b, bv)
			blocks := (n + tc.bs - 1) / tc.bs
			res, err := scope.Launch(m, scope.Grid{Blocks: blocks, Threads: tc.bs}, func(t *scope.Thread) {
				i := t.ID()
				if i >= n {
					return
				}
				off := uint64(4 * i)
				t.Store32(c.Base.Add(off), t.Load32(a.Add(off))+t.Load32(b.Add(off)))
			})
			require.NoError(t, err)
			require.Equal(t, uint64(3*n), res.Verbs)
			got := u32s(t, m, c.Base, n)
			for i := range n {
				require.Equal(t, av[i]+bv[i], got[i], "element %d", i)
			}
			require.LessOrEqual(t, res.PeakResident, tc.limits.SMs*tc.limits.MaxThreadsPerSM)
		})
	}
}

func TestBlockReduction(t *testing.T) {
	const blocks, bs = 7, 128
	m := newMachine(t, pm.DefaultGPU())
	in, err := m.Alloc(pm.DeviceMem, 4*blocks*bs)
	require.NoError(t, err)
	scratch, err := m.Alloc(pm.DeviceMem, 4*blocks*bs)
	require.NoError(t, err)
	out, err := m.CreateRegion("sums", 4*blocks)
	require.NoError(t, err)
	vals := make([]uint32, blocks*bs)
	want := make([]uint32, blocks)
	for i := range vals {
		vals[i] = uint32(i*7 + 3)
		want[i/bs] += vals[i]
	}
	putU32s(t, m, in, vals)
	_, err = scope.Launch(m, scope.Grid{Blocks: blocks, Threads: bs}, func(t *scope.Thread) {
		base := scratch.Add(uint64(4 * t.Block() * bs))
		me := base.Add(uint64(4 * t.TID()))
		t.Store32(me, t.Load32(in.Add(uint64(4*t.ID()))))
		t.SyncThreads()
		for s := bs / 2; s > 0; s /= 2 {
			if t.TID() < s {
				t.Store32(me, t.Load32(me)+t.Load32(base.Add(uint64(4*(t.TID()+s)))))
			}
			t.SyncThreads()
		}
		if t.TID() == 0 {
			t.Store32(out.Base.Add(uint64(4*t.Block())), t.Load32(base))
		}
	})
	require.NoError(t, err)
	require.Equal(t, want, u32s(t, m, out.Base, blocks))
}

func TestProducerConsumer(t *testing.T) {
	for _, s := range []pm.Scope{pm.Device, pm.System} {
		t.Run(s.String(), func(t *testing.T) {
			m := newMachine(t, pm.DefaultGPU())
			data, err := m.CreateRegion("data", 4*64)
			require.NoError(t, err)
			flag, err := m.Alloc(pm.DeviceMem, 4)
			require.NoError(t, err)
			out, err := m.Alloc(pm.DeviceMem, 4*64)
			require.NoError(t, err)
			// Block 0 consumes, block 1 produces: the consumer starts first and spins.
			res, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: 64}, func(t *scope.Thread) {
				if t.Block() == 1 {
					t.Store32(data.Base.Add(uint64(4*t.TID())), uint32(100+t.TID()))
					t.SyncThreads()
					if t.TID() == 0 {
						t.PRel(flag, 1, s)
					}
					return
				}
				for t.PAcq(flag, s) == 0 {
				}
				t.Store32(out.Add(uint64(4*t.TID())), t.Load32(data.Base.Add(uint64(4*t.TID()))))
			})
			require.NoError(t, err)
			got := u32s(t, m, out, 64)
			for i, v := range got {
				require.Equal(t, uint32(100+i), v)
			}
			require.Greater(t, res.Switches, uint64(64), "consumers must have parked")
		})
	}
}

func TestDeadlock(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	flag, err := m.Alloc(pm.DeviceMem, 4)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		k    scope.Kernel
		want string
	}{
		{"spin-forever", func(t *scope.Thread) {
			for t.PAcq(flag, pm.Device) == 0 {
			}
		}, "spins on PAcq.device"},
		{"half-barrier", func(t *scope.Thread) {
			if t.TID()%2 == 0 {
				t.SyncThreads()
			} else {
				for t.PAcq(flag, pm.Block) == 0 {
				}
			}
		}, "waits at SyncThreads"},
		{"reread-load", func(t *scope.Thread) {
			for t.Load32(flag) == 0 {
			}
		}, "spins on Load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: 64}, tc.k, scope.WithSpinProbe(5000))
			require.ErrorIs(t, err, scope.ErrDeadlock)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), "thread 0 (block 0")
		})
	}
}

func TestRereadIsNotDeadlock(t *testing.T) {
	// Reading one word a few times in a row with nothing else running is not a spin.
	m := newMachine(t, pm.DefaultGPU())
	a, err := m.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		sum := uint32(0)
		for range 10 {
			sum += t.Load32(a)
		}
		t.Store32(a.Add(4), sum+1)
	})
	require.NoError(t, err)
	require.Equal(t, []uint32{0, 1}, u32s(t, m, a, 2))
}

func TestKernelErrors(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	a, err := m.Alloc(pm.DeviceMem, 64)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		k    scope.Kernel
		is   []error
	}{
		{"panic", func(t *scope.Thread) {
			if t.ID() == 37 {
				panic("boom")
			}
		}, []error{scope.ErrPanic}},
		{"out-of-range", func(t *scope.Thread) { t.Store32(a.Add(64), 1) }, []error{scope.ErrFault, pm.ErrOutOfRange}},
		{"misaligned", func(t *scope.Thread) { t.Load64(a.Add(4)) }, []error{scope.ErrFault, pm.ErrMisaligned}},
		{"unmapped", func(t *scope.Thread) { t.Load8(0) }, []error{scope.ErrFault, pm.ErrUnmapped}},
		{"bad-scope", func(t *scope.Thread) { t.Fence(pm.Scope(9)) }, []error{scope.ErrBadArg}},
		{"bad-prel-scope", func(t *scope.Thread) { t.PRel(a, 1, pm.Scope(99)) }, []error{scope.ErrBadArg}},
		{"bad-pacq-scope", func(t *scope.Thread) { t.PAcq(a, pm.Scope(99)) }, []error{scope.ErrBadArg}},
		{"gather-lengths", func(t *scope.Thread) { t.Gather32(make([]uint32, 1), a, a.Add(4)) }, []error{scope.ErrBadArg}},
		{"gather-misaligned", func(t *scope.Thread) { t.Gather64(make([]uint64, 1), a.Add(4)) }, []error{scope.ErrFault, pm.ErrMisaligned}},
		{"gather128-misaligned", func(t *scope.Thread) { t.Gather128(make([][2]uint64, 1), a.Add(8)) }, []error{scope.ErrFault, pm.ErrMisaligned}},
		{"gather128-lengths", func(t *scope.Thread) { t.Gather128(make([][2]uint64, 2), a) }, []error{scope.ErrBadArg}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, tc.k)
			for _, want := range tc.is {
				require.ErrorIs(t, err, want)
			}
			if errors.Is(err, scope.ErrBadArg) {
				// A bad argument is not a memory fault, and says which.
				require.NotErrorIs(t, err, scope.ErrFault)
				require.ErrorContains(t, err, "engine_test.go:")
			}
			var ke *scope.KernelError
			require.True(t, errors.As(err, &ke))
			if tc.name == "panic" {
				require.Equal(t, 37, ke.Agent.ID)
				require.Contains(t, err.Error(), "thread 37 (block 1, warp 1, lane 5)")
				require.Contains(t, ke.Stack, "engine_test.go")
			}
		})
	}
}

func TestGeometry(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	for _, g := range []scope.Grid{{0, 32}, {1, 0}, {-1, 32}, {1, 2048}, {1 << 30, 1024}} {
		_, err := scope.Launch(m, g, func(*scope.Thread) {})
		require.ErrorIs(t, err, scope.ErrGeometry, "%+v", g)
	}
	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, nil)
	require.ErrorIs(t, err, scope.ErrBadArg)
}

// An SM holds blocks whose shared memory fits in pm.GPULimits.SharedPerSM:
// a block asking for more cannot launch, and fewer blocks are resident at
// once when each asks for much.
func TestSharedMemoryResidency(t *testing.T) {
	lim := pm.GPULimits{SMs: 1, WarpSize: 32, MaxThreadsPerSM: 2048, MaxBlocksPerSM: 32, MaxThreadsPerBlock: 1024, SharedPerSM: 64 << 10}
	for _, tc := range []struct {
		shared, resident int // bytes per block; blocks resident at the peak
	}{
		{0, 8}, {8 << 10, 8}, {16 << 10, 4}, {40 << 10, 1}, {64 << 10, 1},
	} {
		m := newMachine(t, lim)
		res, err := scope.Launch(m, scope.Grid{Blocks: 8, Threads: 32}, func(t *scope.Thread) {
			t.SyncThreads() // every thread waits once: the blocks overlap where they can
		}, scope.WithShared(tc.shared))
		require.NoError(t, err, "%d bytes", tc.shared)
		require.Equal(t, tc.resident*32, res.PeakResident, "%d bytes per block", tc.shared)
	}
	m := newMachine(t, lim)
	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(*scope.Thread) {}, scope.WithShared(64<<10+1))
	require.ErrorIs(t, err, scope.ErrGeometry)
	require.ErrorContains(t, err, "an SM holds 65536")
}

func TestCancel(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	ctx, cancel := context.WithCancel(context.Background())
	a, err := m.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	res, err := scope.Launch(m, scope.Grid{Blocks: 4096, Threads: 64}, func(t *scope.Thread) {
		if t.AtomicAdd64(a, 1, pm.Device) == 1000 {
			cancel()
		}
	}, scope.WithContext(ctx))
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, res.Verbs, uint64(4096*64))
}

func TestPromotion(t *testing.T) {
	rec := record.New(functional.New(pm.GPULimits{}), false)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	f, err := m.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	k := func(t *scope.Thread) {
		if t.TID() == 0 {
			t.PRel(f, 1, pm.Block)
		}
		for t.PAcq(f, pm.Block) == 0 {
		}
		t.PBarrier(pm.Thread)
		t.Fence(pm.Warp)
	}
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 4}, k, scope.WithPromotion(pm.Block, pm.Device))
	require.NoError(t, err)
	for _, ev := range rec.Events() {
		switch ev.Op.Kind {
		case pm.OpPRel, pm.OpPAcq:
			require.Equal(t, pm.Device, ev.Op.Scope)
		case pm.OpPBarrier:
			require.Equal(t, pm.Thread, ev.Op.Scope, "only the named scope is promoted")
		case pm.OpFence:
			require.Equal(t, pm.Warp, ev.Op.Scope)
		}
	}
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 4}, k, scope.WithPromotion(pm.Device, pm.Block))
	require.ErrorIs(t, err, scope.ErrBadArg)
}

// Failed launches stop their suspended threads; idle coroutines are kept
// for reuse only up to a bound. Either way goroutines do not pile up.
func TestNoGoroutineLeak(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	flag, err := m.Alloc(pm.DeviceMem, 4)
	require.NoError(t, err)
	run := func() {
		_, err := scope.Launch(m, scope.Grid{Blocks: 4, Threads: 64}, func(t *scope.Thread) {
			for t.PAcq(flag, pm.Device) == 0 {
			}
		})
		require.ErrorIs(t, err, scope.ErrDeadlock)
		_, err = scope.Launch(m, scope.Grid{Blocks: 4, Threads: 64}, func(t *scope.Thread) { t.SyncThreads() })
		require.NoError(t, err)
	}
	run()
	before := runtime.NumGoroutine()
	for range 20 {
		run()
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before+8)
}

func TestSiteScopesAndDefaults(t *testing.T) {
	rec := record.New(functional.New(pm.GPULimits{}), true)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	f, err := m.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	k := func(t *scope.Thread) {
		t.PRel(f, 1, pm.Device)
		t.PRel(f.Add(4), 1, pm.Device)
	}
	// Find the first PRel's site, then override it alone, as a default.
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, k)
	require.NoError(t, err)
	site := rec.Events()[0].Site
	rec.Reset()
	m.SetLaunchDefaults(pm.LaunchDefaults{SiteScopes: map[string]pm.Scope{site: pm.Block}})
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, k)
	require.NoError(t, err)
	ev := rec.Events()
	require.Equal(t, pm.Block, ev[0].Op.Scope)
	require.Equal(t, pm.Device, ev[1].Op.Scope)
}

func TestSiteScopesOnAtomics(t *testing.T) {
	rec := record.New(functional.New(pm.GPULimits{}), true)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	a, err := m.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	k := func(t *scope.Thread) { t.AtomicAdd32(a, 1, pm.Device) }
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, k)
	require.NoError(t, err)
	site := rec.Events()[0].Site
	rec.Reset()
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, k, scope.WithSiteScopes(map[string]pm.Scope{site: pm.Block}))
	require.NoError(t, err)
	require.Equal(t, pm.Block, rec.Events()[0].Op.Scope)
}

func TestSharedMemoryReduction(t *testing.T) {
	const blocks, bs = 40, 64 // more blocks than fit at once: slots are reused
	lim := pm.GPULimits{SMs: 2, WarpSize: 32, MaxThreadsPerSM: 128, MaxBlocksPerSM: 2, MaxThreadsPerBlock: 128}
	m := newMachine(t, lim)
	out, err := m.CreateRegion("sums", 4*blocks)
	require.NoError(t, err)
	before := len(m.Memory().Ranges())
	res, err := scope.Launch(m, scope.Grid{Blocks: blocks, Threads: bs}, func(t *scope.Thread) {
		sh := t.Shared()
		me := sh.Add(uint64(4 * t.TID()))
		if t.Load32(me) != 0 {
			panic("shared memory not zeroed for a new block")
		}
		t.Store32(me, uint32(t.ID()))
		t.SyncThreads()
		for s := bs / 2; s > 0; s /= 2 {
			if t.TID() < s {
				t.Store32(me, t.Load32(me)+t.Load32(sh.Add(uint64(4*(t.TID()+s)))))
			}
			t.SyncThreads()
		}
		if t.TID() == 0 {
			t.Store32(out.Base.Add(uint64(4*t.Block())), t.Load32(sh))
		}
	}, scope.WithShared(4*bs))
	require.NoError(t, err)
	require.LessOrEqual(t, res.PeakResident, 2*128)
	got := u32s(t, m, out.Base, blocks)
	for b := range blocks {
		lo := b * bs
		want := uint32((lo + lo + bs - 1) * bs / 2)
		require.Equal(t, want, got[b], "block %d", b)
	}
	require.Len(t, m.Memory().Ranges(), before, "shared memory is unmapped after the launch")
	var none pm.Addr = 1
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { none = t.Shared() })
	require.NoError(t, err)
	require.Zero(t, none, "no shared memory without WithShared")
}

// Gather32, Gather64 and Gather128 read what Load32 and Load64 read.
func TestGatherLoads(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	a, err := m.Alloc(pm.DeviceMem, 256)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 4}, func(t *scope.Thread) {
		t.Store64(a.Add(uint64(8*t.TID())), uint64(t.TID()+1)<<32|uint64(t.TID()+1))
	})
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 4}, func(t *scope.Thread) {
		var v32 [2]uint32
		var v64 [2]uint64
		var v128 [1][2]uint64
		t.Gather32(v32[:], a, a.Add(8*3+4))
		t.Gather64(v64[:], a.Add(8), a.Add(16))
		t.Gather128(v128[:], a.Add(16))
		t.Store64(a.Add(uint64(128+8*t.TID())), uint64(v32[0])+uint64(v32[1])+v64[0]+v64[1]+v128[0][0]<<1+v128[0][1]<<2)
	})
	require.NoError(t, err)
	got := u32s(t, m, a.Add(128), 8)
	want := uint64(1 + 4 + (2<<32 | 2) + (3<<32 | 3) + (3<<32|3)<<1 + (4<<32|4)<<2)
	for i := range 4 {
		require.Equal(t, want, uint64(got[2*i])|uint64(got[2*i+1])<<32, "thread %d", i)
	}
}

// Bad launch options are errors before anything runs.
func TestBadOptions(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	for _, tc := range []struct {
		name string
		opt  scope.Option
	}{
		{"negative shared", scope.WithShared(-1)},
		{"bad promotion scope", scope.WithPromotion(pm.Block, pm.Scope(99))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(*scope.Thread) { ran = true }, tc.opt)
			require.ErrorIs(t, err, scope.ErrBadArg)
			require.False(t, ran)
		})
	}
}

// A *Thread kept after its kernel returned is dead: using it, from the
// host or from another launch's kernel, is a clear error (ErrStale) and
// stores nothing.
func TestStaleThread(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	r, err := m.CreateRegion("stale", 64)
	require.NoError(t, err)
	var kept *scope.Thread
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(t *scope.Thread) {
		if t.ID() == 0 {
			kept = t
		}
	})
	require.NoError(t, err)

	// From the host.
	func() {
		defer func() {
			p := recover()
			require.NotNil(t, p, "a stale Thread's store must not succeed")
			perr, ok := p.(error)
			require.True(t, ok, "%v", p)
			require.ErrorIs(t, perr, scope.ErrStale)
			require.ErrorContains(t, perr, "thread 0")
		}()
		kept.Store64(r.Base, 7)
	}()
	// From another launch's kernel: that launch fails.
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(t *scope.Thread) {
		if t.ID() == 1 {
			kept.Store64(r.Base, 8)
		}
	})
	require.ErrorIs(t, err, scope.ErrStale)
	buf := make([]byte, 8)
	require.NoError(t, m.CopyOut(r.Base, buf))
	require.Zero(t, pm.GetLE(buf), "nothing stored")
	img, err := m.Crash()
	require.NoError(t, err)
	reg, ok := img.Region("stale")
	require.True(t, ok)
	require.Zero(t, pm.GetLE(reg.Data[:8]), "nothing durable")
}

// A launch stopped by its context says where its threads were: a spin
// that also writes is no deadlock, and only the context ends it.
func TestCancelSaysWhere(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := m.Alloc(pm.DeviceMem, 64)
	require.NoError(t, err)
	flag, scratch := a, a.Add(8)
	spins := 0
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 64}, func(t *scope.Thread) {
		for t.PAcq(flag, pm.Device) == 0 { // never released
			t.Store32(scratch, uint32(t.ID())) // a write: not a deadlock
			if spins++; spins == 100000 {
				cancel()
			}
		}
	}, scope.WithContext(ctx))
	require.ErrorIs(t, err, context.Canceled)
	t.Log(err)
	for _, want := range []string{"cancelled", "128 threads live, 127 of them not started", "thread 0 (block 0, warp 0, lane 0) runs, reading 0x1:0 (read 0 last)"} {
		require.ErrorContains(t, err, want)
	}
}

// A deadlock of many threads names some and says how many it left out.
func TestDeadlockCountsTheRest(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	flag, err := m.Alloc(pm.DeviceMem, 4)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 4, Threads: 64}, func(t *scope.Thread) {
		for t.PAcq(flag, pm.Device) == 0 {
		}
	})
	require.ErrorIs(t, err, scope.ErrDeadlock)
	require.ErrorContains(t, err, "256 threads blocked")
	require.ErrorContains(t, err, "and 248 more not listed")
}

// A verb in a deferred call of a kernel torn down by a deadlock is no
// stale use: the launch reports the deadlock.
func TestDeferredVerbAtTeardown(t *testing.T) {
	m := newMachine(t, pm.DefaultGPU())
	flag, err := m.Alloc(pm.DeviceMem, 4)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 4}, func(t *scope.Thread) {
		defer t.Load32(flag)
		for t.PAcq(flag, pm.Device) == 0 {
		}
	})
	require.ErrorIs(t, err, scope.ErrDeadlock)
	require.NotErrorIs(t, err, scope.ErrStale)
}
