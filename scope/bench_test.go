package scope_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/speed"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// BenchmarkEngine measures the engine on the functional backend over the
// kernels of internal/speed (BenchmarkHWModel runs the same ones under
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
				m, err := pm.NewMachine(functional.New(pm.DefaultGPU))
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
