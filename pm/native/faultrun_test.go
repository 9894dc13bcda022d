//go:build unix

package native_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/workloads"
)

// The injected-fault runs (TestFaultsKVS, TestFaultsBTree,
// TestFaultsWorkloads) open a backend whose file system fails one seeded
// operation: a write, a sync or a rename of the log (LOG*) or of a region
// file (*.pmr*, written by CreateRegion and by checkpoints), the n-th of
// its kind on that class of file, with EIO or ENOSPC. Each run counts the
// faults that were injected (an operation that was reached and failed);
// the long run injects 1,000 in all (300 + 300 + 400), the short run 12,
// 16 and one per workload. The seed fixes every fault; where background
// checkpoints run (gpKVS, the B+tree) it does not fix which call the
// failure of a checkpoint's write reaches, nor so what was acknowledged
// by then.
const (
	faultsKVS       = 300
	faultsBTree     = 300
	faultsWorkloads = 400
)

// faultKinds are the operations a seeded fault may fail.
var faultKinds = [...]native.FSOp{native.FSWrite, native.FSSync, native.FSRename}

// faultOp is a kind of operation on a class of file.
type faultOp struct {
	op     native.FSOp
	region bool // on a region file, not the log
}

func (o faultOp) String() string {
	if o.region {
		return o.op.String() + " region"
	}
	return o.op.String() + " log"
}

// classify returns the class of file of path, and false for other files
// (the directory, LOCK).
func classify(op native.FSOp, path string) (faultOp, bool) {
	base := filepath.Base(path)
	switch {
	case strings.HasPrefix(base, "LOG"):
		return faultOp{op, false}, true
	case strings.Contains(base, ".pmr"):
		return faultOp{op, true}, true
	}
	return faultOp{}, false
}

// seededFault is an Injector that fails the n-th operation of kind at it
// sees (n >= 1), once, with err; it counts every operation by kind and
// class of file.
type seededFault struct {
	mu    sync.Mutex
	at    faultOp
	n     int
	err   error
	seen  map[faultOp]int
	hit   bool
	where string // "sync LOG": the operation that failed
}

// newFault draws a fault from rng: its kind and class of file (among
// those with span > 0), its errno, and n in [1, span(kind)].
func newFault(rng *rand.Rand, span func(faultOp) int) *seededFault {
	at := faultOp{faultKinds[rng.IntN(len(faultKinds))], rng.IntN(2) == 1}
	for span(at) == 0 {
		at = faultOp{faultKinds[rng.IntN(len(faultKinds))], rng.IntN(2) == 1}
	}
	err := error(syscall.EIO)
	if rng.IntN(2) == 1 {
		err = syscall.ENOSPC
	}
	return &seededFault{at: at, n: 1 + rng.IntN(span(at)), err: err, seen: map[faultOp]int{}}
}

func (f *seededFault) MaybeError(op native.FSOp, path string) error {
	o, ok := classify(op, path)
	if !ok {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen[o]++
	if !f.hit && o == f.at && f.seen[o] == f.n {
		f.hit, f.where = true, op.String()+" "+filepath.Base(path)
		return f.err
	}
	return nil
}

func (f *seededFault) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%v on %v #%d (hit %v: %s)", f.err, f.at, f.n, f.hit, f.where)
}

func (f *seededFault) injected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hit
}

// faultSession follows the calls of one session with a seededFault: the
// first call that fails must be one after the fault was injected, and its
// error must wrap ErrIO and the injected errno; every durable call after
// it must fail too (the backend refuses writes until reopened).
type faultSession struct {
	t      *testing.T
	f      *seededFault
	trial  int
	failed error  // the first failed call's error
	first  string // the first failed call, "Open", "SetBatch", ...
}

// faultTally counts injected faults by the call they reached and the
// operation and errno that failed, for the tests' logs.
type faultTally map[string]int

func (ft faultTally) add(s *faultSession) {
	ft[fmt.Sprintf("%s:%v/%v", s.first, s.f.at, s.f.err)]++
}

// call checks a durable call's result and reports whether it succeeded
// (was acknowledged).
func (s *faultSession) call(what string, err error) bool {
	s.t.Helper()
	if err == nil {
		require.Nil(s.t, s.failed, "trial %d, fault %v: %s succeeded after a failed call (%v)", s.trial, s.f, what, s.failed)
		return true
	}
	require.True(s.t, s.f.injected(), "trial %d: %s failed with no fault injected: %v", s.trial, what, err)
	require.ErrorIs(s.t, err, native.ErrIO, "trial %d, fault %v: %s", s.trial, s.f, what)
	if s.failed == nil {
		require.ErrorIs(s.t, err, s.f.err, "trial %d, fault %v: %s does not wrap the cause", s.trial, s.f, what)
		s.failed = err
		s.first, _, _ = strings.Cut(what, " ")
	}
	return false
}

