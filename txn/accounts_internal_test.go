//go:build unix

package txn

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
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

// Four goroutines make transfer batches at once, each its own pattern:
// writer w's batch j moves 1 from account w to account 4+w, j%3+1 times,
// and j%3+1 from the hub (account 8) back to account w. A power cut at
// every sync of the persist log recovers whole batches only: account w
// holds its opening balance, account 4+w that plus the units of a whole
// number of w's batches, the hub pays for exactly those, and the batches
// recovered number the syncs before the cut (one sync a batch), or one
// more (the cut sync's record survived), never fewer for a writer than at
// an earlier cut. With a sync per host write (noDefer) the cuts fall
// inside the transactions too, and recovery rolls the torn one back.
func TestAccountsPowerCutConcurrent(t *testing.T) {
	for _, noDefer := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync per write=%v", noDefer), func(t *testing.T) { accountsPowerCutConcurrent(t, noDefer) })
	}
}

func accountsPowerCutConcurrent(t *testing.T, noDefer bool) {
	const writers, perWriter, opening = 4, 25, 1000
	const accounts, hub = 2*writers + 1, 2 * writers
	units := func(j int) uint64 { return uint64(1 + j%3) }
	dir := t.TempDir()
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog, Journal: true})
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	a, err := openAccounts(be, m, dir, DirOptions{Accounts: accounts, Balance: opening, MaxBatch: 8})
	require.NoError(t, err)
	defer a.Close()
	a.noDefer = noDefer
	require.NoError(t, be.StartJournal())

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range uint64(writers) {
		wg.Go(func() {
			for j := 1; j <= perWriter; j++ {
				var ts []Transfer
				for range units(j) {
					ts = append(ts, Transfer{From: w, To: writers + w, Amount: 1})
				}
				ts = append(ts, Transfer{From: hub, To: w, Amount: units(j)})
				if err := a.TransferBatch(ts); err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n := be.Syncs()
	if !noDefer {
		require.Equal(t, writers*perWriter, n, "one sync per batch")
	}
	last := make([]int, writers)
	for s := 0; s <= n; s++ {
		img, err := be.PowerCut(s, uint64(s))
		require.NoError(t, err)
		m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
		require.NoError(t, err)
		a2, err := openAccounts(nil, m2, "", DirOptions{NoCreate: true})
		require.NoError(t, err, "cut at sync %d", s)
		bal := func(id uint64) uint64 {
			v, err := a2.Balance(id)
			require.NoError(t, err)
			return v
		}
		batches, paid := 0, uint64(0)
		for w := range writers {
			require.Equal(t, uint64(opening), bal(uint64(w)), "cut at sync %d: writer %d's source", s, w)
			moved := bal(uint64(writers+w)) - opening
			c, sum := 0, uint64(0)
			for sum < moved {
				c++
				sum += units(c)
			}
			require.Equal(t, moved, sum, "cut at sync %d: writer %d moved %d units, not whole batches", s, w, moved)
			require.GreaterOrEqual(t, c, last[w], "cut at sync %d: writer %d lost batches", s, w)
			last[w] = c
			batches += c
			paid += moved
		}
		require.Equal(t, uint64(opening)-paid, bal(hub), "cut at sync %d: the hub", s)
		// Syncs before the cut are whole; the cut one's record survives
		// whole or not at all.
		if !noDefer {
			require.True(t, batches == s || batches == s+1, "cut at sync %d: %d batches recovered", s, batches)
		}
	}
	require.Equal(t, []int{perWriter, perWriter, perWriter, perWriter}, last)
	t.Logf("%d batches from %d writers, a cut at each of %d syncs recovered whole batches", writers*perWriter, writers, n)
}
