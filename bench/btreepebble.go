//go:build unix

package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/errgroup"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/pm/native"
)

func init() {
	Register(Experiment{
		Name: "btree-vs-pebble",
		Description: "WALL-CLOCK time, not simulated: the B+tree as an embedded store (btree.OpenDir on pm/native, " +
			"durable mode) against Pebble (pebble.Sync per write) and bbolt (fsync per transaction), same keys, same " +
			"directory, interleaved time slices, on disk and on tmpfs: one durable Put, batches of 100 and 1,000, " +
			"8 writers each making one durable Put at once (parput/b8: the B+tree's group commit, Pebble's, bbolt's Batch), " +
			"random Get, GetBatch of 1,000, Scan of 1,000, Delete; keys/s, p50/p99 latency per operation, bytes " +
			"written per key, RSS growth at open; directory from $" + EnvBenchDir,
		NoSet: true,
		Run:   runBtreeVsPebble,
	})
}

// ordStore is one ordered store under test in btree-vs-pebble. Every write
// is durable when it returns.
type ordStore interface {
	putBatch(keys, vals []uint64) error // one atomic write (a Put when len is 1)
	// putShared is one durable Put, safe for concurrent use, made in the
	// store's way of sharing a sync among concurrent writers.
	putShared(key, val uint64) error
	get(key uint64) error         // the key must be found
	getBatch(keys []uint64) error // every key must be found
	scan(lo uint64, n int) error  // n entries from lo on must exist
	del(key uint64) error         // the key must be there
	close() error
	extra(keys int) []metric // side-specific metrics, per key
}

// ordSys is a side of btree-vs-pebble: a name for its rows and how to open
// it in dir with keys preloaded (not timed, not synced one by one).
type ordSys struct {
	name string
	open func(dir string, keys []uint64) (ordStore, error)
}

// ordShape sizes btree-vs-pebble.
type ordShape struct {
	keys   int           // preloaded keys
	budget time.Duration // timed run per workload and side (at least minOps operations)
}

const minOps = 3

func ordShapeFor(o Options) ordShape {
	if o.Quick && o.Smoke {
		return ordShape{keys: 1 << 10, budget: 10 * time.Millisecond}
	}
	if o.Quick {
		return ordShape{keys: 1 << 13, budget: 200 * time.Millisecond}
	}
	return ordShape{keys: 1 << 16, budget: time.Second}
}

// ordWork is one workload: an operation of batch keys.
type ordWork struct {
	name  string
	batch int
}

func ordWorks() []ordWork {
	return []ordWork{
		{"put", 1}, {"put", 100}, {"put", 1000}, {"parput", parWriters}, {"get", 1}, {"getbatch", 1000}, {"scan", 1000}, {"delete", 1},
	}
}

// parWriters is the writers of the parput workload.
const parWriters = 8

// ordKey is the i-th preloaded key: spread over the key space, in order.
func ordKey(i int) uint64 { return uint64(i)*0x9E37 + 1 }

func ordVal(k, round uint64) uint64 { return k<<16 | round&0xffff }

func runBtreeVsPebble(ctx context.Context, o Options) ([]Row, error) {
	sh := ordShapeFor(o)
	dirs := benchFilesystems(o.Smoke)
	works := ordWorks()
	var rows []Row
	item := 0
	o.progress(len(dirs)*len(works), 0)
	for _, fd := range dirs {
		fsLabel, durable := fd.label, fd.durable
		systems := []ordSys{
			{"btree-native-" + durable.String(), func(dir string, keys []uint64) (ordStore, error) {
				return openBtreeDB(dir, durable, keys)
			}},
			{"pebble-sync", openPebbleOrd},
			{"bbolt", openBolt},
		}
		for _, w := range works {
			item++
			if !o.mine(item - 1) {
				continue
			}
			workload := fmt.Sprintf("%s/b%d", w.name, w.batch)
			ms, err := runOrdInterleaved(ctx, sh, systems, fd.dir, w)
			if err != nil {
				return rows, fmt.Errorf("bench: btree-vs-pebble %s %s: %w", fsLabel, workload, err)
			}
			rows = append(rows, sideRows("btree-vs-pebble", workload, fsLabel, ordNames(systems), ms, "keys_per_s")...)
			o.progress(0, 1)
		}
	}
	return rows, nil
}

// ordNames returns the sides' names.
func ordNames(systems []ordSys) []string {
	names := make([]string, len(systems))
	for i, s := range systems {
		names[i] = s.name
	}
	return names
}

