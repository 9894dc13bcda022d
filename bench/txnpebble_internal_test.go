//go:build unix

package bench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm/native"
)

// bankSides are the sides of txn-vs-pebble in log mode.
func bankSides() []bankSys {
	return []bankSys{
		{"txn", func(dir string, n int) (bankStore, error) { return openTxnBank(dir, native.ModeLog, n) }},
		{"pebble", openPebbleBank},
		{"bbolt", openBoltBank},
	}
}

// Every side of txn-vs-pebble runs every batch size, and the metrics count
// what was run.
func TestTxnVsPebbleSides(t *testing.T) {
	sh := bankShape{accounts: 1024}
	for _, batch := range bankBatches {
		for _, s := range bankSides() {
			t.Run(fmt.Sprintf("%s/b%d", s.name, batch), func(t *testing.T) {
				r, err := startBank(sh, s, t.TempDir(), batch)
				require.NoError(t, err)
				require.NoError(t, r.run(0, minOps))
				ms, err := r.finish()
				require.NoError(t, err)
				got := map[string]float64{}
				for _, m := range ms {
					got[m.name] = m.v
				}
				require.Equal(t, float64(minOps), got["ops"])
				require.Positive(t, got["transfers_per_s"])
				require.GreaterOrEqual(t, got["op_p99_us"], got["op_p50_us"])
			})
		}
	}
}

// The same transfers give the same balances: after the same batches, the
// txn store, Pebble and bbolt hold the same balance in every account, and
// the total is conserved.
func TestTxnVsPebbleSameContents(t *testing.T) {
	sh := bankShape{accounts: 512}
	for _, batch := range []int{1, 100} {
		var want []uint64
		for i, s := range bankSides() {
			r, err := startBank(sh, s, t.TempDir(), batch)
			require.NoError(t, err)
			require.NoError(t, r.run(0, 7))
			got := make([]uint64, sh.accounts)
			var total uint64
			for id := range got {
				got[id], err = r.st.balance(uint64(id))
				require.NoError(t, err)
				total += got[id]
			}
			require.NoError(t, r.st.close())
			require.Equal(t, uint64(sh.accounts)*bankOpening, total, "%s, b%d", s.name, batch)
			if i == 0 {
				want = got
				opening := make([]uint64, sh.accounts)
				for id := range opening {
					opening[id] = bankOpening
				}
				require.NotEqual(t, opening, want, "the transfers moved money")
				continue
			}
			require.Equal(t, want, got, "%s, b%d", s.name, batch)
		}
	}
}
