//go:build unix

package btree

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/native"
)

// journaledDB returns a DB over a new tree (options o) on a log-mode
// backend with a power-cut journal (native.Options.Journal; maxPending
// persists at most between syncs, 0 for the default), closed at the
// test's end.
func journaledDB(t *testing.T, maxPending int, o Options) (*DB, *native.Backend) {
	t.Helper()
	dir := t.TempDir()
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog, Journal: true, MaxPending: maxPending})
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	tr, err := Create(m, dbRegion, o)
	require.NoError(t, err)
	db := newDB(be, m, tr, 0, dir)
	t.Cleanup(func() { _ = db.Close() })
	return db, be
}

// A DB's writes (Put, PutBatch, Delete, each one sync of the persist log)
// survive a power cut at every sync: the recovered tree passes Check and
// holds the writes that returned before the cut, and at most the one in
// progress, whole.
func TestDBPowerCut(t *testing.T) {
	seed := testSeed(t)
	db, be := journaledDB(t, 5, Options{Capacity: 1024, MaxBatch: 64})
	require.NoError(t, be.StartJournal())
	// op(j, s) applies write j to the model s; run(j) to the DB.
	const ops = 30
	op := func(j int, s map[uint64]uint64) {
		switch j % 3 {
		case 0:
			s[uint64(j)] = uint64(j) * 10
		case 1:
			for i := range uint64(20) {
				s[100+uint64(j)*20+i] = i
			}
		case 2:
			delete(s, uint64(j-2))
		}
	}
	run := func(j int) error {
		switch j % 3 {
		case 0:
			return db.Put(uint64(j), uint64(j)*10)
		case 1:
			ks, vs := make([]uint64, 20), make([]uint64, 20)
			for i := range ks {
				ks[i], vs[i] = 100+uint64(j)*20+uint64(i), uint64(i)
			}
			return db.PutBatch(ks, vs)
		}
		_, err := db.Delete(uint64(j - 2))
		return err
	}
	for j := range ops {
		require.NoError(t, run(j))
	}
	states := []map[uint64]uint64{{}}
	for j := range ops {
		s := maps.Clone(states[j])
		op(j, s)
		states = append(states, s)
	}
	n := be.Syncs()
	rng := rand.New(rand.NewPCG(seed, 28))
	last := 0
	for s := 0; s <= n; s++ {
		cs := rng.Uint64()
		img, err := be.PowerCut(s, cs)
		require.NoError(t, err)
		last, _ = recoveredPrefix(t, img, states, last, fmt.Sprintf("cut at sync %d of %d, cut seed %d", s, n, cs))
	}
	require.Equal(t, ops, last)
	t.Logf("%d writes, %d syncs (MaxPending forces syncs inside a write), every cut recovered a prefix", ops, n)
}

// The DB's host insert path (insertHost) survives a power cut after every
// one of its host writes (MaxPending 1 syncs each at once): the recovered
// tree passes Check and holds the writes that returned before the cut, and
// at most the one in progress, whole. With the resumable protocol (the
// noAtomic knob), a cut inside a batch leaves it staged with some levels
// written, which Open finishes with the insert kernel; as one atomic
// record (pm/native's DeferAtomic, the default), MaxPending does not cut
// a batch and no cut leaves one to finish. Batches of random keys on a
// tree of order 4 split leaves, internal nodes and the root.
func TestDBPowerCutHostInsert(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		t.Run(fmt.Sprintf("atomic=%v", atomic), func(t *testing.T) { powerCutHostInsert(t, atomic) })
	}
}

