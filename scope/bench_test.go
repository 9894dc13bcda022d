package scope_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// BenchmarkEngine measures the engine on the functional backend in simulated
// thread-verbs per wall second (verbs/s). BenchmarkResidentMemory (in
// mem_test.go) measures memory per resident thread.
func BenchmarkEngine(b *testing.B) {
	kernels := []struct {
		name    string
		threads int
		bs      int
		setup   func(m *pm.Machine) scope.Kernel
	}{
		{"vector-add", 1 << 20, 256, func(m *pm.Machine) scope.Kernel {
			n := uint64(1 << 20)
			x, _ := m.Alloc(pm.DeviceMem, 4*n)
			y, _ := m.Alloc(pm.DeviceMem, 4*n)
			z, _ := m.CreateRegion("z", 4*n)
			return func(t *scope.Thread) {
				off := uint64(4 * t.ID())
				t.Store32(z.Base.Add(off), t.Load32(x.Add(off))+t.Load32(y.Add(off)))
			}
		}},
		{"loop-16", 1 << 18, 256, func(m *pm.Machine) scope.Kernel {
			n := uint64(1 << 18)
			x, _ := m.Alloc(pm.DeviceMem, 4*n)
			z, _ := m.CreateRegion("z", 4*n)
			return func(t *scope.Thread) {
				off := uint64(4 * t.ID())
				var s uint32
				for range 16 {
					s += t.Load32(x.Add(off))
				}
				t.Store32(z.Base.Add(off), s)
				t.OFence()
			}
		}},
		{"block-reduce", 1 << 18, 256, func(m *pm.Machine) scope.Kernel {
			n := uint64(1 << 18)
			x, _ := m.Alloc(pm.DeviceMem, 4*n)
			z, _ := m.CreateRegion("z", 4*n/256)
			return func(t *scope.Thread) {
				me := x.Add(uint64(4 * t.ID()))
				base := x.Add(uint64(4 * t.Block() * 256))
				for s := 128; s > 0; s /= 2 {
					if t.TID() < s {
						t.Store32(me, t.Load32(me)+t.Load32(base.Add(uint64(4*(t.TID()+s)))))
					}
					t.SyncThreads()
				}
				if t.TID() == 0 {
					t.Store32(z.Base.Add(uint64(4*t.Block())), t.Load32(base))
				}
			}
		}},
	}
	for _, k := range kernels {
		b.Run(k.name, func(b *testing.B) {
			m := newMachine(b, pm.DefaultGPU)
			kern := k.setup(m)
			var verbs uint64
			start := time.Now()
			for b.Loop() {
				res, err := scope.Launch(m, scope.Grid{Blocks: k.threads / k.bs, Threads: k.bs}, kern)
				require.NoError(b, err)
				verbs += res.Verbs
			}
			b.ReportMetric(float64(verbs)/time.Since(start).Seconds(), "verbs/s")
		})
	}
}
