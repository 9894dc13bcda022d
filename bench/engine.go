package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/scopedpm/scopedpm/internal/testkit/speed"
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

// engineKernel is one workload of the engine experiment: a kernel of the
// benchmark kernels' table (internal/testkit/speed), at a size, with what the
// experiment adds to it.
type engineKernel struct {
	name    string
	threads int
	// then, if set, runs in each thread after the kernel.
	then func(t *scope.Thread)
}

var engineKernels = []engineKernel{
	{"vector-add", 1 << 20, nil},
	// Thread 0 of each block makes its block's sum durable.
	{"block-reduce", 1 << 20, func(t *scope.Thread) {
		if t.TID() == 0 {
			t.DFence()
		}
	}},
	{"release-acquire", 1 << 20, nil},
}

// setup allocates k's memory on m for n threads and returns its kernel and
// grid.
func (k engineKernel) setup(m *pm.Machine, n int) (scope.Kernel, scope.Grid, error) {
	sk, err := speed.Lookup(k.name)
	if err != nil {
		return nil, scope.Grid{}, err
	}
	kern, err := sk.Setup(m, n, &speed.Probe{}) // a disarmed probe
	if err != nil || k.then == nil {
		return kern, sk.Grid(n), err
	}
	return func(t *scope.Thread) {
		kern(t)
		k.then(t)
	}, sk.Grid(n), nil
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
		kern, grid, err := k.setup(m, n)
		if err != nil {
			return nil, fmt.Errorf("engine %s: %w", k.name, err)
		}
		start := time.Now()
		res, err := scope.Launch(m, grid, kern, scope.WithName(k.name))
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
