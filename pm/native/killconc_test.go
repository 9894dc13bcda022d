//go:build unix

package native_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/txn"
)

// Shape of the accounts child: acWriters goroutines; writer w's batch j
// (j = 1, 2, ...) moves 1 from account w to account acWriters+w,
// acBatch(j) times, and acBatch(j) from the hub (the last account) back to
// account w, as one TransferBatch. So account w always holds acOpening,
// account acWriters+w holds acOpening plus acSum(c) after c batches, and
// the hub pays for all of them; a batch applied in part breaks one of the
// three. acReaders goroutines read beside the writers.
const (
	acWriters   = 4
	acReaders   = 2
	acPerWriter = 3000
	acOpening   = 1 << 20
	acAccounts  = 2*acWriters + 1
	acHub       = acAccounts - 1
)

// acBatch is the number of unit transfers of a writer's batch j (1..3).
func acBatch(j uint64) uint64 { return 1 + j%3 }

// acSum is the units a writer's first c batches move.
func acSum(c uint64) uint64 {
	var s uint64
	for j := uint64(1); j <= c; j++ {
		s += acBatch(j)
	}
	return s
}

// acOptions are the options of every OpenDir of the test: one shape.
var acOptions = &txn.DirOptions{Accounts: acAccounts, Balance: acOpening, MaxBatch: 8}

// acDone reads the store and returns each writer's count of whole batches
// it holds; it fails unless the invariants above hold. Each Balance is
// one call: with writers running, balances read by different calls may
// straddle a batch, so the hub, which every batch changes, is checked
// against the others only when hub is set (no writer runs).
func acDone(a *txn.Accounts, hub bool) ([]uint64, error) {
	done := make([]uint64, acWriters)
	var paid uint64
	for w := range uint64(acWriters) {
		src, err := a.Balance(w)
		if err != nil {
			return nil, err
		}
		dst, err := a.Balance(acWriters + w)
		if err != nil {
			return nil, err
		}
		if src != acOpening || dst < acOpening {
			return nil, fmt.Errorf("writer %d: accounts %d and %d hold %d and %d (a batch applied in part)", w, src, dst, w, acWriters+w)
		}
		moved := dst - acOpening
		c := uint64(0)
		for s := uint64(0); s < moved; s = acSum(c) {
			c++
		}
		if acSum(c) != moved {
			return nil, fmt.Errorf("writer %d: %d units moved, not the sum of whole batches", w, moved)
		}
		done[w] = c
		paid += moved
	}
	if !hub {
		return done, nil
	}
	h, err := a.Balance(acHub)
	if err != nil {
		return nil, err
	}
	if h != acOpening-paid {
		return nil, fmt.Errorf("the hub holds %d, its batches paid %d of %d", h, paid, acOpening)
	}
	return done, nil
}

// accountsChild runs the accounts child: OpenDir (rolling back a cut
// batch), then the writers, each acknowledging every batch that returned,
// beside readers that check the total (one call: one state) and each
// balance they read (calls are serialised, so each sees whole batches).
func accountsChild(dir string) error {
	say("open")
	a, err := txn.OpenDir(dir, acOptions)
	if err != nil {
		return err
	}
	start, err := acDone(a, true)
	if err != nil {
		return err
	}
	say("ready")
	return runWritersReaders(acWriters, acReaders, func(w int) error {
		ts := make([]txn.Transfer, 0, 4)
		for j := start[w] + 1; j <= acPerWriter; j++ {
			ts = ts[:0]
			for range acBatch(j) {
				ts = append(ts, txn.Transfer{From: uint64(w), To: acWriters + uint64(w), Amount: 1})
			}
			ts = append(ts, txn.Transfer{From: acHub, To: uint64(w), Amount: acBatch(j)})
			if err := a.TransferBatch(ts); err != nil {
				return err
			}
			say("ack %d %d", w, j)
		}
		return nil
	}, func(int) error {
		total, err := a.Total()
		if err == nil && total != acAccounts*acOpening {
			err = fmt.Errorf("total %d, want %d", total, acAccounts*acOpening)
		}
		if err == nil {
			_, err = acDone(a, false)
		}
		return err
	})
}

