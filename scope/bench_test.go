package scope_test

import (
	"iter"
	"strconv"

	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/speed"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// BenchmarkEngine measures the engine on the functional backend over the
// kernels of internal/testkit/speed (BenchmarkHWModel runs the same ones under
// hwmodel) and reports:
//
//   - verbs/s: simulated thread-verbs per CPU-second of the process
//     (user+system time from getrusage around the loop, every thread
//     including the garbage collector's), so that other load on the
//     machine does not distort it;
//   - B/thread: heap and stack the launch holds per resident simulated
//     thread, at the moment the most threads are alive (speed.Probe; one
//     extra launch, outside the timed loop).
//
// BenchmarkResidentMemory (in mem_test.go) measures the memory per thread
// of a full GPU of threads all parked at once.
func BenchmarkEngine(b *testing.B) {
	for _, c := range []struct {
		kernel  string
		threads int
	}{
		{"vector-add", 1 << 20},
		{"loop-16", 1 << 18},
		{"log-loop", 1 << 18},
		{"block-reduce", 1 << 18},
	} {
		k, err := speed.Lookup(c.kernel)
		require.NoError(b, err)
		b.Run(c.kernel, func(b *testing.B) {
			prepare := func(p *speed.Probe) (func() (scope.Result, error), error) {
				m, err := pm.NewMachine(functional.New(pm.DefaultGPU()))
				if err != nil {
					return nil, err
				}
				kern, err := k.Setup(m, c.threads, p)
				return func() (scope.Result, error) { return scope.Launch(m, k.Grid(c.threads), kern) }, err
			}
			var p speed.Probe
			perThread, err := p.BytesPerThread(prepare)
			require.NoError(b, err)
			launch, err := prepare(&speed.Probe{})
			require.NoError(b, err)
			var verbs uint64
			cpu := speed.CPUTime()
			for b.Loop() {
				res, err := launch()
				require.NoError(b, err)
				verbs += res.Verbs
			}
			b.ReportMetric(float64(verbs)/(speed.CPUTime()-cpu).Seconds(), "verbs/s")
			b.ReportMetric(perThread, "B/thread")
		})
	}
}

// BenchmarkResumeFloor measures what one thread switch costs the engine at
// the least: resuming a suspended coroutine (iter.Pull, as the engine's
// workers are) and letting it yield again, round robin over n coroutines
// that each keep a little state on their own stack, as a suspended
// simulated thread does. With few coroutines their stacks stay in the CPU's
// caches; with as many as a GPU holds resident threads (pm-near: 30 SMs of
// 2,048; volta: 80), every resume touches memory the previous n-1 resumes
// pushed out, and the cost per switch grows with n. It is the floor under
// every barrier and every batch boundary of a timed launch.
func BenchmarkResumeFloor(b *testing.B) {
	for _, n := range []int{8, 1 << 10, 1 << 14, 1 << 16, 1 << 18} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			nexts := make([]func() (uint64, bool), n)
			for i := range nexts {
				next, stop := iter.Pull(func(yield func(uint64) bool) {
					var local [32]uint64 // a kernel's locals
					for k := uint64(0); ; k++ {
						local[k%32] += k
						if !yield(local[(k+1)%32]) {
							return
						}
					}
				})
				b.Cleanup(stop)
				nexts[i] = next
			}
			var sink uint64
			cpu := speed.CPUTime()
			for i := 0; b.Loop(); i++ {
				v, _ := nexts[i%n]()
				sink += v
			}
			b.ReportMetric(float64((speed.CPUTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/switch")
			if sink == 1 {
				b.Log(sink)
			}
		})
	}
}
