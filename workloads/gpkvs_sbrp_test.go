package workloads

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

// TestKVSInsertCorrect runs gpkvs-sbrp at Tiny and Quick size on the
// functional backend and under SBRP and Epoch on hwmodel: the table holds
// the batch (the Tiny one includes an update of a preloaded element), each
// element in one of its buckets, and recovery after the commit changes
// nothing.
func TestKVSInsertCorrect(t *testing.T) {
	for _, size := range []Size{Tiny, Quick} {
		for _, be := range shapeBackends {
			t.Run(fmt.Sprintf("%s/%s", sizeNames[size], be), func(t *testing.T) {
				w, err := NewKVSInsert(kvsInsertShape(size), true)
				require.NoError(t, err)
				m := newShapeMachine(t, be)
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
	checkCrashesAndBug(t, "gpkvs-sbrp", "gpkvs-sbrp-no-ofence", 5, "gpkvs_sbrp.go", "t.Store32(l.loc(b, s), l.readElem(t, p).loc)")
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
