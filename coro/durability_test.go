package coro_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// durable is a backend with pm.Durability: a durability verb (SFence,
// CFence, JoinStrand) issued with persists pending waits for MakeDurable,
// which records how many persists it made durable and may fail.
type durable struct {
	*functional.Backend
	pending int   // persists since the last MakeDurable
	calls   []int // per MakeDurable call, the persists it made durable
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
	switch op.Kind {
	case pm.OpSFence, pm.OpCFence, pm.OpJoinStrand:
		return d.pending > 0
	}
	return false
}

func (d *durable) MakeDurable() error {
	if d.err != nil {
		return d.err
	}
	d.calls = append(d.calls, d.pending)
	d.pending = 0
	return nil
}

// Tasks held at a durability point share one MakeDurable (group commit),
// made before any of them goes on: one per window of tasks that each
// store and fence, under every mode that runs several tasks; a window of
// one makes each durable on the spot. Tasks that wait on a lock a held
// task has (yielding, writing nothing) let it be served, and do not make
// the run a deadlock.
func TestDurabilityGroupCommit(t *testing.T) {
	const n = 24
	storeFence := func(d, lock pm.Addr, seen []int, be *durable) coro.Task {
		return func(c *coro.Ctx) {
			a := d.Add(64 * uint64(c.ID()))
			c.Store64(a, 1)
			c.CLWB(a)
			c.Fence()
			seen[c.ID()] = len(be.calls)
		}
	}
	locked := func(d, lock pm.Addr, seen []int, be *durable) coro.Task {
		return func(c *coro.Ctx) {
			c.Lock(lock)
			a := d.Add(64 * uint64(c.ID()))
			c.Store64(a, 1)
			c.CLWB(a)
			c.SFence() // held with the lock taken
			seen[c.ID()] = len(be.calls)
			c.Unlock(lock)
		}
	}
	cases := []struct {
		name  string
		cfg   coro.Config
		task  func(d, lock pm.Addr, seen []int, be *durable) coro.Task
		calls []int         // persists each MakeDurable made durable
		seen  func(int) int // MakeDurable calls task i saw after its fence
	}{
		{"baseline, all active", coro.Config{Mode: coro.Baseline}, storeFence, []int{n}, func(int) int { return 1 }},
		{"baseline, window of 6", coro.Config{Mode: coro.Baseline, Window: 6}, storeFence,
			[]int{6, 6, 6, 6}, func(i int) int { return i/6 + 1 }},
		{"cosplay, window of 4", coro.Config{Mode: coro.COSPlay, Window: 4}, storeFence,
			[]int{4, 4, 4, 4, 4, 4}, func(i int) int { return i/4 + 1 }},
		{"sbatch, window of 4: the shared SFence is not held", coro.Config{Mode: coro.SBatch, Window: 4}, storeFence,
			[]int{4, 4, 4, 4, 4, 4}, func(i int) int { return i/4 + 1 }},
		{"baseline, window of 1", coro.Config{Mode: coro.Baseline, Window: 1}, storeFence,
			fill(n, 1), func(i int) int { return i + 1 }},
		{"lock held across the durability point", coro.Config{Mode: coro.Baseline, Window: 4}, locked,
			fill(n, 1), func(i int) int { return i + 1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := &durable{Backend: functional.New(pm.GPULimits{})}
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			r, err := m.CreateRegion("d", 64*n)
			require.NoError(t, err)
			lock, err := m.Alloc(pm.HostMem, 8) // volatile: taking it persists nothing
			require.NoError(t, err)
			seen := make([]int, n)
			tasks := make([]coro.Task, n)
			for i := range tasks {
				tasks[i] = c.task(r.Base, lock, seen, be)
			}
			_, err = coro.Run(m, tasks, coro.WithConfig(c.cfg))
			require.NoError(t, err)
			require.Equal(t, c.calls, be.calls, "persists each MakeDurable call covered")
			for i, s := range seen {
				require.Equal(t, c.seen(i), s, "MakeDurable calls task %d saw after its fence", i)
			}
		})
	}
}

func fill(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// A failed MakeDurable fails the run, wrapped with pm.ErrBackend, and no
// held task returns from its fence: whether the failure comes while the
// last task reaches its fence or from the scheduler.
func TestDurabilityError(t *testing.T) {
	boom := errors.New("boom")
	for _, window := range []int{1, 4} {
		be := &durable{Backend: functional.New(pm.GPULimits{}), err: boom}
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		r, err := m.CreateRegion("d", 64*8)
		require.NoError(t, err)
		returned := 0
		task := func(c *coro.Ctx) {
			a := r.Base.Add(64 * uint64(c.ID()))
			c.Store64(a, 1)
			c.CLWB(a)
			c.SFence()
			returned++
		}
		_, err = coro.Run(m, []coro.Task{task, task, task, task, task, task, task, task}, coro.WithConfig(coro.Config{Mode: coro.Baseline, Window: window}))
		require.ErrorIs(t, err, boom, "window %d", window)
		require.ErrorIs(t, err, pm.ErrBackend, "window %d", window)
		require.Zero(t, returned, "window %d: tasks returned from a fence whose MakeDurable failed", window)
	}
}
