package bench

import "sync"

// memo keeps the result of each run of this process by its key: a run of
// the simulator is deterministic (TestGolden), so two experiments that run
// the same simulation (the same workload, size and whole machine
// configuration) share one run. The first caller of a key runs it; callers
// of the same key meanwhile wait for it. A failed run is not kept.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*memoEntry[V]
}

type memoEntry[V any] struct {
	once sync.Once
	v    V
	err  error
}

// do returns the kept result of k, else f's, which it keeps.
func (c *memo[K, V]) do(k K, f func() (V, error)) (V, error) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[K]*memoEntry[V]{}
	}
	e := c.m[k]
	if e == nil {
		e = &memoEntry[V]{}
		c.m[k] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.v, e.err = f() })
	if e.err != nil {
		c.mu.Lock()
		if c.m[k] == e {
			delete(c.m, k)
		}
		c.mu.Unlock()
	}
	return e.v, e.err
}

// forget drops every kept result.
func (c *memo[K, V]) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}

// forgetRuns drops every run this process keeps (runApp, cpuRun), so that
// the next run of each simulates again (TestGolden -update's determinism
// check).
func forgetRuns() {
	appRuns.forget()
	cpuRuns.forget()
}
