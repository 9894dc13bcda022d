package scope_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// backends returns a fresh functional and hwmodel backend by name.
func spinBackends(t *testing.T) map[string]func() pm.Backend {
	return map[string]func() pm.Backend{
		"functional": func() pm.Backend { return functional.New(pm.GPULimits{}) },
		"hwmodel": func() pm.Backend {
			be, err := hwmodel.New(hwmodel.PresetPMNear(), hwmodel.SBRP)
			require.NoError(t, err)
			return be
		},
	}
}

// A textbook CAS retry loop (load, add, CAS until it sticks) with many
// contending threads is progress, not a deadlock.
func TestCASRetryLoopManyThreads(t *testing.T) {
	sizes := []int{256, 1024, 4096}
	if testing.Short() && raceEnabled {
		sizes = sizes[:2] // 4,096 threads retrying take minutes under the race detector
	}
	for name, newBE := range spinBackends(t) {
		for _, threads := range sizes {
			m, err := pm.NewMachine(newBE())
			require.NoError(t, err)
			ctr, err := m.Alloc(pm.DeviceMem, 8)
			require.NoError(t, err)
			grid := scope.Grid{Blocks: threads / 256, Threads: 256}
			_, err = scope.Launch(m, grid, func(t *scope.Thread) {
				for {
					old := t.Load64(ctr)
					if t.AtomicCAS64(ctr, old, old+1, pm.Device) == old {
						return
					}
				}
			})
			require.NoError(t, err, "%s, %d threads", name, threads)
			buf := make([]byte, 8)
			require.NoError(t, m.CopyOut(ctr, buf))
			require.Equal(t, uint64(threads), pm.GetLE(buf), name)
		}
	}
}

// A loop that polls two words in turn, neither of which anyone writes, is
// a deadlock, found within bounded rereads on every backend.
func TestMultiWordPollDeadlock(t *testing.T) {
	for name, newBE := range spinBackends(t) {
		m, err := pm.NewMachine(newBE())
		require.NoError(t, err)
		a, err := m.Alloc(pm.DeviceMem, 64)
		require.NoError(t, err)
		start := time.Now()
		_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 64}, func(t *scope.Thread) {
			for t.Load32(a) == 0 && t.Load32(a.Add(32)) == 0 {
			}
		})
		require.ErrorIs(t, err, scope.ErrDeadlock, name)
		t.Logf("%s: deadlock found in %v (host time, for information)", name, time.Since(start))
	}
}

// A plain-load spin of a full GPU of threads (60 blocks of 1,024) is
// reported as a deadlock, on every backend. How fast is
// BenchmarkDeadlockDetection's to say.
func TestPlainLoadSpinDeadlock(t *testing.T) {
	blocks := 60
	if raceEnabled || testing.Short() {
		blocks = 2
	}
	for name, newBE := range spinBackends(t) {
		err := plainLoadSpin(newBE(), blocks)
		require.ErrorIs(t, err, scope.ErrDeadlock, name)
	}
}

// plainLoadSpin runs blocks of 1,024 threads that all spin on a flag no one
// writes.
func plainLoadSpin(be pm.Backend, blocks int) error {
	m, err := pm.NewMachine(be)
	if err != nil {
		return err
	}
	flag, err := m.Alloc(pm.DeviceMem, 8)
	if err != nil {
		return err
	}
	_, err = scope.Launch(m, scope.Grid{Blocks: blocks, Threads: 1024}, func(t *scope.Thread) {
		for t.Load32(flag) == 0 {
		}
	})
	return err
}

// BenchmarkDeadlockDetection reports the host time to find the deadlock of
// a full GPU of spinning threads (61,440) on each backend.
func BenchmarkDeadlockDetection(b *testing.B) {
	for _, name := range []string{"functional", "hwmodel"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var be pm.Backend = functional.New(pm.GPULimits{})
				if name == "hwmodel" {
					h, err := hwmodel.New(hwmodel.PresetPMNear(), hwmodel.SBRP)
					require.NoError(b, err)
					be = h
				}
				require.ErrorIs(b, plainLoadSpin(be, 60), scope.ErrDeadlock)
			}
		})
	}
}

// WithContext stops a kernel that spins without parking, on every backend.
func TestContextStopsBusyKernel(t *testing.T) {
	for name, newBE := range spinBackends(t) {
		m, err := pm.NewMachine(newBE())
		require.NoError(t, err)
		a, err := m.Alloc(pm.DeviceMem, 8)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			for i := uint64(0); ; i++ { // writes every round: progress forever
				t.Store64(a, i)
			}
		}, scope.WithContext(ctx))
		cancel()
		require.True(t, errors.Is(err, context.DeadlineExceeded), "%s: %v", name, err)
		t.Logf("%s: stopped after %v", name, time.Since(start))
	}
}

// A kernel that panics with an error value keeps the error chain, and nil
// arguments are errors, not panics.
func TestKernelPanicKeepsChainAndNilArgs(t *testing.T) {
	sentinel := errors.New("my sentinel")
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { panic(sentinel) })
	require.ErrorIs(t, err, sentinel)
	require.ErrorIs(t, err, scope.ErrPanic)
	_, err = scope.Launch(nil, scope.Grid{Blocks: 1, Threads: 1}, func(*scope.Thread) {})
	require.ErrorIs(t, err, scope.ErrBadArg)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, nil)
	require.ErrorIs(t, err, scope.ErrBadArg)
}

// Reading neighbouring 4-byte flags in turn (they share an 8-byte word) is
// not a reread: a leader collecting flags its workers already set never
// parks, and nothing needs a deadlock probe.
func TestNeighbourFlagsAreNotRereads(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	flags, err := m.Alloc(pm.DeviceMem, 4*32)
	require.NoError(t, err)
	res, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
		if t.TID() != 0 {
			t.PRel(flags.Add(uint64(4*t.TID())), 1, pm.Block)
			return
		}
		for j := 1; j < 32; j++ {
			for t.PAcq(flags.Add(uint64(4*j)), pm.Block) == 0 {
			}
		}
	})
	require.NoError(t, err)
	require.Zero(t, res.Probes)
}
