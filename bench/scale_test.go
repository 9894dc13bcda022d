package bench_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/internal/testkit/speed"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// BenchmarkScaling runs reduction and gpKVS (gpkvs-sbrp) at 1/4, 1 and 4
// times paper size (workloads.NewScaled: that many times the blocks and the
// input, every thread's work the same) on pm-near under epoch and SBRP, as
// the SBRP figures run them, and reports the cost per simulated verb. The
// simulator's cost should grow linearly with the problem: ns/verb at 4x
// within 1.25x of that at 1x (issue 11).
//
//   - ns/verb: wall time of the workload's Run (its kernels, not its Setup
//     or Check) per thread-verb;
//   - cpu-ns/verb: the same in CPU time of the process (user+system,
//     getrusage; every thread, the garbage collector's included), which
//     other load on the machine does not distort;
//   - verbs: thread-verbs of one run (the backend's Op calls);
//   - sim-cycles: simulated cycles of one run.
//
// 4x paper size takes tens of CPU-seconds: run one iteration of the part
// wanted, e.g.
//
//	go test ./bench -run '^$' -bench 'Scaling/reduction/.*/sbrp' -benchtime 1x
func BenchmarkScaling(b *testing.B) {
	for _, workload := range []string{"reduction", "gpkvs-sbrp"} {
		for _, factor := range []float64{0.25, 1, 4} {
			for _, model := range []hwmodel.Model{hwmodel.Epoch, hwmodel.SBRP} {
				name := fmt.Sprintf("%s/x%v/%s-near", workload, factor, model)
				b.Run(name, func(b *testing.B) {
					var verbs, cycles uint64
					var cpu float64
					for i := 0; b.Loop(); i++ {
						b.StopTimer()
						w, err := workloads.NewScaled(workload, workloads.Paper, factor)
						require.NoError(b, err)
						be, err := hwmodel.New(hwmodel.PresetPMNear(), model)
						require.NoError(b, err)
						counter := &opCounter{Backend: be}
						m, err := pm.NewMachine(counter)
						require.NoError(b, err)
						require.NoError(b, w.Setup(m))
						t0 := be.Now()
						b.StartTimer()
						c0 := speed.CPUTime()
						err = w.Run(m)
						cpu += (speed.CPUTime() - c0).Seconds()
						b.StopTimer()
						require.NoError(b, err)
						if i == 0 {
							require.NoError(b, w.Check(m))
						}
						verbs += counter.ops
						cycles = be.Now() - t0
						b.StartTimer()
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(verbs), "ns/verb")
					b.ReportMetric(cpu*1e9/float64(verbs), "cpu-ns/verb")
					b.ReportMetric(float64(verbs)/float64(b.N), "verbs")
					b.ReportMetric(float64(cycles), "sim-cycles")
				})
			}
		}
	}
}

// opCounter counts the verbs hwmodel times (a verb is one Op call) on their
// way to it.
type opCounter struct {
	*hwmodel.Backend
	ops uint64
}

// Unwrap returns the counted backend (pm.Wrapper).
func (c *opCounter) Unwrap() pm.Backend { return c.Backend }

// Op counts the verb and passes it on.
func (c *opCounter) Op(a *pm.Agent, op *pm.Op) {
	c.ops++
	c.Backend.Op(a, op)
}
