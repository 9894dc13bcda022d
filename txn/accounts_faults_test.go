//go:build unix

package txn

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/long"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

var flagFaultSeed = flag.Uint64("txn.seed", 0, "seed of TestAccountsFaults (0: from the clock)")

// faultOn returns the fault's class of file: the persist log (LOG*) or
// the region files (*.pmr*).
func faultOn(region bool) func(path string) bool {
	return func(path string) bool {
		base := filepath.Base(path)
		if region {
			return strings.Contains(base, ".pmr")
		}
		return strings.HasPrefix(base, "LOG")
	}
}

// described is a fault with the class of file it fails.
type described struct {
	*native.NthFault
	on string
}

func (d described) String() string { return d.NthFault.String() + " of " + d.on }

// The accounts store, opened on one directory trial after trial with one
// seeded I/O fault per trial (a write, sync or rename of the persist log
// or of a region file failing with EIO or ENOSPC, among the operations of
// OpenDir's recovery, up to 12 transfer batches, background checkpoints
// every 2 KiB of log, and Close): every failed call wraps native.ErrIO and
// the errno, no call succeeds after one failed, an injected fault always
// reaches a call, and a reopen without faults holds every acknowledged
// batch, at most the failed one more, never a batch in part, and the
// total. The long run (SCOPEDPM_LONG=1) injects 200 faults, the short run
// 16.
func TestAccountsFaults(t *testing.T) {
	const accounts, opening = 8, 1 << 20
	seed := *flagFaultSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed = %d (replay: go test ./txn -run 'TestAccountsFaults$' -txn.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	want := 16
	if long.Enabled() {
		want = 200
	}
	opts := DirOptions{Accounts: accounts, Balance: opening, MaxBatch: 8}
	dir := t.TempDir()
	// states[c] is the balances after the first c batches of the test's
	// batch sequence (batch c+1 is batchOf(c+1)); acked batches are
	// durable.
	batchOf := func(c int) []Transfer {
		r := rand.New(rand.NewPCG(seed, uint64(c)))
		ts := make([]Transfer, 1+r.IntN(4))
		for i := range ts {
			from := r.Uint64N(accounts)
			ts[i] = Transfer{From: from, To: (from + 1 + r.Uint64N(accounts-1)) % accounts, Amount: 1 + r.Uint64N(3)}
		}
		return ts
	}
	states := [][]uint64{slices.Repeat([]uint64{opening}, accounts)}
	stateAt := func(c int) []uint64 {
		for len(states) <= c {
			s := slices.Clone(states[len(states)-1])
			for _, tr := range batchOf(len(states)) {
				s[tr.From] -= tr.Amount
				s[tr.To] += tr.Amount
			}
			states = append(states, s)
		}
		return states[c]
	}
	acked, faults, trials := 0, 0, 0
	reached := map[string]int{}
	for ; faults < want; trials++ {
		require.Less(t, trials, 10*want+20, "too few trials reach their fault")
		kinds := [...]native.FSOp{native.FSWrite, native.FSSync, native.FSRename}
		region := rng.IntN(2) == 1
		nf := &native.NthFault{Op: kinds[rng.IntN(len(kinds))], Match: faultOn(region), Err: syscall.EIO}
		if rng.IntN(2) == 1 {
			nf.Err = syscall.ENOSPC
		}
		nf.N = 1 + rng.IntN(24)
		f := described{nf, map[bool]string{false: "the log", true: "a region file"}[region]}
		var failed error
		// call checks one durable call's result and reports whether it
		// was acknowledged.
		call := func(what string, err error) bool {
			if err == nil {
				require.NoError(t, failed, "trial %d, fault %v: %s succeeded after a failed call", trials, f, what)
				return true
			}
			require.True(t, f.Hit(), "trial %d: %s failed with no fault injected: %v", trials, what, err)
			require.ErrorIs(t, err, native.ErrIO, "trial %d, fault %v: %s", trials, f, what)
			if failed == nil {
				require.ErrorIs(t, err, f.Err, "trial %d, fault %v: %s does not wrap the cause", trials, f, what)
				failed = err
				reached[strings.Fields(what)[0]]++
			}
			return false
		}
		be, err := native.Open(dir, native.Options{Mode: native.ModeLog, CheckpointBytes: 2 << 10, FS: native.InjectFS(native.OSFS(), nf)})
		if call("native.Open", err) {
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			a, err := openAccounts(be, m, dir, opts)
			if call("OpenDir", err) {
				for c, end := acked+1, acked+12; c <= end; c++ {
					if !call(fmt.Sprintf("TransferBatch %d", c), a.TransferBatch(batchOf(c))) {
						break
					}
					acked = c
				}
			}
			call("Close", be.Close())
		}
		if f.Hit() {
			require.Error(t, failed, "trial %d: fault %v reached no call", trials, f)
			faults++
		}
		// Reopen without faults: the acknowledged batches, at most the
		// failed one more, whole.
		a, err := OpenDir(dir, &opts)
		require.NoError(t, err, "trial %d, fault %v: reopen", trials, f)
		got := make([]uint64, accounts)
		for id := range got {
			got[id], err = a.Balance(uint64(id))
			require.NoError(t, err)
		}
		switch {
		case slices.Equal(got, stateAt(acked)):
		case slices.Equal(got, stateAt(acked+1)):
			acked++ // the failed batch was durable after all
		default:
			require.Fail(t, "lost or torn batch", "trial %d, fault %v: balances %v, acknowledged %d batches: %v", trials, f, got, acked, stateAt(acked))
		}
		require.NoError(t, a.Close())
	}
	t.Logf("%d injected faults in %d trials, %d acknowledged batches, 0 lost, none in part, every fault reported; first failed call: %v", faults, trials, acked, reached)
}