func powerCutHostInsert(t *testing.T, atomic bool) {
	seed := testSeed(t)
	ops := 16
	if testing.Short() {
		ops = 6
	}
	db, be := journaledDB(t, 1, Options{Order: 4, Capacity: 2048, MaxBatch: 64})
	db.t.noAtomic = !atomic
	rng := rand.New(rand.NewPCG(seed, 29))
	// Setup (not cut): a tree of three levels.
	for k := range uint64(40) {
		require.NoError(t, db.Put(k*10, k))
	}
	require.NoError(t, be.StartJournal())
	states := []map[uint64]uint64{{}}
	for k, v := range db.t.All() {
		states[0][k] = v
	}
	for j := range ops {
		s := maps.Clone(states[j])
		switch {
		case j%4 == 3:
			// A key the DB holds, of the setup's: a delete of one it does
			// not hold writes nothing and leaves the state as it was, so
			// a cut after it would recover the write before (seed
			// 17662925046524161043 deleted 120 twice: last was 15 of 16).
			var held []uint64
			for k := range s {
				if k%10 == 0 && k < 400 {
					held = append(held, k)
				}
			}
			slices.Sort(held)
			k := held[rng.IntN(len(held))]
			found, err := db.Delete(k)
			require.NoError(t, err)
			require.True(t, found, "key %d", k)
			delete(s, k)
		case j%4 == 2:
			k := rng.Uint64N(600)
			require.NoError(t, db.Put(k, uint64(j)))
			s[k] = uint64(j)
		default:
			n := 1 + rng.IntN(40)
			ks, vs := make([]uint64, n), make([]uint64, n)
			for i := range ks {
				ks[i], vs[i] = rng.Uint64N(600), uint64(j*1000+i)
				s[ks[i]] = vs[i]
			}
			require.NoError(t, db.PutBatch(ks, vs))
		}
		states = append(states, s)
	}
	n := be.Syncs()
	cut := rand.New(rand.NewPCG(seed, 30))
	last, resumed := 0, 0
	for s := 0; s <= n; s++ {
		cs := cut.Uint64()
		img, err := be.PowerCut(s, cs)
		require.NoError(t, err)
		if _, ok, err := Progress(img, dbRegion); err == nil && ok {
			resumed++
		}
		last, _ = recoveredPrefix(t, img, states, last, fmt.Sprintf("cut at sync %d of %d, cut seed %d", s, n, cs))
	}
	require.Equal(t, ops, last)
	if atomic {
		require.Zero(t, resumed, "cuts that left a batch to finish")
	} else {
		require.Positive(t, resumed)
	}
	t.Logf("%d writes, %d syncs, %d cuts inside a batch or delete, every cut recovered a prefix", ops, n, resumed)
}

// sortBatch sorts the keys and keeps the last value of a repeated key, on
// the packed path (small keys) and the pairs path (keys from 1<<60 on).
func TestSortBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for x := range 200 {
		base := uint64(x%2) << 60
		n := 1 + rng.IntN(300)
		keys, vals := make([]uint64, n), make([]uint64, n)
		want := map[uint64]uint64{}
		for i := range keys {
			keys[i], vals[i] = base+rng.Uint64N(uint64(n)), rng.Uint64()
			want[keys[i]] = vals[i]
		}
		ks, vs := sortBatch(keys, vals)
		require.True(t, slices.IsSorted(ks))
		require.Len(t, ks, len(want))
		for i, k := range ks {
			require.Equal(t, want[k], vs[i], "key %d", k)
		}
	}
}

// recoveredPrefix opens the DB's tree in a power-cut image as OpenDir
// would (openDirTree: the oldest generation), checks it, and returns the
// index c >= last of the state in states it holds (the cut recovered the
// first c writes) and the tree's generation. It fails the test when no
// such state matches.
func recoveredPrefix(t *testing.T, img *pm.Image, states []map[uint64]uint64, last int, cut string) (int, int) {
	t.Helper()
	m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	tr2, gen, err := openDirTree(m2, DirOptions{NoCreate: true})
	require.NoError(t, err, cut)
	require.NoError(t, tr2.Check(), cut)
	got := map[uint64]uint64{}
	for k, v := range tr2.All() {
		got[k] = v
	}
	for c := last; c < len(states); c++ {
		if maps.Equal(got, states[c]) {
			return c, gen
		}
	}
	require.Fail(t, "no prefix of the writes at or after "+fmt.Sprint(last), cut)
	return -1, 0
}