// The undo-logged accounts store (txn.OpenDir) in a child process, four
// goroutines making transfer batches and two reading, is SIGKILLed at
// seeded random points (during its open and recovery too); after each
// kill the parent reopens it and requires the total, every acknowledged
// batch of every writer, at most the one in flight more, and no batch in
// part. The long run kills it 100 times.
func TestKillAccounts(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 10))
	kills := 12
	if longRun() {
		kills = 100
	}
	dir := t.TempDir()
	acked := make([]uint64, acWriters)
	inflight := 0
	for k := range kills {
		lines := runChild(t, "accounts", dir, nil, func(lines []string) time.Duration {
			if lines[0] == "open" && len(lines) == 1 {
				return time.Duration(rng.IntN(300_000)) * time.Microsecond
			}
			return -1
		})
		collectAcks(t, lines, acked)
		a, err := txn.OpenDir(dir, acOptions)
		require.NoError(t, err, "kill %d", k)
		total, err := a.Total()
		require.NoError(t, err, "kill %d", k)
		require.Equal(t, uint64(acAccounts*acOpening), total, "kill %d", k)
		got, err := acDone(a, true)
		require.NoError(t, err, "kill %d", k)
		for w := range acWriters {
			require.True(t, got[w] == acked[w] || got[w] == acked[w]+1,
				"kill %d: writer %d has %d batches, %d acknowledged", k, w, got[w], acked[w])
			if got[w] > acked[w] {
				inflight++
			}
			acked[w] = got[w]
		}
		require.NoError(t, a.Close())
	}
	t.Logf("%d SIGKILLs, %v batches per writer at the end, %d kills found a batch in flight done, 0 losses, no batch in part", kills, acked, inflight)
}

// Shape of the kvsconc child: kcWriters goroutines; writer w sets its
// kcKeys keys (kcKey) to the round number r = 1, 2, ... as one SetBatch
// per round, on a store running host batches; kcReaders goroutines read
// beside them.
const (
	kcWriters = 4
	kcReaders = 2
	kcKeys    = 8
)

func kcKey(w, i int) uint32 { return uint32(1000*(w+1) + i) }

// kcRounds reads each writer's keys and returns the round they all hold
// (0 before the writer's first batch); it fails if a writer's keys
// disagree (a batch seen in part).
func kcRounds(st *kvs.Store) ([]uint64, error) {
	out := make([]uint64, kcWriters)
	keys := make([]uint32, kcKeys)
	for w := range kcWriters {
		for i := range keys {
			keys[i] = kcKey(w, i)
		}
		vals, found, err := st.GetBatch(keys)
		if err != nil {
			return nil, err
		}
		for i := range keys {
			if found[i] != found[0] || vals[i] != vals[0] {
				return nil, fmt.Errorf("writer %d's keys hold %v (found %v): a batch in part", w, vals, found)
			}
		}
		out[w] = vals[0]
	}
	return out, nil
}

// openKVSConc opens and recovers the kvsconc child's store, or, if there
// is none or its creation was killed before it returned (created false),
// creates it anew.
func openKVSConc(m *pm.Machine, created bool) (*kvs.Store, error) {
	if len(m.Regions()) > 0 {
		st, err := kvs.Open(m, "gpkvs", kvs.HostBatches())
		if err == nil {
			_, err = st.Recover()
		}
		if err == nil || created {
			return st, err
		}
		for _, r := range m.Regions() {
			if err := m.RemoveRegion(r.Name); err != nil {
				return nil, err
			}
		}
	}
	st, err := kvs.Create(m, kvs.Config{Buckets: 4096, MaxBatch: kcKeys}, kvs.HostBatches())
	if err == nil {
		say("created")
	}
	return st, err
}

