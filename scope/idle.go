package scope

// ReleaseIdle stops the idle coroutines that launches keep for the next
// launch (up to poolCap of them, a few KiB each) and gives their memory
// back to the runtime; the next launch starts new ones. Launches never need
// it: it is for memory measurements (a launch then pays for every
// coroutine it uses) and for a process that has finished simulating.
func ReleaseIdle() {
	pool.mu.Lock()
	ws := pool.free
	pool.free = nil
	pool.mu.Unlock()
	for _, wk := range ws {
		wk.stop()
	}
}
