//go:build unix

package native_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/internal/testkit/writerkeys"
)

// Shape of the btreedb child: dbWriters goroutines each Put keys
// w<<32|1, w<<32|2, ... (value: the low half) in order, while dbReaders
// goroutines scan. A pool of 64 nodes makes the tree grow as it fills.
const (
	dbWriters   = 4
	dbReaders   = 2
	dbPerWriter = 2000
)

// dbPrefixes returns how many of each writer's keys db holds (writerkeys).
func dbPrefixes(db *btree.DB) ([]uint64, error) {
	return writerkeys.Prefixes(db.Scan, dbWriters)
}

// btreeDBChild runs the btreedb child: OpenDir (recovering), then the
// writers, each acknowledging every Put that returned, beside readers that
// check every snapshot they scan.
func btreeDBChild(dir string) error {
	say("open")
	db, err := btree.OpenDir(dir, &btree.DirOptions{Capacity: 64, MaxBatch: 64})
	if err != nil {
		return err
	}
	start, err := dbPrefixes(db)
	if err != nil {
		return err
	}
	say("ready")
	return runWritersReaders(dbWriters, dbReaders, func(w int) error {
		for i := start[w] + 1; i <= dbPerWriter; i++ {
			if err := db.Put(uint64(w)<<32|i, i); err != nil {
				return err
			}
			say("ack %d %d", w, i)
		}
		return nil
	}, func(int) error {
		if _, err := dbPrefixes(db); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		return nil
	})
}

// runWritersReaders runs a concurrent kill test's child: writers
// goroutines write(w), and readers goroutines call read(r) again and again
// until the writers are done or one fails. Then, if nothing failed, it
// says "full" and waits for the kill; it returns the first error.
func runWritersReaders(writers, readers int, write func(w int) error, read func(r int) error) error {
	errs := make(chan error, writers+readers)
	var ws, rs sync.WaitGroup
	var stop atomic.Bool
	for w := range writers {
		ws.Go(func() {
			if err := write(w); err != nil {
				errs <- err
			}
		})
	}
	for r := range readers {
		rs.Go(func() {
			for !stop.Load() {
				if err := read(r); err != nil {
					errs <- fmt.Errorf("a reader: %w", err)
					return
				}
			}
		})
	}
	ws.Wait()
	stop.Store(true)
	rs.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	say("full")
	time.Sleep(time.Hour)
	return nil
}

// collectAcks raises acked[w] to the largest n of the child's "ack w n"
// lines.
func collectAcks(t *testing.T, lines []string, acked []uint64) {
	t.Helper()
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, "ack ")
		if !ok {
			continue
		}
		w, i, ok := strings.Cut(rest, " ")
		require.True(t, ok, "line %q", l)
		wi, err := strconv.Atoi(w)
		require.NoError(t, err, "line %q", l)
		require.Less(t, wi, len(acked), "line %q", l)
		n, err := strconv.ParseUint(i, 10, 64)
		require.NoError(t, err, "line %q", l)
		acked[wi] = max(acked[wi], n)
	}
}

// The B+tree DB (OpenDir) in a child process, four goroutines writing and
// two scanning while the tree grows from a pool of 64 nodes, is SIGKILLed
// at seeded random points; after each kill the parent reopens it and
// requires Check, every acknowledged Put of every writer, at most the one
// in flight more, and nothing else; the child's readers require that every
// snapshot holds a prefix of each writer's keys. The long run kills it 100
// times.
func TestKillBTreeDB(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 9))
	kills := 12
	if longRun() {
		kills = 100
	}
	dir := t.TempDir()
	acked := make([]uint64, dbWriters)
	inflight := 0
	for k := range kills {
		lines := runChild(t, "btreedb", dir, nil, func(lines []string) time.Duration {
			if lines[0] == "open" && len(lines) == 1 {
				return time.Duration(rng.IntN(300_000)) * time.Microsecond
			}
			return -1
		})
		collectAcks(t, lines, acked)
		db, err := btree.OpenDir(dir, nil)
		require.NoError(t, err, "kill %d", k)
		require.NoError(t, db.Check(), "kill %d", k)
		got, err := dbPrefixes(db)
		require.NoError(t, err, "kill %d", k)
		for w := range dbWriters {
			require.True(t, got[w] == acked[w] || got[w] == acked[w]+1,
				"kill %d: writer %d has %d keys, %d acknowledged", k, w, got[w], acked[w])
			if got[w] > acked[w] {
				inflight++
			}
			acked[w] = got[w]
		}
		require.NoError(t, db.Close())
		files, err := filepath.Glob(filepath.Join(dir, "btree*.pmr"))
		require.NoError(t, err)
		require.Len(t, files, 1, "kill %d: one generation left", k)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "btree*.pmr"))
	t.Logf("%d SIGKILLs, %v keys per writer at the end (%s), %d kills found a Put in flight done, 0 losses", kills, acked, filepath.Base(files[0]), inflight)
}
