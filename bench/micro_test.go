package bench_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/bench"
	"github.com/scopedpm/scopedpm/hwmodel"
)

func rowsBy(rows []bench.Row) map[[3]string]float64 {
	out := map[[3]string]float64{}
	for _, r := range rows {
		out[[3]string{r.Workload, r.Config, r.Metric}] = r.Value
	}
	return out
}

func TestMicroPersist(t *testing.T) {
	skipSlow(t, "micro-persist")
	e, ok := bench.Lookup("micro-persist")
	require.True(t, ok)
	rows := quickRows(t, e.Name)
	v := rowsBy(rows)
	near, far := hwmodel.PresetPMNear(), hwmodel.PresetPMFar()
	// The persistence point: the PM queue behind the L2 (ack at the
	// queue, the SBRP machines' setting), else the NVM write.
	point := float64(near.NVM.WriteLatencyCycles)
	if near.Persist.AckAtQueue {
		point = float64(near.L2.LatencyCycles)
	}
	for _, model := range []string{"strict", "epoch", "gpm", "sbrp", "scoped-barrier"} {
		// Physics: a persist then DFence never beats the persistence
		// point (far adds the link), streaming never beats the write
		// bandwidth (42 GB/s near, 28 GB/s far).
		require.GreaterOrEqual(t, v[[3]string{"persist-dfence", "pm-near/" + model, "cycles"}], point, model)
		require.GreaterOrEqual(t, v[[3]string{"persist-dfence", "pm-far/" + model, "cycles"}], point+float64(far.PCIe.LatencyCycles), model)
		// Under ADR a write is durable once its memory queue took it, so
		// a stream can be ahead of the bandwidth by what the queues hold
		// (mem.channels x mem.write_queue_entries lines), and no more.
		for _, c := range []struct {
			preset string
			gbps   float64
		}{{"pm-near", 42}, {"pm-far", 28}} {
			cfg, err := hwmodel.Preset(c.preset)
			require.NoError(t, err)
			queued := float64(cfg.Mem.Channels * cfg.Mem.WriteQueueEntries * cfg.L1.LineBytes)
			cycles := v[[3]string{"stream", c.preset + "/" + model, "durable_cycles"}]
			most := c.gbps * (1 + queued/(c.gbps*1e3/cfg.GPU.ClockMHz*cycles))
			require.LessOrEqual(t, v[[3]string{"stream", c.preset + "/" + model, "write_gbps"}], most, "%s %s", c.preset, model)
		}
	}
	// SBRP buffers block-scope release/acquire; Epoch pays a write-back
	// and acks for each. (A store then OFence in a loop is bound by one
	// ack round trip per iteration under both: SBRP's warp does not stall
	// at the OFence, but its buffer's head waits for the order, so the
	// loop is no faster; at quick size 150 cycles per op against Epoch's
	// 144.)
	require.Less(t, v[[3]string{"prel-pacq-block", "pm-near/sbrp", "cycles_per_op"}], v[[3]string{"prel-pacq-block", "pm-near/epoch", "cycles_per_op"}])
	for _, model := range []string{"sbrp", "epoch"} {
		require.Greater(t, v[[3]string{"ofence", "pm-near/" + model, "cycles_per_op"}], 0.0, "ordering the loop costs nothing under %s", model)
	}

	// -set reaches the model: halving the NVM write bandwidth halves the
	// near stream's bandwidth (give or take).
	if testing.Short() {
		return // the run below repeats the whole experiment
	}
	rows, err := e.Run(context.Background(), bench.Options{Quick: true, Set: []string{"nvm.write_gbps=21"}})
	require.NoError(t, err)
	half := rowsBy(rows)[[3]string{"stream", "pm-near/sbrp", "write_gbps"}]
	require.InDelta(t, v[[3]string{"stream", "pm-near/sbrp", "write_gbps"}]/2, half, 2.0)

	// Block scope costs SBRP less than device scope. In this loop the
	// acquiring warp races the releasing one, and how often its acquires
	// find the flag not yet set depends on how many verbs a warp runs
	// ahead in a step (block scope: 114.5, 94.5, 105.3, 114.8 and 136
	// cycles an iteration at 1, 2, 3, 4 and 8 verbs a step; device scope
	// 125 at each), so the race is run a verb at a time.
	rows, err = e.Run(context.Background(), bench.Options{Quick: true, Set: []string{"gpu.step_verbs=1"}})
	require.NoError(t, err)
	one := rowsBy(rows)
	require.Less(t, one[[3]string{"prel-pacq-block", "pm-near/sbrp", "cycles_per_op"}], one[[3]string{"prel-pacq-device", "pm-near/sbrp", "cycles_per_op"}])
	_, err = e.Run(context.Background(), bench.Options{Quick: true, Set: []string{"nvm.no_such_key=1"}})
	require.Error(t, err)
}
