package coro_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
)

func TestInterleaving(t *testing.T) {
	run := func() ([]string, []record.Event) {
		rec := record.New(functional.New(pm.GPULimits{}), false)
		m, err := pm.NewMachine(rec)
		require.NoError(t, err)
		log, err := m.CreateRegion("log", 8*64)
		require.NoError(t, err)
		next, err := m.Alloc(pm.HostMem, 8)
		require.NoError(t, err)
		var order []string
		task := func(c *coro.Ctx) {
			for step := range c.ID() + 2 {
				slot := c.AtomicAdd64(next, 1)
				a := log.Base.Add(8 * slot)
				c.Store64(a, uint64(c.ID()<<8|step))
				c.CLWB(a)
				c.SFence()
				order = append(order, fmt.Sprintf("%d.%d", c.ID(), step))
				c.Yield()
			}
		}
		res, err := coro.Run(m, []coro.Task{task, task, task})
		require.NoError(t, err)
		require.Equal(t, uint64(2+3+4), res.Yields)
		return order, rec.Events()
	}
	order, ev := run()
	require.Equal(t, []string{"0.0", "1.0", "2.0", "0.1", "1.1", "2.1", "1.2", "2.2", "2.3"}, order)
	order2, ev2 := run()
	require.Equal(t, order, order2)
	require.Equal(t, ev, ev2)
	var clwb, sfence int
	for _, e := range ev {
		switch e.Op.Kind {
		case pm.OpCLWB:
			clwb++
			require.Equal(t, pm.CPUTask, e.Agent.Kind)
		case pm.OpSFence:
			sfence++
		}
	}
	require.Equal(t, 9, clwb)
	require.Equal(t, 9, sfence)
}

func TestTryLock(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	lock, err := m.Alloc(pm.HostMem, 16)
	require.NoError(t, err)
	counter := lock.Add(8)
	task := func(c *coro.Ctx) {
		for range 10 {
			for c.CAS64(lock, 0, 1) != 0 {
				c.Yield()
			}
			v := c.Load64(counter)
			c.Yield() // hold the lock across a switch
			c.Store64(counter, v+1)
			c.Store64(lock, 0)
		}
	}
	_, err = coro.Run(m, []coro.Task{task, task, task, task})
	require.NoError(t, err)
	v, err := m.Memory().Load(counter, 8)
	require.NoError(t, err)
	require.Equal(t, uint64(40), v)
}

func TestErrors(t *testing.T) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	a, err := m.Alloc(pm.HostMem, 8)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		tasks []coro.Task
		is    error
		msg   string
	}{
		{"yield-spin", []coro.Task{func(c *coro.Ctx) {
			for c.Load64(a) == 0 {
				c.Yield()
			}
		}}, coro.ErrDeadlock, "task 0 (core 0) yields after Yield"},
		{"cas-spin", []coro.Task{func(c *coro.Ctx) {
			for c.CAS64(a, 1, 2) != 1 {
			}
		}}, coro.ErrDeadlock, "without yielding"},
		{"panic", []coro.Task{func(*coro.Ctx) {}, func(*coro.Ctx) { panic("oops") }}, coro.ErrPanic, "task 1"},
		{"fault", []coro.Task{func(c *coro.Ctx) { c.Store32(a.Add(2), 1) }}, pm.ErrMisaligned, "task 0"},
		{"unmapped-clwb", []coro.Task{func(c *coro.Ctx) { c.CLWB(0) }}, pm.ErrUnmapped, "task 0"},
		{"none", nil, coro.ErrBadArg, "no tasks"},
		{"nil", []coro.Task{nil}, coro.ErrBadArg, "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := coro.Run(m, tc.tasks, coro.WithIdleRounds(16))
			require.ErrorIs(t, err, tc.is)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

// Tasks take turns on one core at each Yield.
func ExampleRun() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	r, _ := m.CreateRegion("r", 64)
	task := func(c *coro.Ctx) {
		for i := range 2 {
			a := r.Base.Add(uint64(8 * (2*c.ID() + i)))
			c.Store64(a, uint64(10*c.ID()+i))
			c.CLWB(a)
			c.SFence()
			fmt.Printf("task %d step %d\n", c.ID(), i)
			c.Yield()
		}
	}
	_, _ = coro.Run(m, []coro.Task{task, task})
	// Output:
	// task 0 step 0
	// task 1 step 0
	// task 0 step 1
	// task 1 step 1
}
