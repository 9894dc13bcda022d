package scope_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// durable is a backend with pm.Durability: a DFence issued with stores
// pending waits for MakeDurable, which records how many persists it made
// durable and may fail.
type durable struct {
	*functional.Backend
	pending int   // stores since the last MakeDurable
	calls   []int // per MakeDurable call, the stores it made durable
	err     error
}

func (d *durable) Attach(mem *pm.Memory) (pm.Caps, error) {
	c, err := d.Backend.Attach(mem)
	c.Ops = true
	return c, err
}

func (d *durable) Op(_ *pm.Agent, op *pm.Op) {
	if op.Persists() {
		d.pending++
	}
}

func (d *durable) WaitDurable(_ *pm.Agent, op *pm.Op) bool {
	return op.Kind == pm.OpDFence && d.pending > 0
}

func (d *durable) MakeDurable() error {
	if d.err != nil {
		return d.err
	}
	d.calls = append(d.calls, d.pending)
	d.pending = 0
	return nil
}

// Threads that reach a durability point in the same round share one
// MakeDurable call, made before any of them returns from its DFence; a
// thread spinning on a flag that a waiting thread sets after its DFence
// does not deadlock the launch; a failed MakeDurable fails the launch and
// no waiting DFence returns.
func TestDurabilityGroupCommit(t *testing.T) {
	t.Run("one call per round", func(t *testing.T) {
		be := &durable{Backend: functional.New(pm.GPULimits{})}
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		r, err := m.CreateRegion("d", 8*1024)
		require.NoError(t, err)
		seen := make([][2]int, 512)
		_, err = scope.Launch(m, scope.Grid{Blocks: 4, Threads: 128}, func(t *scope.Thread) {
			a := r.Base.Add(8 * uint64(t.ID()))
			t.Store64(a, 1)
			t.DFence()
			seen[t.ID()][0] = len(be.calls)
			t.Store64(a, 2)
			t.DFence()
			seen[t.ID()][1] = len(be.calls)
		})
		require.NoError(t, err)
		require.Equal(t, []int{512, 512}, be.calls, "stores each MakeDurable call covered")
		for i, s := range seen {
			require.Equal(t, [2]int{1, 2}, s, "MakeDurable calls thread %d saw after its DFences", i)
		}
	})
	t.Run("waiting thread releases a spinner", func(t *testing.T) {
		be := &durable{Backend: functional.New(pm.GPULimits{})}
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		r, err := m.CreateRegion("d", 4096)
		require.NoError(t, err)
		v, err := m.Alloc(pm.DeviceMem, 64)
		require.NoError(t, err)
		got := 0
		_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
			if t.ID() == 0 {
				t.Store64(r.Base, 7)
				t.DFence()
				t.Store32(v, 1)
				return
			}
			for t.Load32(v) == 0 {
			}
			got++
		})
		require.NoError(t, err)
		require.Equal(t, 63, got)
		require.Equal(t, []int{1}, be.calls)
	})
	t.Run("a writer that never waits does not hold a waiting thread back", func(t *testing.T) {
		// Thread 1 stores while it spins on a flag that thread 0 sets
		// after its DFence: it never waits, so the waiting thread is
		// served after a bounded number of its verbs, not when no thread
		// can run (never). The deadline turns a hang into a failure.
		be := &durable{Backend: functional.New(pm.GPULimits{})}
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		r, err := m.CreateRegion("d", 4096)
		require.NoError(t, err)
		v, err := m.Alloc(pm.DeviceMem, 64)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var spins uint64
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(t *scope.Thread) {
			if t.ID() == 0 {
				t.Store64(r.Base, 7)
				t.DFence()
				t.Store32(v, 1)
				return
			}
			for t.Load32(v) == 0 {
				spins++
				t.Store64(v.Add(8), spins)
			}
		}, scope.WithContext(ctx))
		require.NoError(t, err)
		require.Equal(t, []int{1}, be.calls)
		require.Positive(t, spins)
		t.Logf("the writer spun %d times before the DFence returned", spins)
	})
	t.Run("a failed call fails the launch", func(t *testing.T) {
		boom := errors.New("boom")
		be := &durable{Backend: functional.New(pm.GPULimits{}), err: boom}
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		r, err := m.CreateRegion("d", 4096)
		require.NoError(t, err)
		returned := 0
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
			t.Store64(r.Base.Add(8*uint64(t.ID())), 1)
			t.DFence()
			returned++
		})
		require.ErrorIs(t, err, boom)
		require.ErrorIs(t, err, pm.ErrBackend)
		require.Zero(t, returned)
	})
}
