//go:build unix

package native_test

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/workloads"
)

// The SIGKILL tests re-execute the test binary as a child with these
// variables set; TestMain runs the child's workload instead of the tests.
const (
	envChild = "SCOPEDPM_NATIVE_CHILD" // "kvs", "btree", "btreedb", "accounts", "kvsconc", "dfence" or "workload:NAME"
	envDir   = "SCOPEDPM_NATIVE_DIR"
	// envCreated is "1" once the parent has seen the child's store created:
	// from then on the store must open.
	envCreated = "SCOPEDPM_NATIVE_CREATED"
)

func TestMain(m *testing.M) {
	if what := os.Getenv(envChild); what != "" {
		if err := child(what, os.Getenv(envDir)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// say writes one line to the parent at once (os.Stdout is unbuffered): a
// line the parent reads was written before the kill.
func say(format string, args ...any) { fmt.Fprintf(os.Stdout, format+"\n", args...) }

// Shape of the kvs child's store: keys 1..hot are updated by every batch
// with the batch number, and batch b also inserts key growBase+b.
const (
	hot      = 32
	growBase = 1_000_000
	maxGrow  = 20_000
	buckets  = 16384
)

func child(what, dir string) error {
	switch what {
	case "dfence":
		return dfenceChild(dir)
	case "btree":
		return btreeChild(dir)
	case "btreedb":
		return btreeDBChild(dir)
	case "accounts":
		return accountsChild(dir)
	case "kvsconc":
		return kvsConcChild(dir)
	}
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
	if err != nil {
		return err
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		return err
	}
	if name, ok := strings.CutPrefix(what, "workload:"); ok {
		w, err := workloads.New(name, workloads.Tiny)
		if err != nil {
			return err
		}
		say("ready")
		if err := w.Setup(m); err != nil {
			return err
		}
		say("setup")
		if err := w.Run(m); err != nil {
			return err
		}
		// Run returned: every persist is acknowledged, so the image
		// reopened after any later kill must be this one, byte for byte.
		say("done %s", fingerprint(m.Memory().Snapshot()))
		return be.Close()
	}
	say("open") // the parent's kill timer starts here: kills also hit recovery
	var st *kvs.Store
	var b uint64
	if len(m.Regions()) > 0 {
		st, b, err = openKVS(m)
		if err != nil && os.Getenv(envCreated) == "1" {
			return err
		}
		if err != nil {
			// A creation killed before it returned: never acknowledged,
			// so start over.
			for _, r := range m.Regions() {
				if err := m.RemoveRegion(r.Name); err != nil {
					return err
				}
			}
			st = nil
		}
	}
	if st == nil {
		if st, err = kvs.Create(m, kvs.Config{Buckets: buckets, MaxBatch: hot + 1, BlockThreads: 64}); err != nil {
			return err
		}
		b = 0
		say("created")
	}
	say("ready %d", b)
	keys := make([]uint32, hot, hot+1)
	vals := make([]uint64, hot, hot+1)
	for {
		b++
		for i := range hot {
			keys[i], vals[i] = uint32(i+1), b
		}
		keys, vals = keys[:hot], vals[:hot]
		if b <= maxGrow {
			keys, vals = append(keys, uint32(growBase+b)), append(vals, b)
		}
		if _, err := st.SetBatch(keys, vals); err != nil {
			return err
		}
		say("ack %d", b) // batch b is acknowledged: it must survive
	}
}

// fingerprint is a digest of an image's regions (names, bases, bytes).
func fingerprint(img *pm.Image) string {
	h := fnv.New64a()
	for _, r := range img.Regions {
		fmt.Fprintf(h, "%s@%v:%d;", r.Name, r.Base, len(r.Data))
		h.Write(r.Data)
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// openKVS opens and recovers the kvs child's store and returns the number
// of the last batch it holds.
func openKVS(m *pm.Machine, opts ...kvs.Option) (*kvs.Store, uint64, error) {
	st, err := kvs.Open(m, "gpkvs", opts...)
	if err != nil {
		return nil, 0, err
	}
	if _, err := st.Recover(); err != nil {
		return nil, 0, err
	}
	v, _, err := st.Get(1)
	return st, v, err
}

// verifyKVS checks a recovered store: it holds exactly the batches 1..v
// for some v in [acked, acked+1] (the batch in flight may have committed),
// and its invariant.
func verifyKVS(t *testing.T, dir string, acked uint64, created *bool) uint64 {
	t.Helper()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be.Close()
	if len(m.Regions()) == 0 {
		require.False(t, *created, "the store was created, now it is gone")
		return 0
	}
	st, v, err := openKVS(m)
	if err != nil && !*created {
		// Killed inside kvs.Create, which promises nothing before it
		// returns; the next child starts over.
		require.Zero(t, acked)
		return 0
	}
	require.NoError(t, err)
	*created = true
	require.NoError(t, st.Check())
	require.True(t, v == acked || v == acked+1, "store holds batch %d, %d acknowledged", v, acked)
	got, err := st.Contents()
	require.NoError(t, err)
	want := int(hot)
	if v == 0 {
		want = 0
	}
	for i := 1; i <= hot && v > 0; i++ {
		require.Equal(t, v, got[uint32(i)], "key %d", i)
	}
	for b := uint64(1); b <= min(v, maxGrow); b++ {
		require.Equal(t, b, got[uint32(growBase+b)], "key of batch %d", b)
		want++
	}
	require.Len(t, got, want, "keys of batches after %d", v)
	return v
}

// run starts a child, kills it with SIGKILL after delay(first line) and
// returns the lines it wrote.
func runChild(t *testing.T, what, dir string, env []string, delay func(lines []string) time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envChild+"="+what, envDir+"="+dir), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	var timer <-chan time.Time
	for timer == nil {
		l, ok := <-lines
		if !ok {
			break
		}
		got = append(got, l)
		if d := delay(got); d >= 0 {
			timer = time.After(d)
		}
	}
	if timer != nil {
		<-timer
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	}
	for l := range lines {
		got = append(got, l)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
		err = nil
	}
	require.NoError(t, err, "child %s: %s", what, stderr.String())
	return got
}

// gpKVS in a child process is SIGKILLed at seeded random points while it
// opens, recovers and commits batches; after each kill the parent reopens
// the files, recovers and requires every acknowledged batch and nothing but
// whole batches. The long run (longRun) kills it 400 times: with
// TestKillBTree's 400, TestKillBTreeDB's 100 and TestKillWorkloads' 8 per
// workload, 1,212 SIGKILLs over gpKVS, the B+tree, its DB and every
// workload. The seed fixes
// the delays of the kills; how far the child got by then depends on the
// machine's speed, so a replay hits similar, not identical, points.
func TestKillKVS(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	kills := 30
	if longRun() {
		kills = 400
	}
	dir := t.TempDir()
	var acked, inflight uint64
	duringOpen, created := 0, false
	for k := range kills {
		var env []string
		if created {
			env = []string{envCreated + "=1"}
		}
		lines := runChild(t, "kvs", dir, env, func(lines []string) time.Duration {
			if lines[0] == "open" {
				return time.Duration(rng.IntN(20_000)) * time.Microsecond
			}
			return -1
		})
		require.NotEmpty(t, lines, "kill %d", k)
		last := acked
		for _, l := range lines[1:] {
			if l == "created" {
				created = true
				continue
			}
			if v, ok := strings.CutPrefix(l, "ready "); ok {
				start, err := strconv.ParseUint(v, 10, 64)
				require.NoError(t, err)
				require.GreaterOrEqual(t, start, acked, "kill %d: the child started below an acknowledged batch", k)
				last = start
				continue
			}
			n, err := strconv.ParseUint(strings.TrimPrefix(l, "ack "), 10, 64)
			require.NoError(t, err, "line %q", l)
			last = n
		}
		if len(lines) < 2 {
			duringOpen++
		}
		acked = last
		v := verifyKVS(t, dir, acked, &created)
		if v > acked {
			inflight++
		}
		acked = v
	}
	t.Logf("%d SIGKILLs (%d during open and recovery), %d acknowledged batches, %d kills found the in-flight batch committed, 0 losses (mode log)", kills, duringOpen, acked, inflight)
}

// Every correct workload, in a child process, is SIGKILLed at a
// seeded random point after its setup; the parent reopens the files, runs
// the workload's recovery and Check. A kill after Run returned (the child
// said "done" with a digest of its image) must reopen to that very image:
// nothing acknowledged lost. One kill per workload (every correct
// workload, gpKVS's and the B+tree's included); the long run, 8.
func TestKillWorkloads(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	per := 1
	if longRun() {
		per = 8
	}
	total, midRun := 0, 0
	for _, name := range correctWorkloads() {
		t.Run(name, func(t *testing.T) {
			for k := range per {
				dir := t.TempDir()
				lines := runChild(t, "workload:"+name, dir, nil, func(lines []string) time.Duration {
					if lines[len(lines)-1] == "setup" {
						return time.Duration(rng.IntN(600)) * time.Microsecond
					}
					return -1
				})
				if len(lines) < 2 || lines[1] != "setup" {
					t.Logf("kill %d before the setup ended: %q", k, lines)
					continue
				}
				done, finished := strings.CutPrefix(lines[len(lines)-1], "done ")
				if !finished {
					midRun++
				}
				w, err := workloads.New(name, workloads.Tiny)
				require.NoError(t, err)
				be, m := open(t, dir, native.Options{Mode: native.ModeLog})
				if finished {
					require.Equal(t, done, fingerprint(m.Memory().Snapshot()), "kill %d after the run returned: the reopened image is not the acknowledged one", k)
				}
				require.NoError(t, w.Recover(m), "kill %d", k)
				require.NoError(t, w.Check(m), "kill %d", k)
				require.NoError(t, be.Close())
				total++
			}
		})
	}
	t.Logf("%d SIGKILLs checked (%d during the run; the rest after it returned, each reopened to the acknowledged image byte for byte), 0 losses (mode log)", total, midRun)
}

// The B+tree child's operations: op j (1, 2, ...) is a Delete of the key
// op j-4 put when j%5 == 0, a batch of 8 new keys when j%5 == 3, and a
// Put of a new key otherwise; every value is the number of the op that
// wrote it. Even ops run inside Backend.Defer (one sync), odd ones
// without (a sync per host write and launch).
const (
	btPutBase   = 1_000_000
	btBatchBase = 2_000_000
	btMaxOps    = 20_000 // the child stops here ("full") and waits for the kill
	btCapacity  = 1 << 15
	// btCheckpoint is the child's Options.CheckpointBytes: small, so that
	// kills also land in background checkpoints and in recoveries that
	// find LOG.old.
	btCheckpoint = 16 << 10
)

// btreeApply applies op j to a model of the tree.
func btreeApply(s map[uint64]uint64, j uint64) {
	switch j % 5 {
	case 0:
		delete(s, btPutBase+j-4)
	case 3:
		for i := range uint64(8) {
			s[btBatchBase+8*j+i] = j
		}
	default:
		s[btPutBase+j] = j
	}
}

// btreeDone returns the number of the last op the tree's contents hold.
func btreeDone(s map[uint64]uint64) uint64 {
	var j uint64
	for _, v := range s {
		j = max(j, v)
	}
	if (j+1)%5 == 0 {
		if _, ok := s[btPutBase+j+1-4]; !ok {
			j++ // the delete after the last write happened
		}
	}
	return j
}

func btreeContents(tr *btree.Tree) map[uint64]uint64 {
	s := map[uint64]uint64{}
	for k, v := range tr.All() {
		s[k] = v
	}
	return s
}

// btreeOp runs the B+tree child's op j on tr (see btreeApply).
func btreeOp(tr *btree.Tree, j uint64) error {
	switch j % 5 {
	case 0:
		found, err := tr.Delete(btPutBase + j - 4)
		if err == nil && !found {
			err = fmt.Errorf("op %d: key %d not found", j, btPutBase+j-4)
		}
		return err
	case 3:
		keys, vals := make([]uint64, 8), make([]uint64, 8)
		for i := range keys {
			keys[i], vals[i] = btBatchBase+8*j+uint64(i), j
		}
		_, err := tr.InsertBatch(keys, vals, btree.BatchOptions{BlockThreads: 4})
		return err
	}
	return tr.Put(btPutBase+j, j)
}

// btreeChild runs B+tree operations until killed, saying "ack j" once op
// j returned.
func btreeChild(dir string) error {
	say("open") // the parent's kill timer starts here: kills also hit the log's and the tree's recovery
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog, CheckpointBytes: btCheckpoint})
	if err != nil {
		return err
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		return err
	}
	var tr *btree.Tree
	if len(m.Regions()) > 0 {
		tr, err = btree.Open(m, "tree")
		if err != nil && os.Getenv(envCreated) == "1" {
			return err
		}
		if err != nil {
			// A creation killed before it returned: never acknowledged.
			if err := m.RemoveRegion("tree"); err != nil {
				return err
			}
			tr = nil
		}
	}
	if tr == nil {
		if tr, err = btree.Create(m, "tree", btree.Options{Capacity: btCapacity}); err != nil {
			return err
		}
		say("created")
	}
	j := btreeDone(btreeContents(tr))
	say("ready %d", j)
	for j < btMaxOps {
		j++
		op := func() error { return btreeOp(tr, j) }
		if j%2 == 0 {
			err = be.Defer(op)
		} else {
			err = op()
		}
		if err != nil {
			return err
		}
		say("ack %d", j) // op j is acknowledged: it must survive
	}
	say("full")
	time.Sleep(time.Hour)
	return nil
}

// verifyBTree checks a recovered tree: Check passes and it holds exactly
// ops 1..v for v in [acked, acked+1] (the op in flight may have
// committed, or be rolled forward by recovery). It returns v.
func verifyBTree(t *testing.T, dir string, acked uint64, created *bool) uint64 {
	t.Helper()
	be, m := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be.Close()
	if len(m.Regions()) == 0 {
		require.False(t, *created, "the tree was created, now it is gone")
		return 0
	}
	tr, err := btree.Open(m, "tree")
	if err != nil && !*created {
		require.Zero(t, acked)
		return 0
	}
	require.NoError(t, err)
	*created = true
	require.NoError(t, tr.Check())
	got := btreeContents(tr)
	v := btreeDone(got)
	require.True(t, v == acked || v == acked+1, "tree holds op %d, %d acknowledged", v, acked)
	want := map[uint64]uint64{}
	for j := uint64(1); j <= v; j++ {
		btreeApply(want, j)
	}
	require.Equal(t, want, got, "contents after op %d", v)
	return v
}

// The B+tree (Put, Delete, InsertBatch kernels, half of them inside
// Defer) in a child process is SIGKILLed at seeded random points while
// it opens, recovers and writes; after each kill the parent reopens,
// recovers and requires Check and every acknowledged op, and nothing
// but whole ops. The child checkpoints every 16 KiB of log, in the
// background. The long run kills it 400 times (see TestKillKVS).
func TestKillBTree(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	kills := 20
	if longRun() {
		kills = 400
	}
	dir := t.TempDir()
	var acked, inflight uint64
	duringOpen, midCheckpoint, created := 0, 0, false
	for k := range kills {
		var env []string
		if created {
			env = []string{envCreated + "=1"}
		}
		lines := runChild(t, "btree", dir, env, func(lines []string) time.Duration {
			if lines[0] == "open" && len(lines) == 1 {
				return time.Duration(rng.IntN(40_000)) * time.Microsecond
			}
			return -1
		})
		require.NotEmpty(t, lines, "kill %d", k)
		last := acked
		for _, l := range lines[1:] {
			switch {
			case l == "created" || l == "full":
				created = created || l == "created"
			case strings.HasPrefix(l, "ready "):
				start, err := strconv.ParseUint(strings.TrimPrefix(l, "ready "), 10, 64)
				require.NoError(t, err)
				require.GreaterOrEqual(t, start, acked, "kill %d: the child started below an acknowledged op", k)
				last = start
			default:
				n, err := strconv.ParseUint(strings.TrimPrefix(l, "ack "), 10, 64)
				require.NoError(t, err, "line %q", l)
				last = n
			}
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "ready ") }) {
			duringOpen++
		}
		acked = last
		if _, err := os.Stat(filepath.Join(dir, "LOG.old")); err == nil {
			midCheckpoint++ // killed in a background checkpoint
		}
		v := verifyBTree(t, dir, acked, &created)
		if v > acked {
			inflight++
		}
		acked = v
	}
	t.Logf("%d SIGKILLs (%d during open and recovery, %d during a background checkpoint), %d acknowledged ops, %d kills found the op in flight done, 0 losses (mode log)", kills, duringOpen, midCheckpoint, acked, inflight)
}