// runOrdInterleaved runs workload w on every side (preloaded with the
// same keys), interleaved in time slices (interleave).
func runOrdInterleaved(ctx context.Context, sh ordShape, systems []ordSys, parent string, w ordWork) ([][]metric, error) {
	return interleave(ctx, parent, "btree-vs-pebble", ordNames(systems), sh.budget, minOps, func(i int, dir string) (slicedRun, error) {
		r, err := startOrd(sh, systems[i], dir, w)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
}

func (r *ordRun) timed() int { return len(r.lat) }
func (r *ordRun) abort()     { r.st.close() }

// ordRun is one side of btree-vs-pebble in progress.
type ordRun struct {
	st        ordStore
	w         ordWork
	keys      []uint64 // the preloaded keys, in order
	order     []int    // delete: the order keys are deleted in
	rng       *rand.Rand
	round     uint64
	wallMeter // done counts keys operated on
	ks, vs    []uint64
}

// startOrd opens side s in dir, preloaded, and measures the RSS the open
// and the preload added.
func startOrd(sh ordShape, s ordSys, dir string, w ordWork) (*ordRun, error) {
	keys := make([]uint64, sh.keys)
	for i := range keys {
		keys[i] = ordKey(i)
	}
	r := &ordRun{w: w, keys: keys, rng: rand.New(rand.NewPCG(uint64(w.batch), 0x6274))}
	if w.name == "delete" {
		r.order = r.rng.Perm(len(keys))
	}
	rss0 := settledRSS()
	st, err := s.open(dir, keys)
	if err != nil {
		return nil, err
	}
	r.st = st
	if rss1 := settledRSS(); rss1 > rss0 {
		r.rssBytes = rss1 - rss0
	}
	return r, nil
}

// settledRSS returns the process's resident set after a GC that returns
// freed memory to the operating system (0 where /proc is missing).
func settledRSS() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// run runs operations until this slice lasted budget and ran at least
// minN (delete: until the preloaded keys run out).
func (r *ordRun) run(budget time.Duration, minN int) error {
	prepare := func() bool {
		r.round++
		if r.w.name == "delete" && len(r.lat) >= len(r.order) {
			return false
		}
		r.ks, r.vs = r.ks[:0], r.vs[:0]
		switch r.w.name {
		case "put", "parput", "get", "getbatch":
			for range r.w.batch {
				k := r.keys[r.rng.IntN(len(r.keys))]
				r.ks, r.vs = append(r.ks, k), append(r.vs, ordVal(k, r.round))
			}
		case "scan":
			r.ks = append(r.ks, r.keys[r.rng.IntN(len(r.keys)-r.w.batch)])
		case "delete":
			r.ks = append(r.ks, r.keys[r.order[len(r.lat)]])
		}
		return true
	}
	return r.timeSlice(budget, minN, r.w.batch, prepare, func() error {
		switch r.w.name {
		case "put":
			return r.st.putBatch(r.ks, r.vs)
		case "parput":
			// r.w.batch writers, one Put each, at once.
			var g errgroup.Group
			for i := range r.ks {
				g.Go(func() error { return r.st.putShared(r.ks[i], r.vs[i]) })
			}
			return g.Wait()
		case "get":
			return r.st.get(r.ks[0])
		case "getbatch":
			return r.st.getBatch(r.ks)
		case "scan":
			return r.st.scan(r.ks[0], r.w.batch)
		case "delete":
			return r.st.del(r.ks[0])
		}
		return nil
	})
}

// finish closes the side (its closing writes count) and returns its
// metrics.
func (r *ordRun) finish() ([]metric, error) {
	extra := r.st.extra(r.done)
	if err := r.closeCounted(r.st.close); err != nil {
		return nil, err
	}
	return append(r.metrics("key"), extra...), nil
}

// btreeStore is the B+tree as an embedded store (btree.DB).
type btreeStore struct {
	db *btree.DB
	s0 native.Stats
}

// openBtreeDB preloads keys with durability off (not timed), then reopens
// the directory in mode.
func openBtreeDB(dir string, mode native.Mode, keys []uint64) (*btreeStore, error) {
	const maxBatch = 4096
	capacity := max(btree.DefaultDirCapacity, len(keys)/2+4*maxBatch)
	db, err := btree.OpenDir(dir, &btree.DirOptions{Mode: native.ModeUnsafeNoSync, Capacity: capacity, MaxBatch: maxBatch})
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(keys); i += maxBatch {
		ks := keys[i:min(i+maxBatch, len(keys))]
		vs := make([]uint64, len(ks))
		for j, k := range ks {
			vs[j] = ordVal(k, 0)
		}
		if err := db.PutBatch(ks, vs); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	if db, err = btree.OpenDir(dir, &btree.DirOptions{Mode: mode, NoCreate: true}); err != nil {
		return nil, err
	}
	return &btreeStore{db: db, s0: db.Stats()}, nil
}

func (b *btreeStore) putBatch(keys, vals []uint64) error {
	if len(keys) == 1 {
		return b.db.Put(keys[0], vals[0])
	}
	return b.db.PutBatch(keys, vals)
}

func (b *btreeStore) putShared(key, val uint64) error { return b.db.Put(key, val) }

func (b *btreeStore) get(key uint64) error {
	_, ok, err := b.db.Get(key)
	if err == nil && !ok {
		err = fmt.Errorf("bench: btree lost key %d", key)
	}
	return err
}

func (b *btreeStore) getBatch(keys []uint64) error {
	_, found, err := b.db.GetBatch(keys)
	if err != nil {
		return err
	}
	if i := slices.Index(found, false); i >= 0 {
		return fmt.Errorf("bench: btree lost key %d", keys[i])
	}
	return nil
}

func (b *btreeStore) scan(lo uint64, n int) error {
	got := 0
	err := b.db.Scan(lo, ^uint64(0), func(uint64, uint64) bool {
		got++
		return got < n
	})
	if err == nil && got < n {
		err = fmt.Errorf("bench: btree scan from %d: %d entries, want %d", lo, got, n)
	}
	return err
}

func (b *btreeStore) del(key uint64) error {
	ok, err := b.db.Delete(key)
	if err == nil && !ok {
		err = fmt.Errorf("bench: btree lost key %d", key)
	}
	return err
}

func (b *btreeStore) close() error { return b.db.Close() }

// extra reports the log's fdatasyncs and logged bytes per key since the
// measured open (the preload ran in another open).
func (b *btreeStore) extra(keys int) []metric {
	s, k := b.db.Stats(), float64(max(keys, 1))
	return []metric{
		{"syncs_per_key", float64(s.Syncs-b.s0.Syncs) / k},
		{"logged_bytes_per_key", float64(s.SyncBytes-b.s0.SyncBytes) / k},
	}
}

// pebbleOrd is Pebble with pebble.Sync on every write.
type pebbleOrd struct {
	db   *pebble.DB
	lsm0 uint64 // bytes written by the preload
}

func ordBytes(k uint64, buf *[8]byte) []byte {
	binary.BigEndian.PutUint64(buf[:], k)
	return buf[:]
}

func ordValBytes(v uint64, buf *[8]byte) []byte {
	binary.LittleEndian.PutUint64(buf[:], v)
	return buf[:]
}

func openPebbleOrd(dir string, keys []uint64) (ordStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	b := db.NewBatch()
	var kb, vb [8]byte
	for _, k := range keys {
		if err := b.Set(ordBytes(k, &kb), ordValBytes(ordVal(k, 0), &vb), nil); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := db.Apply(b, pebble.NoSync); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.Flush(); err != nil {
		db.Close()
		return nil, err
	}
	p := &pebbleOrd{db: db}
	p.lsm0 = p.lsmBytes()
	return p, nil
}

func (p *pebbleOrd) putBatch(keys, vals []uint64) error {
	var kb, vb [8]byte
	if len(keys) == 1 {
		return p.db.Set(ordBytes(keys[0], &kb), ordValBytes(vals[0], &vb), pebble.Sync)
	}
	b := p.db.NewBatchWithSize(len(keys) * 32)
	for i, k := range keys {
		if err := b.Set(ordBytes(k, &kb), ordValBytes(vals[i], &vb), nil); err != nil {
			return err
		}
	}
	return p.db.Apply(b, pebble.Sync)
}

// putShared: Pebble's synced writes that arrive together share a sync.
func (p *pebbleOrd) putShared(key, val uint64) error {
	var kb, vb [8]byte
	return p.db.Set(ordBytes(key, &kb), ordValBytes(val, &vb), pebble.Sync)
}

func (p *pebbleOrd) get(key uint64) error {
	var kb [8]byte
	_, c, err := p.db.Get(ordBytes(key, &kb))
	if err != nil {
		return fmt.Errorf("bench: pebble key %d: %w", key, err)
	}
	return c.Close()
}

// getBatch is one Get per key: Pebble has no batched lookup.
func (p *pebbleOrd) getBatch(keys []uint64) error {
	for _, k := range keys {
		if err := p.get(k); err != nil {
			return err
		}
	}
	return nil
}

func (p *pebbleOrd) scan(lo uint64, n int) error {
	var kb [8]byte
	it, err := p.db.NewIter(nil)
	if err != nil {
		return err
	}
	got := 0
	for ok := it.SeekGE(ordBytes(lo, &kb)); ok && got < n; ok = it.Next() {
		_ = it.Value()
		got++
	}
	if err := it.Close(); err != nil {
		return err
	}
	if got < n {
		return fmt.Errorf("bench: pebble scan from %d: %d entries, want %d", lo, got, n)
	}
	return nil
}

func (p *pebbleOrd) del(key uint64) error {
	var kb [8]byte
	return p.db.Delete(ordBytes(key, &kb), pebble.Sync)
}

func (p *pebbleOrd) close() error { return p.db.Close() }

// lsmBytes returns the bytes Pebble wrote: WAL, flushes, compactions.
func (p *pebbleOrd) lsmBytes() uint64 { return pebbleWritten(p.db) }

// extra reports the bytes Pebble wrote per key since the measured open.
func (p *pebbleOrd) extra(keys int) []metric {
	return []metric{{"lsm_bytes_per_key", float64(p.lsmBytes()-p.lsm0) / float64(max(keys, 1))}}
}

// boltStore is bbolt with its defaults (every Update fsyncs before it
// returns), but for Batch's size: parWriters, so that a batch of the
// parput writers commits as soon as all have arrived instead of after
// MaxBatchDelay (10 ms), as a user who knows their writer count would set.
type boltStore struct {
	db *bolt.DB
	w0 int64 // page writes of the preload
}

var boltBucket = []byte("kv")

func openBolt(dir string, keys []uint64) (ordStore, error) {
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o644, nil)
	if err != nil {
		return nil, err
	}
	db.MaxBatchSize = parWriters
	// Preload in one transaction (keys ascending, as bbolt fills best).
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(boltBucket)
		if err != nil {
			return err
		}
		for _, k := range keys {
			var kb, vb [8]byte
			if err := b.Put(ordBytes(k, &kb), ordValBytes(ordVal(k, 0), &vb)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	st := db.Stats()
	return &boltStore{db: db, w0: st.TxStats.GetWrite()}, nil
}

func (s *boltStore) putBatch(keys, vals []uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for i, k := range keys {
			// bbolt keeps the slices until the transaction ends.
			var kb, vb [8]byte
			if err := b.Put(ordBytes(k, &kb), ordValBytes(vals[i], &vb)); err != nil {
				return err
			}
		}
		return nil
	})
}

// putShared uses bbolt's Batch, which combines concurrent writers'
// updates into one transaction (one commit, synced).
func (s *boltStore) putShared(key, val uint64) error {
	return s.db.Batch(func(tx *bolt.Tx) error {
		var kb, vb [8]byte
		return tx.Bucket(boltBucket).Put(ordBytes(key, &kb), ordValBytes(val, &vb))
	})
}

func (s *boltStore) get(key uint64) error { return s.getBatch([]uint64{key}) }

// getBatch is one read transaction with one Get per key: bbolt has no
// batched lookup.
func (s *boltStore) getBatch(keys []uint64) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		var kb [8]byte
		for _, k := range keys {
			if b.Get(ordBytes(k, &kb)) == nil {
				return fmt.Errorf("bench: bbolt lost key %d", k)
			}
		}
		return nil
	})
}

func (s *boltStore) scan(lo uint64, n int) error {
	return s.db.View(func(tx *bolt.Tx) error {
		var kb [8]byte
		c := tx.Bucket(boltBucket).Cursor()
		got := 0
		for k, _ := c.Seek(ordBytes(lo, &kb)); k != nil && got < n; k, _ = c.Next() {
			got++
		}
		if got < n {
			return fmt.Errorf("bench: bbolt scan from %d: %d entries, want %d", lo, got, n)
		}
		return nil
	})
}

func (s *boltStore) del(key uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		var kb [8]byte
		if b.Get(ordBytes(key, &kb)) == nil {
			return fmt.Errorf("bench: bbolt lost key %d", key)
		}
		return b.Delete(ordBytes(key, &kb))
	})
}

func (s *boltStore) close() error { return s.db.Close() }

// extra reports bbolt's page writes (writeAt calls of whole pages, meta
// pages included) per key since the measured open.
func (s *boltStore) extra(keys int) []metric {
	st := s.db.Stats()
	w := st.TxStats.GetWrite() - s.w0
	return []metric{{"bolt_page_writes_per_key", float64(w) / float64(max(keys, 1))}}
}