// end checks, after Close, that a fault that was injected reached a call.
// It reports whether a fault was injected.
func (s *faultSession) end() bool {
	s.t.Helper()
	if s.f.injected() {
		require.Error(s.t, s.failed, "trial %d: fault %v reached no call", s.trial, s.f)
		return true
	}
	return false
}

// faultSpan is the range of n for a fault of kind o in a trial of gpKVS or
// the B+tree: up to logOps writes or syncs of the log; the log is renamed
// at a checkpoint and at Close, a region file is renamed only when the
// region is created, and written and synced by checkpoints.
func faultSpan(o faultOp, logOps int) int {
	switch {
	case o.op == native.FSRename && o.region:
		return 1
	case o.op == native.FSRename:
		return 2
	case o.region:
		return 6
	}
	return logOps
}

// faultCounts returns the long run's count, or the short run's.
func faultCounts(long, short int) int {
	if longRun() {
		return long
	}
	return short
}

// gpKVS, opened on one directory trial after trial, with a seeded fault
// per trial (kvs.Open and Recover, kvs.Create, SetBatch of the kill
// test's batches, background checkpoints every 16 KiB of log, Close):
// every failed call wraps ErrIO and the errno, no call succeeds after one
// failed, an injected fault always reaches a call, and a reopen without
// faults holds every acknowledged batch and nothing but whole batches.
// Its batches run as kernels, then on the host (kvs.HostBatches).
func TestFaultsKVS(t *testing.T) {
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("host=%v", host), func(t *testing.T) {
			var opts []kvs.Option
			if host {
				opts = append(opts, kvs.HostBatches())
			}
			trial := func(s *faultSession, _ *native.Backend, m *pm.Machine, acked *uint64, created bool) {
				kvsTrial(s, m, acked, created, opts)
			}
			faults, trials, acked, tally := storeFaults(t, 6, faultCounts(faultsKVS, 12), 24, trial, verifyKVS)
			t.Logf("%d injected faults in %d trials over gpKVS, %d acknowledged batches, 0 lost, every fault reported; by call:op/errno: %v", faults, trials, acked, tally)
		})
	}
}

// storeFaults runs one store's trials on one directory, a fault drawn from
// the test's seed (stream picks its random stream) per trial over the
// first span operations of its class, until want faults have reached a
// call: trial runs the store's calls on the opened backend, and verify
// reopens the directory without faults after each trial and returns the
// acknowledged count it found.
func storeFaults(t *testing.T, stream uint64, want, span int,
	trial func(s *faultSession, be *native.Backend, m *pm.Machine, acked *uint64, created bool),
	verify func(t *testing.T, dir string, acked uint64, created *bool) uint64,
) (faults, trials int, acked uint64, tally faultTally) {
	rng := rand.New(rand.NewPCG(testSeed(t), stream))
	spanOf := func(o faultOp) int { return faultSpan(o, span) }
	dir := t.TempDir()
	created := false
	tally = faultTally{}
	for ; faults < want; trials++ {
		require.Less(t, trials, 10*want+20, "too few trials reach their fault")
		f := newFault(rng, spanOf)
		s := &faultSession{t: t, f: f, trial: trials}
		opts := native.Options{Mode: native.ModeLog, CheckpointBytes: btCheckpoint, FS: native.InjectFS(native.OSFS(), f)}
		be, err := native.Open(dir, opts)
		if s.call("Open", err) {
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			trial(s, be, m, &acked, created)
			s.call("Close", be.Close())
		}
		if s.end() {
			faults++
			tally.add(s)
		}
		acked = verify(t, dir, acked, &created)
	}
	return faults, trials, acked, tally
}

// kvsTrial opens, recovers or creates the store and commits up to 12
// batches, stopping at the first failed call.
func kvsTrial(s *faultSession, m *pm.Machine, acked *uint64, created bool, opts []kvs.Option) {
	var st *kvs.Store
	b := *acked
	if len(m.Regions()) > 0 {
		var err error
		st, b, err = openKVS(m, opts...)
		if err != nil && created {
			s.call("kvs.Open", err)
			return
		}
		if err != nil {
			for _, r := range m.Regions() {
				if !s.call("RemoveRegion", m.RemoveRegion(r.Name)) {
					return
				}
			}
			st = nil
		}
	}
	if st == nil {
		var err error
		st, err = kvs.Create(m, kvs.Config{Buckets: buckets, MaxBatch: hot + 1, BlockThreads: 64}, opts...)
		if !s.call("kvs.Create", err) {
			return
		}
		b = 0
	}
	keys := make([]uint32, 0, hot+1)
	vals := make([]uint64, 0, hot+1)
	for range 12 {
		b++
		keys, vals = keys[:0], vals[:0]
		for i := range hot {
			keys, vals = append(keys, uint32(i+1)), append(vals, b)
		}
		if b <= maxGrow {
			keys, vals = append(keys, uint32(growBase+b)), append(vals, b)
		}
		_, err := st.SetBatch(keys, vals)
		if !s.call(fmt.Sprintf("SetBatch %d", b), err) {
			_, err = st.SetBatch(keys, vals)
			require.Error(s.t, err, "trial %d: SetBatch after a failed one", s.trial)
			s.call("SetBatch again", err)
			return
		}
		*acked = b
	}
}

