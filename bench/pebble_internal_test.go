//go:build unix

package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm/native"
)

// The sides of kvs-vs-pebble run the same batches: after the same run
// (three batches, no time budget) gpKVS in each native mode, with its
// batches on the host and as kernels, and Pebble hold
// the same value for every key, and the metrics count what was run.
func TestKVSVsPebbleSameBatches(t *testing.T) {
	sh := kvsBenchShape{keySpace: 1 << 12}
	sides := map[string]func(dir string, batch int, pre []uint32) (kvSide, error){
		"native-log": func(dir string, batch int, pre []uint32) (kvSide, error) {
			return openNative(dir, native.ModeLog, sh.keySpace/2, batch, pre, false)
		},
		"native-log-kernels": func(dir string, batch int, pre []uint32) (kvSide, error) {
			return openNative(dir, native.ModeLog, sh.keySpace/2, batch, pre, true)
		},
		"native-unsafe-nosync": func(dir string, batch int, pre []uint32) (kvSide, error) {
			return openNative(dir, native.ModeUnsafeNoSync, sh.keySpace/2, batch, pre, false)
		},
		"pebble": func(dir string, _ int, pre []uint32) (kvSide, error) { return openPebble(dir, pre) },
	}
	for _, mix := range []string{"set", "get95"} {
		for _, batch := range []int{1, 100} {
			var want []uint64
			for name, open := range sides {
				ms, final, err := runKVSSideFinal(sh, open, t.TempDir(), mix, batch, true)
				require.NoError(t, err, "%s %s/b%d", name, mix, batch)
				got := map[string]float64{}
				for _, m := range ms {
					got[m.name] = m.v
				}
				require.Equal(t, float64(minBatches), got["batches"])
				require.Equal(t, float64(minBatches*batch), got["sets"]+got["gets"])
				require.Positive(t, got["keys_per_s"])
				if want == nil {
					want = final
					continue
				}
				require.Equal(t, want, final, "%s %s/b%d", name, mix, batch)
			}
			nonzero := 0
			for _, v := range want {
				if v != 0 {
					nonzero++
				}
			}
			require.Positive(t, nonzero)
		}
	}
}
