package hwmodel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/speed"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// BenchmarkHWModel measures the backend with the engine (pm-near, epoch
// and SBRP) over the kernels of internal/testkit/speed, the ones BenchmarkEngine
// runs on the functional backend, and reports:
//
//   - verbs/s: simulated thread-verbs per CPU-second of the process
//     (user+system time from getrusage around the loop, every thread
//     including the garbage collector's), so that other load on the
//     machine does not distort it; each iteration builds a fresh backend
//     and machine, as an experiment does;
//   - B/thread: heap and stack the launch holds per resident simulated
//     thread, at the moment the most threads are alive (speed.Probe; one
//     extra launch, outside the timed loop);
//   - sim-cycles: the simulated cycles of one launch.
func BenchmarkHWModel(b *testing.B) {
	for _, c := range []struct {
		kernel  string
		threads int
	}{
		{"vector-add", 1 << 18},
		{"log-loop", 1 << 16},
		{"block-reduce", 1 << 16},
	} {
		k, err := speed.Lookup(c.kernel)
		require.NoError(b, err)
		for _, model := range []Model{Epoch, SBRP} {
			b.Run(c.kernel+"/"+model.String(), func(b *testing.B) {
				prepare := func(p *speed.Probe) (func() (scope.Result, error), error) {
					be, err := New(PresetPMNear(), model)
					if err != nil {
						return nil, err
					}
					m, err := pm.NewMachine(be)
					if err != nil {
						return nil, err
					}
					kern, err := k.Setup(m, c.threads, p)
					return func() (scope.Result, error) { return scope.Launch(m, k.Grid(c.threads), kern) }, err
				}
				var p speed.Probe
				perThread, err := p.BytesPerThread(prepare)
				require.NoError(b, err)
				var verbs, cycles uint64
				cpu := speed.CPUTime()
				for b.Loop() {
					launch, err := prepare(&speed.Probe{})
					require.NoError(b, err)
					res, err := launch()
					require.NoError(b, err)
					verbs += res.Verbs
					cycles = res.Stats.Cycles
				}
				b.ReportMetric(float64(verbs)/(speed.CPUTime()-cpu).Seconds(), "verbs/s")
				b.ReportMetric(perThread, "B/thread")
				b.ReportMetric(float64(cycles), "sim-cycles")
			})
		}
	}
}

// BenchmarkOccupancy measures an occupancy calendar under the memory
// system's pattern: jobs booked a little out of time order with fit,
// holding a slot for a few hundred cycles, as time advances (never far
// behind the last booking: a warp waits for its job before the next), with
// a trim every thousand jobs (the engine trims its calendars as its warps
// move on). An op is one job booked.
func BenchmarkOccupancy(b *testing.B) {
	for _, c := range []struct {
		name   string
		window int
		hold   uint64
	}{
		{"queue-16", 16, 400},
		{"window-6", 6, 1200},
		{"words-1024", 1024, 300},
	} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var o occupancy
			now := uint64(0)
			o.reset(now)
			i := 0
			for b.Loop() {
				at := now + rng.Uint64N(256)
				hold := c.hold/2 + rng.Uint64N(c.hold)
				s := o.fit(at, c.window, func(s uint64) uint64 { return s + hold })
				o.add(s, s+hold)
				now = max(now+rng.Uint64N(8), s-min(s, 512))
				if i++; i%1000 == 0 {
					o.trim(now - min(now, 2048))
				}
			}
		})
	}
}
