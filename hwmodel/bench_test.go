package hwmodel

import (
	"testing"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// BenchmarkHWModel measures the backend with the engine in simulated
// thread-verbs per wall second (verbs/s) and reports the simulated cycles
// of one launch.
func BenchmarkHWModel(b *testing.B) {
	type kernel struct {
		name    string
		threads int
		setup   func(m *pm.Machine) scope.Kernel
	}
	kernels := []kernel{
		{"vector-add", 1 << 18, func(m *pm.Machine) scope.Kernel {
			n := uint64(1 << 18)
			x, _ := m.Alloc(pm.DeviceMem, 4*n)
			y, _ := m.Alloc(pm.DeviceMem, 4*n)
			z, _ := m.CreateRegion("z", 4*n)
			return func(t *scope.Thread) {
				off := uint64(4 * t.ID())
				t.Store32(z.Base.Add(off), t.Load32(x.Add(off))+t.Load32(y.Add(off)))
			}
		}},
		{"log-loop", 1 << 16, func(m *pm.Machine) scope.Kernel {
			n := uint64(1 << 16)
			z, _ := m.CreateRegion("z", 8*n*8)
			return func(t *scope.Thread) {
				for i := range uint64(8) {
					a := z.Base.Add(8 * (i*n + uint64(t.ID())))
					t.Store64(a, t.Load64(a)+1)
					t.OFence()
				}
				t.DFence()
			}
		}},
	}
	for _, k := range kernels {
		for _, model := range []Model{Epoch, SBRP} {
			b.Run(k.name+"/"+model.String(), func(b *testing.B) {
				var verbs, cycles uint64
				for b.Loop() {
					be, err := New(PresetPMNear(), model)
					if err != nil {
						b.Fatal(err)
					}
					m, err := pm.NewMachine(be)
					if err != nil {
						b.Fatal(err)
					}
					kern := k.setup(m)
					res, err := scope.Launch(m, scope.Grid{Blocks: k.threads / 256, Threads: 256}, kern)
					if err != nil {
						b.Fatal(err)
					}
					verbs += res.Verbs
					cycles = res.Stats.Cycles
				}
				b.ReportMetric(float64(verbs)/b.Elapsed().Seconds(), "verbs/s")
				b.ReportMetric(float64(cycles), "sim-cycles")
			})
		}
	}
}
