package txn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
)

// newRecorded returns a machine on a recorder around the functional backend.
func newRecorded(t testing.TB) (*pm.Machine, *record.Recorder) {
	rec := record.New(functional.New(pm.GPULimits{}), false)
	m, err := pm.NewMachine(rec)
	require.NoError(t, err)
	return m, rec
}

func newMachine(t testing.TB) *pm.Machine {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	return m
}

// forEachPrefix reopens, for k = 0..len(ps), the image in which exactly the
// first k persists are durable and calls f with it.
func forEachPrefix(t *testing.T, base *pm.Image, ps []pm.Persist, f func(k int, m *pm.Machine)) {
	t.Helper()
	for k := 0; k <= len(ps); k++ {
		img, err := record.Image(base, ps[:k])
		require.NoError(t, err)
		m, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
		require.NoError(t, err)
		f(k, m)
	}
}

// seeded returns a logged, replayable random source.
func seeded(t testing.TB, seed uint64) *rand.Rand {
	t.Logf("seed = %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func readPM(t testing.TB, m *pm.Machine, a pm.Addr, n int) []byte {
	b := make([]byte, n)
	require.NoError(t, m.CopyOut(a, b))
	return b
}

func newBackend() pm.Backend { return functional.New(pm.GPULimits{}) }
