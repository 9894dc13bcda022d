package kvs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/native"
)

// ops are every operation of a store that touches it, each returning its
// error.
var ops = []struct {
	name string
	do   func(st *kvs.Store) error
}{
	{"Put", func(st *kvs.Store) error { return st.Put(9, 90) }},
	{"Get", func(st *kvs.Store) error { _, _, err := st.Get(1); return err }},
	{"Delete", func(st *kvs.Store) error { _, err := st.Delete(1); return err }},
	{"SetBatch", func(st *kvs.Store) error { _, err := st.SetBatch([]uint32{9, 10}, []uint64{1, 2}); return err }},
	{"DeleteBatch", func(st *kvs.Store) error { _, err := st.DeleteBatch([]uint32{1, 2}); return err }},
	{"GetBatch", func(st *kvs.Store) error { _, _, err := st.GetBatch([]uint32{1, 1}); return err }},
	{"Recover", func(st *kvs.Store) error { _, err := st.Recover(); return err }},
	{"Contents", func(st *kvs.Store) error { _, err := st.Contents(); return err }},
	{"Check", func(st *kvs.Store) error { return st.Check() }},
	{"Len", func(st *kvs.Store) error { _, err := st.Len(); return err }},
	{"Close", func(st *kvs.Store) error { return st.Close() }},
}

// batchPaths are the two ways a store runs its batches: as kernels and on
// the host.
var batchPaths = []struct {
	name string
	opts []kvs.Option
}{{"kernels", nil}, {"host", []kvs.Option{kvs.HostBatches()}}}

// Every operation on a closed store returns an error wrapping ErrClosed.
func TestClosedStore(t *testing.T) {
	for _, path := range batchPaths {
		for _, op := range ops {
			t.Run(path.name+"/"+op.name, func(t *testing.T) {
				st, err := kvs.Create(newMachine(t), kvs.Config{Buckets: 8, MaxBatch: 4}, path.opts...)
				require.NoError(t, err)
				require.NoError(t, st.Put(1, 10))
				require.NoError(t, st.Close())
				require.ErrorIs(t, op.do(st), kvs.ErrClosed)
			})
		}
	}
}

// On a closed backend a Put fails with the backend's ErrClosed, and so do
// the batches after it: the failed Put changed nothing, so the store does
// not claim to need recovery.
func TestClosedBackend(t *testing.T) {
	for _, path := range batchPaths {
		t.Run(path.name, func(t *testing.T) { closedBackend(t, path.opts) })
	}
}

func closedBackend(t *testing.T, opts []kvs.Option) {
	be, err := native.Open(t.TempDir(), native.Options{Mode: native.ModeLog})
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	st, err := kvs.Create(m, kvs.Config{Buckets: 8, MaxBatch: 4}, opts...)
	require.NoError(t, err)
	require.NoError(t, st.Put(1, 10))
	require.NoError(t, be.Close())

	require.ErrorIs(t, st.Put(2, 20), native.ErrClosed)
	for _, op := range []func() error{
		func() error { _, err := st.Delete(1); return err },
		func() error { _, err := st.DeleteBatch([]uint32{1, 2}); return err },
		func() error { _, err := st.SetBatch([]uint32{3}, []uint64{30}); return err },
		func() error { _, _, err := st.GetBatch([]uint32{1}); return err },
	} {
		err := op()
		require.ErrorIs(t, err, native.ErrClosed)
		require.NotErrorIs(t, err, kvs.ErrNeedsRecovery)
	}
	require.False(t, st.NeedsRecovery())
}

// failAt is a functional backend whose launch named name fails (with
// errInjected) while armed.
type failAt struct {
	pm.Backend
	name  string
	armed bool
}

var errInjected = errors.New("injected launch failure")

func (f *failAt) Begin(l pm.Launch) error {
	if f.armed && l.Name == f.name {
		return errInjected
	}
	return f.Backend.Begin(l)
}

func (f *failAt) Unwrap() pm.Backend { return f.Backend }

// A batch that fails at a launch: before its first kernel the store takes
// the next batch; part-way, the next operations report ErrNeedsRecovery
// wrapping the failure, and Recover rolls the batch back.
func TestFailedBatch(t *testing.T) {
	for _, tc := range []struct {
		launch        string
		needsRecovery bool
	}{
		{"gpkvs-begin", false},
		{"gpkvs-set", true},
		{"gpkvs-commit", true},
	} {
		t.Run(tc.launch, func(t *testing.T) {
			be := &failAt{Backend: functional.New(pm.GPULimits{}), name: tc.launch}
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			st, err := kvs.Create(m, kvs.Config{Buckets: 8, MaxBatch: 4, Log: kvs.LogConv})
			require.NoError(t, err)
			require.NoError(t, st.Put(1, 10))
			be.armed = true
			err = st.Put(1, 11)
			require.ErrorIs(t, err, errInjected)
			be.armed = false
			require.Equal(t, tc.needsRecovery, st.NeedsRecovery())
			_, err = st.Delete(1)
			if !tc.needsRecovery {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, kvs.ErrNeedsRecovery)
			require.ErrorIs(t, err, errInjected)
			_, _, err = st.Get(1)
			require.ErrorIs(t, err, kvs.ErrNeedsRecovery)
			r, err := st.Recover()
			require.NoError(t, err)
			require.True(t, r.Active)
			v, ok, err := st.Get(1)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, uint64(10), v, "the failed batch is rolled back")
			require.NoError(t, st.Put(2, 20))
		})
	}
}
