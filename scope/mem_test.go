package scope

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// BenchmarkResidentMemory reports the memory held per resident simulated
// thread (B/thread): heap and goroutine stacks grown between an idle state
// and the moment every resident thread of a full GPU (30 SMs x 2048) is
// suspended at once, divided by their number. The worker pool is emptied
// first so that coroutines kept from earlier launches are counted.
func BenchmarkResidentMemory(b *testing.B) {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(b, err)
	lim := m.Caps().GPU
	const bs = 256
	n := lim.SMs * lim.MaxThreadsPerSM
	cnt, err := m.Alloc(pm.DeviceMem, 16)
	require.NoError(b, err)
	var perThread float64
	for b.Loop() {
		ReleaseIdle()
		require.NoError(b, m.CopyIn(cnt, make([]byte, 16)))
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := Launch(m, Grid{Blocks: n / bs, Threads: bs}, func(t *Thread) {
			if t.AtomicAdd32(cnt, 1, pm.Device) == uint32(n-1) {
				// Every other resident thread is parked on the flag now.
				perThread = bytesPerThread(&before, n)
				t.PRel(cnt.Add(8), 1, pm.Device)
			}
			for t.PAcq(cnt.Add(8), pm.Device) == 0 {
			}
		})
		require.NoError(b, err)
		require.Equal(b, n, res.PeakResident)
	}
	b.ReportMetric(perThread, "B/thread")
}

// bytesPerThread returns the heap and stack grown since before, per thread.
// It is a function of its own so that the MemStats it reads does not sit in
// the kernel's stack frame.
//
//go:noinline
func bytesPerThread(before *runtime.MemStats, n int) float64 {
	runtime.GC()
	var at runtime.MemStats
	runtime.ReadMemStats(&at)
	return float64(at.HeapAlloc+at.StackInuse-before.HeapAlloc-before.StackInuse) / float64(n)
}