// The B+tree, opened on one directory trial after trial, with a seeded
// fault per trial (btree.Open, Create, the kill test's Puts, Deletes and
// InsertBatches, half of them inside Defer, background checkpoints every
// 16 KiB of log, Close): as TestFaultsKVS, every failed call reported
// with ErrIO and the errno, none acknowledged after it, and a reopen
// holds every acknowledged op and passes Check.
func TestFaultsBTree(t *testing.T) {
	faults, trials, acked, tally := storeFaults(t, 7, faultCounts(faultsBTree, 16), 60, btreeTrial, verifyBTree)
	t.Logf("%d injected faults in %d trials over the B+tree, %d acknowledged ops, 0 lost, every fault reported; by call:op/errno: %v", faults, trials, acked, tally)
}

// btreeTrial opens or creates the tree and runs up to 12 ops, stopping at
// the first failed call.
func btreeTrial(s *faultSession, be *native.Backend, m *pm.Machine, acked *uint64, created bool) {
	var tr *btree.Tree
	if len(m.Regions()) > 0 {
		var err error
		tr, err = btree.Open(m, "tree")
		if err != nil && created {
			s.call("btree.Open", err)
			return
		}
		if err != nil && !s.call("RemoveRegion", m.RemoveRegion("tree")) {
			return
		}
		if err != nil {
			tr = nil
		}
	}
	if tr == nil {
		var err error
		tr, err = btree.Create(m, "tree", btree.Options{Capacity: btCapacity})
		if !s.call("btree.Create", err) {
			return
		}
	}
	j := btreeDone(btreeContents(tr))
	for range 12 {
		j++
		op := func() error { return btreeOp(tr, j) }
		var err error
		if j%2 == 0 {
			err = be.Defer(op)
		} else {
			err = op()
		}
		if !s.call(fmt.Sprintf("op %d", j), err) {
			s.call("Commit after a failed op", be.Commit())
			return
		}
		*acked = j
	}
}

// Every correct workload (Tiny), each trial in a new directory with a
// seeded fault among the file operations of Open, Setup, Run and Close
// (n drawn within what a run without faults does): every failed call
// wraps ErrIO and the errno, none succeeds after it, an injected fault
// always reaches a call; a reopen without faults opens, and if Setup was
// acknowledged, Recover and Check pass, and if Run was, the image is the
// acknowledged one byte for byte.
func TestFaultsWorkloads(t *testing.T) {
	seed := testSeed(t)
	names := correctWorkloads()
	per := faultCounts((faultsWorkloads+len(names)-1)/len(names), 1)
	total, tally := 0, faultTally{}
	for wi, name := range names {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 8<<32|uint64(wi)))
			// A run without faults counts the operations of each kind.
			count := &seededFault{seen: map[faultOp]int{}}
			workloadTrial(&faultSession{t: t, f: count}, name, t.TempDir())
			span := func(o faultOp) int { return count.seen[o] }
			faults := 0
			for trial := 0; faults < per; trial++ {
				require.Less(t, trial, 4*per+8, "too few trials reach their fault (operations: %v)", count.seen)
				f := newFault(rng, span)
				s := &faultSession{t: t, f: f, trial: trial}
				if workloadTrial(s, name, t.TempDir()) {
					faults++
					tally.add(s)
				}
			}
			total += faults
		})
	}
	t.Logf("%d injected faults over %d workloads, 0 lost, every fault reported; by call:op/errno: %v", total, len(names), tally)
}

// workloadTrial runs one workload session under s's fault, then reopens
// and checks what it acknowledged. It reports whether the fault was
// injected.
func workloadTrial(s *faultSession, name, dir string) bool {
	t := s.t
	w, err := workloads.New(name, workloads.Tiny)
	require.NoError(t, err)
	setup, ran := false, ""
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), s.f)})
	if s.call("Open", err) {
		m, err := pm.NewMachine(be)
		require.NoError(t, err)
		if setup = s.call("Setup", w.Setup(m)); setup {
			if s.call("Run", w.Run(m)) {
				ran = fingerprint(m.Memory().Snapshot())
			} else {
				s.call("Commit after a failed Run", be.Commit())
			}
		}
		s.call("Close", be.Close())
	}
	hit := s.end()
	be2, m2 := open(t, dir, native.Options{Mode: native.ModeLog})
	defer func() { require.NoError(t, be2.Close()) }()
	if ran != "" {
		require.Equal(t, ran, fingerprint(m2.Memory().Snapshot()), "trial %d, fault %v: the acknowledged image is lost", s.trial, s.f)
	}
	if setup {
		require.NoError(t, w.Recover(m2), "trial %d, fault %v", s.trial, s.f)
		require.NoError(t, w.Check(m2), "trial %d, fault %v", s.trial, s.f)
	}
	return hit
}
