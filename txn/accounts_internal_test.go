//go:build unix

package txn

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/native"
)

// Transfers survive a power cut at every sync of the persist log: the
// store recovered from the image holds the balances after a prefix of the
// batches, never part of one, the prefix never shrinks from one cut to the
// next, and the total is conserved. With deferred durability a batch is
// one sync; with a sync per host write (noDefer) the cuts fall inside the
// transactions too, between the undo entries, the updates and the commit,
// and recovery rolls the torn batch back.
func TestAccountsPowerCut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noDefer bool
		batches int
	}{
		{"one sync per batch", false, 40},
		{"a sync per write", true, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const accounts, opening = 16, 1000
			dir := t.TempDir()
			be, err := native.Open(dir, native.Options{Mode: native.ModeLog, Journal: true})
			require.NoError(t, err)
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			a, err := openAccounts(be, m, dir, DirOptions{Accounts: accounts, Balance: opening, MaxBatch: 16})
			require.NoError(t, err)
			defer a.Close()
			a.noDefer = tc.noDefer
			require.NoError(t, be.StartJournal())

			rng := rand.New(rand.NewPCG(28, uint64(tc.batches)))
			state := slices.Repeat([]uint64{opening}, accounts)
			states := [][]uint64{slices.Clone(state)}
			for range tc.batches {
				ts := make([]Transfer, 1+rng.IntN(8))
				for i := range ts {
					from := rng.Uint64N(accounts)
					to := (from + 1 + rng.Uint64N(accounts-1)) % accounts
					ts[i] = Transfer{From: from, To: to, Amount: rng.Uint64N(10)}
					state[from] -= ts[i].Amount
					state[to] += ts[i].Amount
				}
				require.NoError(t, a.TransferBatch(ts))
				states = append(states, slices.Clone(state))
			}

			n := be.Syncs()
			if !tc.noDefer {
				require.Equal(t, tc.batches, n, "one sync per batch")
			}
			last := 0
			for s := 0; s <= n; s++ {
				cs := rng.Uint64()
				img, err := be.PowerCut(s, cs)
				require.NoError(t, err)
				m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
				require.NoError(t, err)
				a2, err := openAccounts(nil, m2, "", DirOptions{NoCreate: true})
				require.NoError(t, err, "cut at sync %d of %d, cut seed %d", s, n, cs)
				got := make([]uint64, accounts)
				var total uint64
				for id := range got {
					got[id], err = a2.Balance(uint64(id))
					require.NoError(t, err)
					total += got[id]
				}
				require.Equal(t, uint64(accounts*opening), total, "cut at sync %d of %d", s, n)
				j := -1
				for c := last; c < len(states); c++ {
					if slices.Equal(got, states[c]) {
						j = c
						break
					}
				}
				require.GreaterOrEqual(t, j, 0, "cut at sync %d of %d (seed %d): no prefix of the batches at or after %d", s, n, cs, last)
				last = j
			}
			require.Equal(t, tc.batches, last)
			t.Logf("%d batches, %d syncs, every cut recovered a prefix", tc.batches, n)
		})
	}
}

// A creation that a crash stopped before the balances' header (written
// last) is started again by the next OpenDir, with the options it gives.
func TestAccountsUnfinishedCreate(t *testing.T) {
	dir := t.TempDir()
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	_, err = CreateConv(m, undoRegion, 1, 1024)
	require.NoError(t, err)
	_, err = m.CreateRegion(accountsRegion, Line+8*4) // no header yet
	require.NoError(t, err)
	require.NoError(t, be.Close())

	a, err := OpenDir(dir, &DirOptions{Accounts: 5, Balance: 7})
	require.NoError(t, err)
	defer a.Close()
	require.Equal(t, 5, a.Len())
	total, err := a.Total()
	require.NoError(t, err)
	require.Equal(t, uint64(35), total)
	require.NoError(t, a.Transfer(0, 4, 7))
}
