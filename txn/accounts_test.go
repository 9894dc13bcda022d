//go:build unix

package txn_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/txn"
)

// openAccounts opens a store of n accounts of bal each in a fresh
// directory, closed at the end of the test.
func openAccounts(t *testing.T, n int, bal uint64) *txn.Accounts {
	t.Helper()
	a, err := txn.OpenDir(t.TempDir(), &txn.DirOptions{Accounts: n, Balance: bal, MaxBatch: 64, Mode: native.ModeLog})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func balances(t *testing.T, a *txn.Accounts) []uint64 {
	t.Helper()
	out := make([]uint64, a.Len())
	for i := range out {
		v, err := a.Balance(uint64(i))
		require.NoError(t, err)
		out[i] = v
	}
	return out
}

// Transfers and batches survive Close and OpenDir; the shape given at
// creation stays, whatever a later OpenDir asks; one call is one sync.
func TestAccountsReopen(t *testing.T) {
	dir := t.TempDir()
	a, err := txn.OpenDir(dir, &txn.DirOptions{Accounts: 4, Balance: 100, MaxBatch: 8, Mode: native.ModeLog})
	require.NoError(t, err)
	s0 := a.Stats().Syncs
	require.NoError(t, a.Transfer(0, 1, 30))
	require.NoError(t, a.TransferBatch([]txn.Transfer{{From: 1, To: 2, Amount: 130}, {From: 2, To: 3, Amount: 5}, {From: 0, To: 3, Amount: 70}}))
	require.NoError(t, a.TransferBatch(nil))
	require.Equal(t, uint64(2), a.Stats().Syncs-s0, "one sync per call")
	want := []uint64{0, 0, 225, 175}
	require.Equal(t, want, balances(t, a))
	require.NoError(t, a.Close())

	a, err = txn.OpenDir(dir, &txn.DirOptions{Accounts: 99, Balance: 1, MaxBatch: 1, NoCreate: true})
	require.NoError(t, err)
	defer a.Close()
	require.Equal(t, 4, a.Len())
	require.Equal(t, 8, a.MaxBatch())
	require.Equal(t, want, balances(t, a))
	total, err := a.Total()
	require.NoError(t, err)
	require.Equal(t, uint64(400), total)
	require.Equal(t, dir, a.Dir())
}

// A transfer or batch that fails its checks is an error wrapping its
// sentinel and changes nothing, even after earlier transfers of the batch
// passed.
func TestAccountsErrors(t *testing.T) {
	a := openAccounts(t, 3, 10)
	for _, tc := range []struct {
		name string
		ts   []txn.Transfer
		want error
	}{
		{"unknown from", []txn.Transfer{{From: 3, To: 0, Amount: 1}}, txn.ErrNoAccount},
		{"unknown to", []txn.Transfer{{From: 0, To: 1 << 40, Amount: 1}}, txn.ErrNoAccount},
		{"insufficient", []txn.Transfer{{From: 0, To: 1, Amount: 11}}, txn.ErrInsufficient},
		{"insufficient after the batch's own", []txn.Transfer{{From: 0, To: 1, Amount: 6}, {From: 0, To: 2, Amount: 5}}, txn.ErrInsufficient},
		{"unknown after a good one", []txn.Transfer{{From: 0, To: 1, Amount: 1}, {From: 0, To: 7, Amount: 1}}, txn.ErrNoAccount},
		{"to itself", []txn.Transfer{{From: 1, To: 1, Amount: 1}}, txn.ErrBadArg},
		{"over MaxBatch", make([]txn.Transfer, 65), txn.ErrBadArg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s0 := a.Stats().SyncBytes
			require.ErrorIs(t, a.TransferBatch(tc.ts), tc.want)
			require.Equal(t, []uint64{10, 10, 10}, balances(t, a))
			require.Equal(t, s0, a.Stats().SyncBytes, "nothing written")
		})
	}
	_, err := a.Balance(3)
	require.ErrorIs(t, err, txn.ErrNoAccount)
	require.ErrorIs(t, a.Transfer(2, 0, 11), txn.ErrInsufficient)
}

// OpenDir refuses bad options, a missing store with NoCreate, a locked
// directory and damaged balances.
func TestAccountsOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		dir  string
		opts *txn.DirOptions
		want error
	}{
		{"empty dir name", "", nil, txn.ErrBadArg},
		{"negative accounts", dir, &txn.DirOptions{Accounts: -1}, txn.ErrBadArg},
		{"negative batch", dir, &txn.DirOptions{MaxBatch: -1}, txn.ErrBadArg},
		{"no store", dir, &txn.DirOptions{NoCreate: true}, pm.ErrNoRegion},
		{"total overflows", filepath.Join(dir, "big"), &txn.DirOptions{Accounts: 3, Balance: 1 << 63}, txn.ErrBadArg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := txn.OpenDir(tc.dir, tc.opts)
			require.ErrorIs(t, err, tc.want)
		})
	}

	a, err := txn.OpenDir(dir, nil)
	require.NoError(t, err)
	require.Equal(t, txn.DefaultAccounts, a.Len())
	require.Equal(t, txn.DefaultMaxBatch, a.MaxBatch())
	_, err = txn.OpenDir(dir, nil)
	require.ErrorIs(t, err, native.ErrLocked)
	require.NoError(t, a.Close())

	// A damaged header is corrupt, never a store started again.
	f := filepath.Join(dir, "accounts.pmr")
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	i := bytes.Index(b, []byte("TXNACCT"))
	require.GreaterOrEqual(t, i, 0)
	b[i+20] ^= 0xff // a field of the header
	require.NoError(t, os.WriteFile(f, b, 0o644))
	_, err = txn.OpenDir(dir, nil)
	require.ErrorIs(t, err, txn.ErrCorrupt)
}

// Every call after Close is ErrClosed; a second Close is nil.
func TestAccountsUseAfterClose(t *testing.T) {
	a, err := txn.OpenDir(t.TempDir(), &txn.DirOptions{Accounts: 2, Balance: 5})
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Transfer(0, 1, 1), txn.ErrClosed)
	require.ErrorIs(t, a.TransferBatch([]txn.Transfer{{From: 0, To: 1, Amount: 1}}), txn.ErrClosed)
	_, err = a.Balance(0)
	require.ErrorIs(t, err, txn.ErrClosed)
	_, err = a.Total()
	require.ErrorIs(t, err, txn.ErrClosed)
}

// Concurrent transfers are serialised: the total is conserved and every
// transfer happened once.
func TestAccountsConcurrent(t *testing.T) {
	a := openAccounts(t, 8, 1000)
	var wg sync.WaitGroup
	errs := make(chan error, 4*20*2)
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				from := uint64(g)
				errs <- a.Transfer(from, from+4, 1)
				_, err := a.Balance(uint64(i % 8))
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, []uint64{980, 980, 980, 980, 1020, 1020, 1020, 1020}, balances(t, a))
}
