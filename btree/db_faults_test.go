//go:build unix

package btree

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/long"
	"github.com/scopedpm/scopedpm/internal/testkit/writerkeys"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

var flagFaultSeed = flag.Uint64("btree.faultseed", 0, "seed of TestDBFaults (0: from the clock)")

// Shape of TestDBFaults: writer w Puts keys w<<32|1, w<<32|2, ... (value:
// the low half) in order, fpPerTrial a trial, beside fpReaders scanning.
const (
	fpWriters  = 4
	fpReaders  = 2
	fpPerTrial = 16
)

// writerPrefixes returns how many of each writer's keys db holds (writerkeys).
func writerPrefixes(db *DB) ([]uint64, error) {
	return writerkeys.Prefixes(db.Scan, fpWriters)
}

// The DB (OpenDir's tree: group commit, growth from a pool of 64 nodes),
// opened on one directory trial after trial with one seeded I/O fault
// per trial (a write, sync or rename of the persist log or of a region
// file failing with EIO or ENOSPC), four writers Putting and two readers
// scanning: every failed write wraps native.ErrIO and the errno; a write
// that starts after one failed fails too (the backend refuses writes
// until reopened); every snapshot a reader sees holds a prefix of each
// writer's keys; a fault that was injected reaches a call (a write, the
// open, or Close); and a reopen without faults passes Check and holds
// every acknowledged Put of every writer, at most the one in flight more.
// The long run (SCOPEDPM_LONG=1) injects 150 faults, the short run 12.
func TestDBFaults(t *testing.T) {
	seed := *flagFaultSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed = %d (replay: go test ./btree -run 'TestDBFaults$' -btree.faultseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	want := 12
	if long.Enabled() {
		want = 150
	}
	opts := DirOptions{Capacity: 64, MaxBatch: 64}
	dir := t.TempDir()
	acked := make([]uint64, fpWriters)
	faults, trials, inflight := 0, 0, 0
	reached := map[string]int{}
	kinds := [...]native.FSOp{native.FSWrite, native.FSSync, native.FSRename}
	for ; faults < want; trials++ {
		require.Less(t, trials, 10*want+20, "too few trials reach their fault")
		region := rng.IntN(2) == 1
		f := &native.NthFault{Op: kinds[rng.IntN(len(kinds))], Err: syscall.EIO, N: 1 + rng.IntN(40),
			Match: func(path string) bool {
				base := filepath.Base(path)
				if region {
					return strings.Contains(base, ".pmr")
				}
				return strings.HasPrefix(base, "LOG")
			}}
		if rng.IntN(2) == 1 {
			f.Err = syscall.ENOSPC
		}
		what := fmt.Sprintf("trial %d, fault %v (region files: %v)", trials, f, region)
		// failed is set once a call has returned an error; checkErr checks
		// a failed call's error.
		var failed atomic.Bool
		var firstMu sync.Mutex
		first := ""
		checkErr := func(call string, err error) error {
			switch {
			case !f.Hit():
				return fmt.Errorf("%s: %s failed with no fault injected: %w", what, call, err)
			case !errors.Is(err, native.ErrIO):
				return fmt.Errorf("%s: %s: %w does not wrap native.ErrIO", what, call, err)
			}
			if !failed.Swap(true) {
				firstMu.Lock()
				first = call
				firstMu.Unlock()
			}
			return nil
		}
		done := make([]uint64, fpWriters)
		copy(done, acked)
		be, err := native.Open(dir, native.Options{Mode: native.ModeLog, CheckpointBytes: 4 << 10, FS: native.InjectFS(native.OSFS(), f)})
		if err != nil {
			require.NoError(t, checkErr("native.Open", err))
		} else {
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			tr, gen, err := openDirTree(m, opts)
			if err != nil {
				require.NoError(t, checkErr("openDirTree", err))
				_ = be.Close()
			} else {
				db := newDB(be, m, tr, gen, dir)
				errs := make(chan error, fpWriters+fpReaders)
				var writers, readers sync.WaitGroup
				var stop atomic.Bool
				for w := range uint64(fpWriters) {
					writers.Go(func() {
						for i, end := done[w]+1, done[w]+fpPerTrial; i <= end; i++ {
							after := failed.Load()
							err := db.Put(w<<32|i, i)
							if err == nil && after {
								errs <- fmt.Errorf("%s: writer %d's Put %d succeeded after a write failed", what, w, i)
								return
							}
							if err != nil {
								if err := checkErr(fmt.Sprintf("Put %d:%d", w, i), err); err != nil {
									errs <- err
								}
								return
							}
							done[w] = i
						}
					})
				}
				for range fpReaders {
					readers.Go(func() {
						for !stop.Load() {
							if _, err := writerPrefixes(db); err != nil {
								if !errors.Is(err, native.ErrIO) {
									errs <- fmt.Errorf("%s: a reader's snapshot: %w", what, err)
								}
								return
							}
						}
					})
				}
				writers.Wait()
				stop.Store(true)
				readers.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				if err := db.Close(); err != nil {
					require.NoError(t, checkErr("Close", err))
				}
			}
		}
		if f.Hit() {
			require.True(t, failed.Load(), "%s: reached no call", what)
			faults++
			reached[strings.Fields(first)[0]]++
		}
		// Reopen without faults: every acknowledged Put, at most the one
		// in flight more, per writer.
		db, err := OpenDir(dir, &opts)
		require.NoError(t, err, "%s: reopen", what)
		require.NoError(t, db.Check(), "%s", what)
		got, err := writerPrefixes(db)
		require.NoError(t, err, "%s", what)
		for w := range fpWriters {
			require.True(t, got[w] == done[w] || got[w] == done[w]+1,
				"%s: writer %d has %d keys, %d acknowledged", what, w, got[w], done[w])
			if got[w] > done[w] {
				inflight++
			}
			acked[w] = got[w]
		}
		require.NoError(t, db.Close())
	}
	t.Logf("%d injected faults in %d trials, %v keys per writer at the end, %d in-flight Puts found durable, 0 lost; first failed call: %v", faults, trials, acked, inflight, reached)
}