// A DB that grows survives a power cut at every sync, inside its growths
// too: the recovered DB (openDirTree: the oldest generation left) passes
// Check and holds the writes that returned before the cut, and at most
// the one in progress, whole.
func TestDBPowerCutGrowth(t *testing.T) {
	seed := testSeed(t)
	db, be := journaledDB(t, 3, Options{Order: 4, Capacity: 24, MaxBatch: 16})
	require.NoError(t, be.StartJournal())
	rng := rand.New(rand.NewPCG(seed, 31))
	const ops = 60
	states := []map[uint64]uint64{{}}
	for j := range ops {
		s := maps.Clone(states[j])
		switch {
		case j%5 == 4 && len(s) > 0:
			k := slices.Sorted(maps.Keys(s))[rng.IntN(len(s))]
			found, err := db.Delete(k)
			require.NoError(t, err)
			require.True(t, found)
			delete(s, k)
		default:
			n := 1 + rng.IntN(16)
			if j == 40 {
				n = 50 // over the batch area of 16: a growth, then one batch
			}
			ks, vs := make([]uint64, n), make([]uint64, n)
			for i := range ks {
				ks[i], vs[i] = rng.Uint64N(1000), uint64(j*100+i)
				s[ks[i]] = vs[i]
			}
			require.NoError(t, db.PutBatch(ks, vs))
		}
		states = append(states, s)
	}
	require.GreaterOrEqual(t, db.gen, 3, "the test must grow the tree")
	require.EqualValues(t, 64, db.maxBatch.Load(), "the batch of 50 must grow the batch area")
	n := be.Syncs()
	cut := rand.New(rand.NewPCG(seed, 32))
	last, grown, inside := 0, 0, 0
	for s := 0; s <= n; s++ {
		cs := cut.Uint64()
		img, err := be.PowerCut(s, cs)
		require.NoError(t, err)
		what := fmt.Sprintf("cut at sync %d of %d, cut seed %d", s, n, cs)
		trees := 0
		for _, r := range img.Regions {
			if _, ok := regionGen(r.Name); ok {
				trees++
			}
		}
		if trees > 1 {
			inside++ // a growth the cut interrupted: two generations
		}
		var gen int
		last, gen = recoveredPrefix(t, img, states, last, what)
		grown = max(grown, gen)
	}
	require.Equal(t, ops, last)
	require.Equal(t, db.gen, grown)
	require.Positive(t, inside, "some cuts must fall inside a growth")
	t.Logf("%d writes, %d syncs, %d generations, %d cuts inside a growth, every cut recovered a prefix", ops, n, db.gen, inside)
}

// Puts that arrive while a group is being written are committed together:
// with the DB held, one put leads (its group of one waits for the DB) and
// nine more queue; released, they take two syncs in all, and every key is
// there.
func TestDBGroupCommit(t *testing.T) {
	db, err := OpenDir(t.TempDir(), &DirOptions{Mode: native.ModeLog})
	require.NoError(t, err)
	defer db.Close()
	queued := func(n int) { waitQueued(db, n) }
	syncs := db.be.Stats().Syncs
	db.mu.Lock()
	errs := make(chan error, 10)
	put := func(k uint64) { errs <- db.Put(k, k*10) }
	go put(0)
	queued(0) // the leader took its own put and waits for the DB
	for k := uint64(1); k < 10; k++ {
		go put(k)
	}
	queued(9)
	db.mu.Unlock()
	for range 10 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, uint64(2), db.be.Stats().Syncs-syncs, "one sync for the leader's group, one for the other nine")
	for k := range uint64(10) {
		v, ok, err := db.Get(k)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, k*10, v)
	}
	require.NoError(t, db.Check())
}

// waitQueued waits until a put leads the group commit (waiting for the
// DB) and n more are queued behind it.
func waitQueued(db *DB, n int) {
	for {
		db.qmu.Lock()
		got, leading := len(db.queue), db.leading
		db.qmu.Unlock()
		if leading && got == n {
			return
		}
		runtime.Gosched()
	}
}

// Group commit survives a power cut at every sync: four writers put their
// own keys in order, concurrently; every cut recovers a tree that passes
// Check and holds, of each writer's puts, a prefix. The DB is held until
// one writer's first put leads and the other three's are queued behind
// it, so that those three share a sync (TestDBGroupCommit) however fast
// the syncs are. (Counting syncs against puts did not show it: a growth's
// syncs made up for the shared ones on tmpfs.)
func TestDBPowerCutGroupCommit(t *testing.T) {
	db, be := journaledDB(t, 0, Options{Order: 4, Capacity: 64, MaxBatch: 16})
	require.NoError(t, be.StartJournal())
	const writers, puts = 4, 40
	var wg sync.WaitGroup
	db.mu.Lock()
	for w := range uint64(writers) {
		wg.Go(func() {
			for i := range uint64(puts) {
				if err := db.Put(w*1000+i, i+1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	waitQueued(db, writers-1)
	db.mu.Unlock()
	wg.Wait()
	n := be.Syncs()
	for s := 0; s <= n; s++ {
		img, err := be.PowerCut(s, uint64(s))
		require.NoError(t, err)
		what := fmt.Sprintf("cut at sync %d of %d", s, n)
		m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
		require.NoError(t, err, what)
		tr2, _, err := openDirTree(m2, DirOptions{NoCreate: true})
		require.NoError(t, err, what)
		require.NoError(t, tr2.Check(), what)
		count := make([]uint64, writers)
		for k, v := range tr2.All() {
			w, i := k/1000, k%1000
			require.Equal(t, i+1, v, what)
			count[w]++
		}
		for k := range tr2.All() {
			w, i := k/1000, k%1000
			require.Less(t, i, count[w], "%s: writer %d's puts are not a prefix", what, w)
		}
	}
	t.Logf("%d puts of %d writers in %d syncs, every cut recovered a prefix of each", writers*puts, writers, n)
}