// kvsConcChild runs the kvsconc child: open (recovering) or create, then
// the writers, each acknowledging every batch that returned, beside
// readers that check every state they read.
func kvsConcChild(dir string) error {
	say("open")
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
	if err != nil {
		return err
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		return err
	}
	st, err := openKVSConc(m, os.Getenv(envCreated) == "1")
	if err != nil {
		return err
	}
	start, err := kcRounds(st)
	if err != nil {
		return err
	}
	say("ready")
	// last[r] is the rounds reader r saw last.
	last := make([][]uint64, kcReaders)
	for r := range last {
		last[r] = make([]uint64, kcWriters)
	}
	return runWritersReaders(kcWriters, kcReaders, func(w int) error {
		keys, vals := make([]uint32, kcKeys), make([]uint64, kcKeys)
		for i := range keys {
			keys[i] = kcKey(w, i)
		}
		for r := start[w] + 1; r <= 5000; r++ {
			for i := range vals {
				vals[i] = r
			}
			if _, err := st.SetBatch(keys, vals); err != nil {
				return err
			}
			say("ack %d %d", w, r)
		}
		return nil
	}, func(r int) error {
		got, err := kcRounds(st)
		if err != nil {
			return err
		}
		for w := range got {
			if got[w] < last[r][w] {
				return fmt.Errorf("writer %d went back from round %d to %d", w, last[r][w], got[w])
			}
		}
		last[r] = got
		return nil
	})
}

// gpKVS with host batches (kvs.HostBatches) in a child process, four
// goroutines writing batches and two reading, is SIGKILLed at seeded
// random points (during its creation, open and recovery too); after each
// kill the parent reopens and recovers it and requires its invariant
// (Check), every acknowledged batch of every writer, at most the one in
// flight more, and no batch in part. The long run kills it 100 times.
func TestKillKVSConcurrent(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 12))
	kills := 12
	if longRun() {
		kills = 100
	}
	dir := t.TempDir()
	acked := make([]uint64, kcWriters)
	created, inflight := false, 0
	for k := range kills {
		var env []string
		if created {
			env = []string{envCreated + "=1"}
		}
		lines := runChild(t, "kvsconc", dir, env, func(lines []string) time.Duration {
			if lines[0] == "open" && len(lines) == 1 {
				return time.Duration(rng.IntN(300_000)) * time.Microsecond
			}
			return -1
		})
		created = created || slices.Contains(lines, "created")
		collectAcks(t, lines, acked)
		be, m := open(t, dir, native.Options{Mode: native.ModeLog})
		if !created {
			// Killed before the store was created (or inside Create,
			// which promises nothing before it returns): the next child
			// starts over.
			require.NoError(t, be.Close())
			continue
		}
		st, err := openKVSConc(m, true)
		require.NoError(t, err, "kill %d", k)
		require.NoError(t, st.Check(), "kill %d", k)
		got, err := kcRounds(st)
		require.NoError(t, err, "kill %d", k)
		keys := 0
		for w := range kcWriters {
			require.True(t, got[w] == acked[w] || got[w] == acked[w]+1,
				"kill %d: writer %d's keys hold round %d, %d acknowledged", k, w, got[w], acked[w])
			if got[w] > acked[w] {
				inflight++
			}
			acked[w] = got[w]
			if got[w] > 0 {
				keys += kcKeys
			}
		}
		n, err := st.Len()
		require.NoError(t, err, "kill %d", k)
		require.Equal(t, keys, n, "kill %d: keys stored", k)
		require.NoError(t, st.Close())
		require.NoError(t, be.Close())
	}
	t.Logf("%d SIGKILLs, rounds %v per writer at the end, %d kills found a batch in flight done, 0 losses, no batch in part", kills, acked, inflight)
}
