package bench

import (
	"context"
	"fmt"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	Register(Experiment{
		Name:        "micro-persist",
		Description: "hwmodel micro-benchmarks per preset and model: persist+DFence latency, streaming write bandwidth, cost of ordering verbs",
		Presets:     microPresets,
		Default:     true,
		Run:         runMicro,
	})
}

// microPresets are the SBRP machines; the others are in hwmodel.Presets.
var microPresets = []string{"pm-near", "pm-far", "pm-far-eadr"}

// cycles runs kernel k (built on the fresh machine by mk) and returns the
// launch's cycles from its first instruction: a micro-benchmark times its
// verbs, not the launch latency (gpu.launch_latency_cycles) every launch
// pays before them.
func cycles(preset string, model hwmodel.Model, o Options, g scope.Grid, mk func(m *pm.Machine) (scope.Kernel, error)) (uint64, *hwmodel.Backend, error) {
	m, be, err := o.machine(preset, model, nil)
	if err != nil {
		return 0, nil, err
	}
	k, err := mk(m)
	if err != nil {
		return 0, nil, err
	}
	res, err := scope.Launch(m, g, k)
	if err != nil {
		return 0, nil, err
	}
	return res.Stats.Cycles - launchLatency(be), be, nil
}

// launchLatency returns the launch latency of be's machine.
func launchLatency(be *hwmodel.Backend) uint64 {
	return uint64(be.Config().GPU.LaunchLatencyCycles)
}

func runMicro(ctx context.Context, o Options) ([]Row, error) {
	var rows []Row
	iters := 64
	streamBlocks := 240
	if o.Quick {
		iters, streamBlocks = 16, 60
	}
	for _, preset := range microPresets {
		for _, model := range hwmodel.Models() {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			cfgName := preset + "/" + model.String()
			add := func(workload, metric string, v float64) {
				rows = append(rows, Row{"micro-persist", workload, cfgName, metric, v})
			}
			// (a) one persist, then DFence, by one thread.
			c, _, err := cycles(preset, model, o, scope.Grid{Blocks: 1, Threads: 1}, func(m *pm.Machine) (scope.Kernel, error) {
				r, err := m.CreateRegion("r", 128)
				return func(t *scope.Thread) {
					t.Store64(r.Base, 1)
					t.DFence()
				}, err
			})
			if err != nil {
				return nil, fmt.Errorf("%s persist-dfence: %w", cfgName, err)
			}
			add("persist-dfence", "cycles", float64(c))

			// (b) every thread streams 8-byte persists; a warp fills a
			// 256-byte run per iteration, so lines are written whole.
			const bs = 256
			threads := streamBlocks * bs
			c, be, err := cycles(preset, model, o, scope.Grid{Blocks: streamBlocks, Threads: bs}, func(m *pm.Machine) (scope.Kernel, error) {
				r, err := m.CreateRegion("r", uint64(8*threads*iters))
				return func(t *scope.Thread) {
					for i := range iters {
						t.Store64(r.Base.Add(uint64(8*(i*threads+t.ID()))), uint64(i))
					}
					t.DFence()
				}, err
			})
			if err != nil {
				return nil, fmt.Errorf("%s stream: %w", cfgName, err)
			}
			// Bandwidth counts until the last persist is durable: under
			// None the kernel does not wait for its persists, but they
			// still have to cross the link.
			drained := be.Now() - be.LastStart() - launchLatency(be)
			bytes := float64(8 * threads * iters)
			ghz := be.Config().GPU.ClockMHz / 1000
			add("stream", "cycles", float64(c))
			add("stream", "durable_cycles", float64(drained))
			add("stream", "write_gbps", bytes/float64(drained)*ghz)

			// (c) the cost of ordering verbs: a loop of (persist, verb)
			// against a loop of persists alone, per iteration.
			base, err := verbLoop(preset, model, o, iters, "none")
			if err != nil {
				return nil, fmt.Errorf("%s verb loop: %w", cfgName, err)
			}
			for _, verb := range []string{"ofence", "prel-pacq-block", "prel-pacq-device", "epoch-barrier"} {
				c, err := verbLoop(preset, model, o, iters, verb)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", cfgName, verb, err)
				}
				add(verb, "cycles_per_op", (float64(c)-float64(base))/float64(iters))
			}
		}
	}
	return rows, nil
}

// verbLoop runs one block of 64 threads (two warps) that each persist and
// then issue verb, iters times, and returns the cycles. For the release and
// acquire pairs, warp 0 releases a flag per iteration and warp 1 acquires
// it before its own persist.
func verbLoop(preset string, model hwmodel.Model, o Options, iters int, verb string) (uint64, error) {
	c, _, err := cycles(preset, model, o, scope.Grid{Blocks: 1, Threads: 64}, func(m *pm.Machine) (scope.Kernel, error) {
		r, err := m.CreateRegion("r", uint64(8*64*iters))
		if err != nil {
			return nil, err
		}
		flags, err := m.Alloc(pm.DeviceMem, uint64(4*iters))
		return func(t *scope.Thread) {
			for i := range iters {
				t.Store64(r.Base.Add(uint64(8*(i*64+t.TID()))), uint64(i))
				switch verb {
				case "ofence":
					t.OFence()
				case "epoch-barrier":
					t.EpochBarrier()
				case "prel-pacq-block", "prel-pacq-device":
					s := pm.Block
					if verb == "prel-pacq-device" {
						s = pm.Device
					}
					f := flags.Add(uint64(4 * i))
					if t.WarpInBlock() == 0 {
						if t.Lane() == 0 {
							t.PRel(f, 1, s)
						}
					} else {
						for t.PAcq(f, s) == 0 {
						}
					}
				}
			}
		}, err
	})
	return c, err
}
