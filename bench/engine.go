package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	Register(Experiment{
		Name:        "engine",
		Description: "execution-engine speed: simulated thread-verbs per wall second on the functional backend (1M-thread kernels)",
		Default:     true,
		NoSet:       true,
		Run:         runEngine,
	})
}

// engineKernel is one workload of the engine experiment.
type engineKernel struct {
	name    string
	threads int
	block   int
	setup   func(m *pm.Machine, n int) (scope.Kernel, error)
}

var engineKernels = []engineKernel{
	{"vector-add", 1 << 20, 256, func(m *pm.Machine, n int) (scope.Kernel, error) {
		x, err1 := m.Alloc(pm.DeviceMem, uint64(4*n))
		y, err2 := m.Alloc(pm.DeviceMem, uint64(4*n))
		z, err3 := m.CreateRegion("z", uint64(4*n))
		if err := firstErr(err1, err2, err3); err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			off := uint64(4 * t.ID())
			t.Store32(z.Base.Add(off), t.Load32(x.Add(off))+t.Load32(y.Add(off)))
		}, nil
	}},
	{"block-reduce", 1 << 20, 256, func(m *pm.Machine, n int) (scope.Kernel, error) {
		x, err1 := m.Alloc(pm.DeviceMem, uint64(4*n))
		z, err2 := m.CreateRegion("sums", uint64(4*n/256))
		if err := firstErr(err1, err2); err != nil {
			return nil, err
		}
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
				t.DFence()
			}
		}, nil
	}},
	{"release-acquire", 1 << 20, 256, func(m *pm.Machine, n int) (scope.Kernel, error) {
		// Each block's warp 0 persists and releases at block scope; the
		// other warps acquire and persist after it.
		data, err1 := m.CreateRegion("data", uint64(8*n))
		flags, err2 := m.Alloc(pm.DeviceMem, uint64(4*n/256))
		if err := firstErr(err1, err2); err != nil {
			return nil, err
		}
		return func(t *scope.Thread) {
			flag := flags.Add(uint64(4 * t.Block()))
			me := data.Base.Add(uint64(8 * t.ID()))
			if t.WarpInBlock() == 0 {
				t.Store64(me, uint64(t.ID()))
				t.OFence()
				if t.Lane() == 0 {
					t.PRel(flag, 1, pm.Block)
				}
				return
			}
			for t.PAcq(flag, pm.Block) == 0 {
			}
			t.Store64(me, uint64(t.ID()))
		}, nil
	}},
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func runEngine(ctx context.Context, o Options) ([]Row, error) {
	var rows []Row
	for _, k := range engineKernels {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		n := k.threads
		if o.Quick && k.name != "vector-add" {
			n /= 8
		}
		m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
		if err != nil {
			return nil, err
		}
		kern, err := k.setup(m, n)
		if err != nil {
			return nil, fmt.Errorf("engine %s: %w", k.name, err)
		}
		start := time.Now()
		res, err := scope.Launch(m, scope.Grid{Blocks: n / k.block, Threads: k.block}, kern, scope.WithName(k.name))
		wall := time.Since(start).Seconds()
		if err != nil {
			return nil, fmt.Errorf("engine %s: %w", k.name, err)
		}
		add := func(metric string, v float64) {
			rows = append(rows, Row{"engine", k.name, "functional", metric, v})
		}
		add("threads", float64(res.Blocks*res.Threads))
		add("verbs", float64(res.Verbs))
		add("verbs_per_s", float64(res.Verbs)/wall)
		add("coroutines", float64(res.Coroutines))
	}
	return rows, nil
}
