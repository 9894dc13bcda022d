//go:build unix

package bench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm/native"
)

// Every side of btree-vs-pebble runs every workload on the same preloaded
// keys (each operation checks the keys it reads or deletes are there), and
// the metrics count what was run.
func TestBtreeVsPebbleSides(t *testing.T) {
	sh := ordShape{keys: 4096}
	sides := []ordSys{
		{"btree", func(dir string, keys []uint64) (ordStore, error) { return openBtreeDB(dir, native.ModeLog, keys) }},
		{"pebble", openPebbleOrd},
		{"bbolt", openBolt},
	}
	for _, w := range ordWorks() {
		for _, s := range sides {
			t.Run(fmt.Sprintf("%s/%s/b%d", s.name, w.name, w.batch), func(t *testing.T) {
				r, err := startOrd(sh, s, t.TempDir(), w)
				require.NoError(t, err)
				require.NoError(t, r.run(0, minOps))
				ms, err := r.finish()
				require.NoError(t, err)
				got := map[string]float64{}
				for _, m := range ms {
					got[m.name] = m.v
				}
				require.Equal(t, float64(minOps), got["ops"])
				require.Positive(t, got["keys_per_s"])
				require.GreaterOrEqual(t, got["op_p99_us"], got["op_p50_us"])
			})
		}
	}
}

// The same operations give the same contents: after a run of batches and
// of deletes, the B+tree, Pebble and bbolt answer alike for every key.
func TestBtreeVsPebbleSameContents(t *testing.T) {
	sh := ordShape{keys: 2048}
	open := []func(string, []uint64) (ordStore, error){
		func(dir string, keys []uint64) (ordStore, error) { return openBtreeDB(dir, native.ModeLog, keys) },
		openPebbleOrd, openBolt,
	}
	for _, w := range []ordWork{{"put", 100}, {"delete", 1}} {
		var want []bool
		for i, o := range open {
			r, err := startOrd(sh, ordSys{"side", o}, t.TempDir(), w)
			require.NoError(t, err)
			require.NoError(t, r.run(0, 5))
			present := make([]bool, len(r.keys))
			for j, k := range r.keys {
				present[j] = r.st.get(k) == nil
			}
			require.NoError(t, r.st.close())
			if i == 0 {
				want = present
				continue
			}
			require.Equal(t, want, present, "side %d, %s", i, w.name)
		}
	}
}
