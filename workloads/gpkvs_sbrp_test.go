package workloads

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// TestKVSInsertCorrect runs gpkvs-sbrp at Tiny and Quick size on the
// functional backend and under SBRP and Epoch on hwmodel: the table holds
// the batch (the Tiny one includes an update of a preloaded element), each
// element in one of its buckets, and recovery after the commit changes
// nothing.
func TestKVSInsertCorrect(t *testing.T) {
	for _, size := range []Size{Tiny, Quick} {
		for _, be := range []string{"functional", "sbrp", "epoch"} {
			t.Run(fmt.Sprintf("%s/%s", sizeNames[size], be), func(t *testing.T) {
				var b pm.Backend = functional.New(pm.DefaultGPU)
				if be != "functional" {
					model, err := hwmodel.ParseModel(be)
					require.NoError(t, err)
					h, err := hwmodel.New(hwmodel.PresetPMNear(), model)
					require.NoError(t, err)
					b = h
				}
				w, err := NewKVSInsert(kvsInsertShape(size), true)
				require.NoError(t, err)
				m, err := pm.NewMachine(b)
				require.NoError(t, err)
				require.NoError(t, w.Setup(m))
				require.NoError(t, w.Check(m)) // before the batch
				require.NoError(t, w.Run(m))
				require.NoError(t, w.Check(m))
				c, err := m.Memory().Load(mustRegion(t, m, kvsiCommit), 8)
				require.NoError(t, err)
				require.EqualValues(t, 1, c)
				// Recovery after a committed batch changes nothing.
				require.NoError(t, w.Recover(m))
				require.NoError(t, w.Check(m))
			})
		}
	}
}

func mustRegion(t *testing.T, m *pm.Machine, name string) pm.Addr {
	t.Helper()
	b, err := openRegions(m, name)
	require.NoError(t, err)
	return b[0]
}

// TestKVSInsertCrashes explores the Tiny run's crash states under SBRP and
// Epoch: recovery always restores the table before or after the batch, and
// without the log's OFences the checker finds an update durable without
// its undo entry.
func TestKVSInsertCrashes(t *testing.T) {
	for _, model := range []crash.Model{crash.SBRP, crash.Epoch} {
		t.Run(model.String(), func(t *testing.T) {
			const seed = 5
			t.Logf("seed = %d", seed)
			w, err := New("gpkvs-sbrp", Tiny)
			require.NoError(t, err)
			rep, err := crash.Check(w, pm.DefaultGPU, crash.Config{Model: model, States: crashStates(), Seed: seed})
			require.NoError(t, err)
			for _, v := range rep.Violations {
				t.Logf("violation: %v", v.Err)
			}
			require.Empty(t, rep.Violations, rep.Summary())
			t.Log(rep.Summary())

			bug, err := New("gpkvs-sbrp-no-ofence", Tiny)
			require.NoError(t, err)
			rep, err = crash.Check(bug, pm.DefaultGPU, crash.Config{Model: model, States: 10000, Seed: seed, Shrink: true})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations, rep.Summary())
			v := rep.Violations[0]
			t.Log(v.Explanation)
			require.ErrorIs(t, v.Err, ErrInconsistent)
			require.Contains(t, v.Explanation, "at "+siteOf(t, "gpkvs_sbrp.go", "t.Store32(l.loc(b, s), v)"))
		})
	}
}

// TestKVSInsertBadShape checks that impossible shapes are errors.
func TestKVSInsertBadShape(t *testing.T) {
	good := kvsInsertShape(Tiny)
	for _, f := range []func(*KVSInsertShape){
		func(s *KVSInsertShape) { s.Threads = 6 },
		func(s *KVSInsertShape) { s.Buckets = 6 },
		func(s *KVSInsertShape) { s.Blocks = 0 },
		func(s *KVSInsertShape) { s.Updates = 3 },
		func(s *KVSInsertShape) { s.PerGroup = 0 },
	} {
		sh := good
		f(&sh)
		_, err := NewKVSInsert(sh, true)
		require.ErrorIs(t, err, ErrConfig, "%+v", sh)
	}
}
