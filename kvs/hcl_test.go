package kvs_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/record"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

// logOnce launches grid on a fresh hwmodel machine; every thread inserts
// one entry of payload bytes into its partition of the log mk makes. It
// returns the launch's statistics and the recorded verbs.
func logOnce(t *testing.T, model hwmodel.Model, grid scope.Grid, payload int, mk func(m *pm.Machine) (txn.Log, error)) (hwmodel.Stats, []record.Event) {
	t.Helper()
	cfg, err := hwmodel.Preset("pm-near")
	require.NoError(t, err)
	be, err := hwmodel.New(cfg, model)
	require.NoError(t, err)
	rec := record.New(be, false)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	l, err := mk(m)
	require.NoError(t, err)
	rec.Reset()
	var kerr error
	_, err = scope.Launch(m, grid, func(th *scope.Thread) {
		x := kvs.GPUExec(th)
		p, err := l.Part(x)
		if err == nil {
			err = l.Insert(x, p, make([]byte, payload))
		}
		if err != nil && kerr == nil {
			kerr = err
		}
	})
	require.NoError(t, err)
	require.NoError(t, kerr)
	return be.LastLaunch(), rec.Events()
}

// HCL's claim (GPM §5.2), checked on hwmodel's statistics: when every lane
// of a warp inserts, each 4-byte stripe of the warp's entries is one
// coalesced 128-byte write, and no lock is taken. The slots' tails (8
// bytes per lane) add two lines per warp.
func TestHCLCoalescesOneLinePerWarpPerStripe(t *testing.T) {
	for _, model := range []hwmodel.Model{hwmodel.SBRP, hwmodel.Epoch, hwmodel.GPM} {
		for _, tc := range []struct {
			grid    scope.Grid
			payload int
		}{
			{scope.Grid{Blocks: 1, Threads: 32}, 4},
			{scope.Grid{Blocks: 2, Threads: 64}, 4},
			{scope.Grid{Blocks: 2, Threads: 64}, 20},
			{scope.Grid{Blocks: 3, Threads: 128}, 36},
		} {
			t.Run(fmt.Sprintf("%v/%dx%d/%dB", model, tc.grid.Blocks, tc.grid.Threads, tc.payload), func(t *testing.T) {
				st, events := logOnce(t, model, tc.grid, tc.payload, func(m *pm.Machine) (txn.Log, error) {
					return txn.CreateHCL(m, "log", tc.grid.Blocks, tc.grid.Threads, 256)
				})
				warps := uint64(tc.grid.Total() / 32)
				stripes := uint64((tc.payload+3)/4*4+8) / 4 // payload rounded to 4, plus the 8-byte trailer
				tails := uint64(32*8) / 128
				require.Equal(t, warps*(stripes+tails), st.Flushes, "one line per warp per stripe, plus the tails")
				require.Equal(t, 128*st.Flushes, st.NVMWriteBytes, "every write is a whole 128-byte line")
				require.Equal(t, st.Persists-st.Flushes, st.CoalescedWrites)
				for _, e := range events {
					require.NotEqual(t, pm.OpAtomic, e.Op.Kind, "HCL takes no lock: %v", &e)
				}

				// A conventional log doing the same inserts writes more lines
				// and takes a lock per insert.
				cst, cevents := logOnce(t, model, tc.grid, tc.payload, func(m *pm.Machine) (txn.Log, error) {
					return txn.CreateConv(m, "log", tc.grid.Blocks, uint64(tc.grid.Threads*(tc.payload+16)))
				})
				require.Greater(t, cst.Flushes, st.Flushes)
				atomics := 0
				for _, e := range cevents {
					if e.Op.Kind == pm.OpAtomic {
						atomics++
					}
				}
				require.GreaterOrEqual(t, atomics, tc.grid.Total())
			})
		}
	}
}
