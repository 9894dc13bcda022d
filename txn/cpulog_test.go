package txn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/txn"
)

// A CPULog's recovery finds every batch that verifies under the current
// generation, wherever it lies: a batch torn by a crash (its ordering point
// had not completed) is skipped without hiding the batches after it (which
// another StrandWeaver strand may have made durable first), entries of a
// committed generation are never live, and OpenCPU finds the tail again.
func TestCPULogBatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear int // batch whose first entry's byte is torn, -1 for none
		want []string
	}{
		{"whole", -1, []string{"a1", "a2", "b1", "c1", "c2", "c3"}},
		{"first torn", 0, []string{"b1", "c1", "c2", "c3"}},
		{"middle torn", 1, []string{"a1", "a2", "c1", "c2", "c3"}},
		{"last torn", 2, []string{"a1", "a2", "b1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			h := txn.Host(m)
			l, err := txn.CreateCPU(m, "log", 2, 1024)
			require.NoError(t, err)
			// A committed generation's entries first: never live again.
			require.NoError(t, l.InsertMany(h, 1, [][]byte{[]byte("old1"), []byte("old2")}))
			require.NoError(t, l.Clear(h, 1))
			batches := [][][]byte{
				{[]byte("a1"), []byte("a2")},
				{[]byte("b1")},
				{[]byte("c1"), []byte("c2"), []byte("c3")},
			}
			var starts []int
			for _, b := range batches {
				n, err := l.Size(h, 1)
				require.NoError(t, err)
				starts = append(starts, (n+txn.CPULine-1)/txn.CPULine*txn.CPULine)
				require.NoError(t, l.InsertMany(h, 1, b))
			}
			if tc.tear >= 0 {
				a := l.Stream(1).Base.Add(uint64(starts[tc.tear] + 8))
				require.NoError(t, m.CopyIn(a, []byte{0xff}))
			}
			l2, err := txn.OpenCPU(m, "log")
			require.NoError(t, err)
			require.NoError(t, l2.Check(h))
			es, err := l2.Entries(h, 1)
			require.NoError(t, err)
			var got []string
			for _, e := range es {
				got = append(got, string(e))
			}
			require.Equal(t, tc.want, got)
			n, err := l2.Size(h, 1)
			require.NoError(t, err)
			require.Positive(t, n)
			es, err = l2.Entries(h, 0)
			require.NoError(t, err)
			require.Empty(t, es, "partition 0 untouched")
			require.NoError(t, l2.Clear(h, 1))
			es, err = l2.Entries(h, 1)
			require.NoError(t, err)
			require.Empty(t, es)
		})
	}
	// Bad geometry and a foreign region.
	m := newMachine(t)
	_, err := txn.CreateCPU(m, "x", 0, 1024)
	require.ErrorIs(t, err, txn.ErrBadArg)
	_, err = txn.CreateCPU(m, "x", 1, 8)
	require.ErrorIs(t, err, txn.ErrBadArg)
	_, err = txn.CreateConv(m, "conv", 1, 256)
	require.NoError(t, err)
	_, err = txn.OpenCPU(m, "conv")
	require.ErrorIs(t, err, txn.ErrCorrupt)
	l, err := txn.CreateCPU(m, "log", 1, 128)
	require.NoError(t, err)
	require.ErrorIs(t, l.Insert(txn.Host(m), 1, nil), txn.ErrBadArg)
	require.ErrorIs(t, l.InsertMany(txn.Host(m), 0, [][]byte{make([]byte, 200)}), txn.ErrFull)
	require.Equal(t, pm.Range{Name: "log", Base: l.Region().Base.Add(2 * txn.Line), Size: 128, Kind: l.Region().Kind}, l.Stream(0))
}
