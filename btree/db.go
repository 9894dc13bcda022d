//go:build unix

package btree

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// ErrClosed: the DB was closed; every later call on it returns an error
// wrapping ErrClosed.
var ErrClosed = errors.New("btree: db closed")

// DefaultDirCapacity is the node pool of a tree OpenDir creates with
// DirOptions.Capacity 0: 65,536 nodes of 256 bytes (16 MiB of file and of
// memory), room for about 500,000 random keys (560,000 written in batches
// of 4,096, 620,000 by single Puts, in a test) before its first growth.
const DefaultDirCapacity = 1 << 16

// dbRegion is the name of the PM region (the file btree.pmr) that holds
// the tree of a DB until it first grows; generation g > 0 of the tree is
// in region "btree.g" (see DB.grow).
const dbRegion = "btree"

// genRegion returns the region of generation g of a DB's tree.
func genRegion(g int) string {
	if g == 0 {
		return dbRegion
	}
	return fmt.Sprintf("%s.%d", dbRegion, g)
}

// regionGen returns the generation of a DB tree's region name, or false
// for a name that is not one.
func regionGen(name string) (int, bool) {
	if name == dbRegion {
		return 0, true
	}
	rest, ok := strings.CutPrefix(name, dbRegion+".")
	if !ok {
		return 0, false
	}
	g, err := strconv.Atoi(rest)
	if err != nil || g <= 0 || genRegion(g) != name {
		return 0, false
	}
	return g, true
}

// DirOptions configure OpenDir. A nil *DirOptions, like the zero value,
// means every default.
type DirOptions struct {
	// Capacity is the first node pool of a new tree, in nodes (256
	// bytes each at the default order); 0 means DefaultDirCapacity. A
	// pool is allocated in full (file and memory); a write that needs
	// more nodes than it has free grows the tree first (see DB's Growth), so
	// Capacity only saves the first growths.
	Capacity int
	// MaxBatch is the batch area of a new tree: the most keys one tree
	// batch holds (0: 4096), and so the most keys one group commit
	// takes. A PutBatch of more keys is still one atomic batch: it first
	// moves the tree to a generation with an area that holds it (a copy
	// of the tree, as a growth), so MaxBatch only saves that copy.
	MaxBatch int
	// Mode is the durability mode of pm/native. The zero value,
	// native.ModeAuto, picks dax on a DAX filesystem whose CPU has CLWB
	// or CLFLUSHOPT, and the persist log (native.ModeLog, one fdatasync
	// per durability point, group commit) everywhere else; both make
	// every acknowledged write survive a crash or power cut.
	// native.ModeUnsafeNoSync gives durability up (for measurement only).
	Mode native.Mode
	// NoCreate refuses a directory that holds no tree (an error wrapping
	// pm.ErrNoRegion) instead of creating one there.
	NoCreate bool
}

// DB is a persistent B+tree of uint64 keys and values stored in a
// directory: an embedded ordered store on the real backend (pm/native).
// OpenDir opens or creates one; Close releases it.
//
// # Durability
//
// A write (Put, PutBatch, Delete) is durable when it returns nil: it is
// in the tree after a crash or power cut at any later moment. A write that
// returns an error may still have happened: the next OpenDir finishes it
// or discards it, all or nothing (a batch is never applied in part).
// Reads see the last committed write, which is durable.
//
// # Concurrency
//
// A DB is safe for concurrent use by several goroutines. Puts and
// PutBatches that arrive while a write is under way are committed
// together (group commit): one tree batch of up to MaxBatch keys, in
// arrival order (the later value of a key wins), one sync, each caller's
// batch still all or nothing. Writes (group commits, Deletes) run one at
// a time. Reads (Get, GetBatch, Scan, Len) run beside them and beside
// each other, each on a snapshot: the tree as of the last write that
// returned when the read began. Changes are copy-on-write, and the nodes
// a later write frees are not reused while a read that can reach them is
// under way, so a long Scan sees one write's tree throughout (and keeps
// that many nodes from reuse). Reads wait only for a growth: it creates
// and removes its files with no read under way (it waits for those under
// way to end, and reads that start meanwhile wait for it). Scan's fn must
// not call the DB.
//
// # Growth
//
// The tree grows without a limit to choose: a write that needs more free
// nodes than its pool has first copies the tree into a new one of twice
// the pool (the next generation, a new file) and removes the old file once
// the copy is durable. The write that grows pays for the copy (linear in
// the keys; each key is copied about twice over the DB's life); a crash
// during the copy leaves the old tree, which the next OpenDir keeps. A
// PutBatch larger than the tree's batch area grows it the same way, to an
// area of the next power of two at least the batch's size.
//
// # Memory
//
// The tree's image is resident, outside the Go heap, as far as its nodes
// are in use (about 27 MB at 1M random keys). Beside it a DB holds a
// cache of decoded nodes (about 4 MiB, its keys and values also outside
// the Go heap), the buffers of its largest recent batch, and, while a
// background checkpoint runs, that checkpoint's index and buffers (a few
// MiB). A growth holds the old and the new image while it copies. pmbench
// -exp load-vs-pebble measures the peak: 75-77 MB for 1M random keys in
// batches of 1,000, about 1.9x Pebble's in the same program.
type DB struct {
	// mu is held by a write (and by Check, Stats and Close): one at a
	// time. rw is held shared by every read for its whole length, and
	// exclusively where the tree's regions change (a growth's creation
	// and removal) and by Close. The order is mu, rw, smu.
	mu     sync.Mutex
	rw     sync.RWMutex
	be     *native.Backend
	m      *pm.Machine
	t      *Tree // changes under mu and rw
	gen    int   // the tree's generation: its region is genRegion(gen)
	dir    string
	closed bool // set under mu and rw
	// maxBatch is the tree's MaxBatch: the most keys a group commit
	// takes (a growth may raise it; see grow).
	maxBatch atomic.Int64

	// smu guards view, the tree as of the last write that returned,
	// which reads start from, and readers, the views being read.
	smu     sync.Mutex
	view    view
	readers []viewReaders

	// Group commit (DB.put): puts wait in queue; the one that finds no
	// leader leads, committing the queue group by group until it is empty.
	qmu     sync.Mutex
	queue   []*putReq
	leading bool
}

// readersOf returns the index of the reads of the view of batch seq in
// db.readers, or where they would go; the caller holds db.smu.
func (db *DB) readersOf(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(db.readers, seq, func(r viewReaders, s uint64) int { return cmp.Compare(r.seq, s) })
}

// viewReaders counts the reads of the view of batch seq under way.
type viewReaders struct {
	seq uint64
	n   int
}

// putReq is a Put or PutBatch waiting for its group's commit.
type putReq struct {
	keys, vals []uint64
	err        error
	done       chan struct{}
}

// OpenDir opens the tree stored in directory dir, creating the directory
// and an empty tree if there is none (see DirOptions.NoCreate), and
// finishes a write that a crash interrupted. The directory is locked
// until Close: a second OpenDir of it fails with an error wrapping
// native.ErrLocked. A missing or unusable directory is an error wrapping
// native.ErrIO; damaged files wrap pm.ErrCorrupt.
func OpenDir(dir string, opts *DirOptions) (*DB, error) {
	var o DirOptions
	if opts != nil {
		o = *opts
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory name", ErrBadArg)
	}
	// Small pages: the tree's image is read a node at a time, and huge
	// pages held about 3 MB more at 1M keys for no measured speed.
	be, err := native.Open(dir, native.Options{Mode: o.Mode, Create: !o.NoCreate, NoHugePages: true})
	if err != nil {
		return nil, fmt.Errorf("btree: open %s: %w", dir, err)
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		_ = be.Close()
		return nil, fmt.Errorf("btree: open %s: %w", dir, err)
	}
	t, gen, err := openDirTree(m, o)
	if err != nil {
		_ = be.Close()
		return nil, fmt.Errorf("btree: open %s: %w", dir, err)
	}
	return newDB(be, m, t, gen, dir), nil
}

// newDB returns the DB of tree t, of generation gen, on machine m over be.
func newDB(be *native.Backend, m *pm.Machine, t *Tree, gen int, dir string) *DB {
	t.keepFreed()
	db := &DB{be: be, m: m, t: t, gen: gen, dir: dir, view: t.view()}
	db.maxBatch.Store(int64(t.g.maxBatch))
	return db
}

// openDirTree opens the DB's tree on m, or creates it, and returns it with
// its generation. Of several generations the oldest is the tree: a newer
// one is a growth that a crash interrupted before it removed the old
// (DB.grow), and is removed. A creation that a crash interrupted before
// Create returned (never acknowledged: no commit word, no node but the
// first root) is started again.
func openDirTree(m *pm.Machine, o DirOptions) (*Tree, int, error) {
	var gens []int
	for _, r := range m.Regions() {
		if g, ok := regionGen(r.Name); ok {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	for i := len(gens) - 1; i > 0; i-- {
		if err := m.RemoveRegion(genRegion(gens[i])); err != nil {
			return nil, 0, err
		}
	}
	if len(gens) > 0 && gens[0] > 0 {
		t, err := Open(m, genRegion(gens[0]))
		return t, gens[0], err
	}
	t, err := openFirstTree(m, o)
	return t, 0, err
}

// openFirstTree opens the tree of generation 0, or creates it.
func openFirstTree(m *pm.Machine, o DirOptions) (*Tree, error) {
	create := func() (*Tree, error) {
		if o.NoCreate {
			return nil, fmt.Errorf("%w: no tree (region %q)", pm.ErrNoRegion, dbRegion)
		}
		if o.Capacity == 0 {
			o.Capacity = DefaultDirCapacity
		}
		return Create(m, dbRegion, Options{Capacity: o.Capacity, MaxBatch: o.MaxBatch})
	}
	r, err := m.OpenRegion(dbRegion)
	if errors.Is(err, pm.ErrNoRegion) {
		return create()
	}
	if err != nil {
		return nil, err
	}
	unfinished, err := unfinishedCreate(m, r)
	if err != nil {
		return nil, err
	}
	if unfinished {
		if err := m.RemoveRegion(dbRegion); err != nil {
			return nil, err
		}
		return create()
	}
	return Open(m, dbRegion)
}

// unfinishedCreate reports whether region r holds a tree whose Create did
// not return: its commit word is 0 (Create's last store makes it 1), and no
// node past the first root leaf was ever written (any write after Create
// writes fresh nodes). A committed tree whose commit word was damaged has
// written nodes, so it is reported by Open as corrupt, never discarded.
func unfinishedCreate(m *pm.Machine, r pm.Range) (bool, error) {
	if r.Size < fixedEnd {
		return false, nil // Open reports the short region
	}
	b := make([]byte, 8)
	if err := m.CopyOut(r.Base.Add(commitOff), b); err != nil {
		return false, err
	}
	if pm.GetLE(b) != 0 {
		return false, nil
	}
	hb := make([]byte, line)
	if err := m.CopyOut(r.Base, hb); err != nil {
		return false, err
	}
	g, err := decodeHeader(hb)
	if err != nil || g.size() > r.Size {
		// No header, or not a whole one: a creation stopped before its
		// first write, if the rest is zero too.
		g = geometry{}
	}
	from := uint64(fixedEnd)
	if g.nodeBytes != 0 {
		from = g.nodesOff() + 2*g.nodeBytes // past node 0 (unused) and the first root, node 1
	}
	chunk := make([]byte, 1<<16)
	for off := from; off < r.Size; off += uint64(len(chunk)) {
		c := chunk[:min(uint64(len(chunk)), r.Size-off)]
		if err := m.CopyOut(r.Base.Add(off), c); err != nil {
			return false, err
		}
		for _, x := range c {
			if x != 0 {
				return false, nil
			}
		}
	}
	return true, nil
}

// write runs a write of the tree with its durability points deferred to
// its end (native.Backend.Defer): in log mode its host writes and kernel
// persists go to the persist log in issue order, and one sync at the end
// makes them durable. The tree's commit protocol needs only that order (a
// crash recovers a prefix of the persists, as if each step had synced;
// pm/native's TestPowerCutBTreeDefer cuts power at every sync of such
// writes), so a Put costs one sync instead of one per step. The caller
// holds db.mu.
func (db *DB) write(batch int, fn func(t *Tree) error) error {
	t, err := db.use()
	if err != nil {
		return err
	}
	for batch > int(t.g.maxBatch) {
		// The tree's batch area is too small: move to a generation
		// whose area holds the batch, which then commits as one.
		if err := db.grow(batch); err != nil {
			return err
		}
		t = db.t
	}
	// The nodes that no view being read can reach are free again.
	db.smu.Lock()
	oldest := uint64(math.MaxUint64)
	if len(db.readers) > 0 {
		oldest = db.readers[0].seq
	}
	db.smu.Unlock()
	t.releaseKept(oldest)
	defer db.setView()
	err = db.be.Defer(func() error { return fn(t) })
	for errors.Is(err, ErrFull) {
		// The pool is short of free nodes: nothing was written. Grow,
		// then write on the new tree.
		if gerr := db.grow(batch); gerr != nil {
			return errors.Join(err, gerr)
		}
		t = db.t
		err = db.be.Defer(func() error { return fn(t) })
	}
	return err
}

// setView makes the tree's last committed batch the view that reads start
// from; the caller holds db.mu.
func (db *DB) setView() {
	db.smu.Lock()
	db.view = db.t.view()
	db.smu.Unlock()
}

// exclusive runs fn with every read finished and none started: fn may
// change the machine's regions. The caller holds db.mu.
func (db *DB) exclusive(fn func() error) error {
	db.rw.Lock()
	defer db.rw.Unlock()
	return fn()
}

// read runs fn on the tree as of the last write that returned (its view),
// without waiting for a write under way: the nodes the view reaches stay
// as they are until fn returns (see Tree.keepFreed).
func (db *DB) read(fn func(t *Tree, v view) error) error {
	db.rw.RLock()
	defer db.rw.RUnlock()
	if db.closed {
		return fmt.Errorf("%w: %s", ErrClosed, db.dir)
	}
	db.smu.Lock()
	v := db.view
	i, ok := db.readersOf(v.seq)
	if !ok {
		db.readers = slices.Insert(db.readers, i, viewReaders{seq: v.seq})
	}
	db.readers[i].n++
	db.smu.Unlock()
	defer func() {
		db.smu.Lock()
		i, _ := db.readersOf(v.seq)
		if db.readers[i].n--; db.readers[i].n == 0 {
			db.readers = slices.Delete(db.readers, i, i+1)
		}
		db.smu.Unlock()
	}()
	return fn(db.t, v)
}

// grow copies the tree into a new one of the next generation with twice
// the pool and a batch area (MaxBatch) of at least batch keys, makes the
// copy durable and removes the old tree's region
// (RemoveRegion checkpoints first, so the new tree is in its file before
// the old file goes). A crash before the removal leaves both, and
// openDirTree keeps the old one; after it, only the new one is left. On
// an error the new region is removed, if it can be, and the DB keeps its
// tree. The caller holds db.mu.
func (db *DB) grow(batch int) error {
	old := db.t
	if old.g.capacity-1 >= MaxCapacity/2 {
		return fmt.Errorf("%w: the pool of %d nodes cannot grow", ErrFull, old.g.capacity-1)
	}
	o := Options{Order: old.g.order, Capacity: int(2 * (old.g.capacity - 1)),
		MaxBatch: int(old.g.maxBatch), MaxLanes: int(old.g.maxLanes)}
	if batch > o.MaxBatch {
		o.MaxBatch = min(1<<bits.Len(uint(batch-1)), MaxBatchKeys)
		if old.g.maxLanes == old.g.maxBatch {
			o.MaxLanes = o.MaxBatch
		}
	}
	name := genRegion(db.gen + 1)
	remove := func(name string) error {
		return db.exclusive(func() error { return db.m.RemoveRegion(name) })
	}
	if _, err := db.m.OpenRegion(name); err == nil {
		// Left by a growth that failed and could not remove it.
		if err := remove(name); err != nil {
			return fmt.Errorf("btree: grow to generation %d: %w", db.gen+1, err)
		}
	}
	old.dropScratch()
	var nt *Tree
	err := func() error {
		// One durability point per chunk copied, not one for the whole
		// copy: a deferred copy would hold its log record in memory (up
		// to 64 MiB, twice). The copy needs no atomicity of its own: until
		// the old region is removed, a crash keeps the old tree.
		err := db.exclusive(func() error {
			return db.be.Defer(func() error {
				var err error
				nt, err = Create(db.m, name, o)
				return err
			})
		})
		if err != nil {
			return err
		}
		keys := make([]uint64, 0, old.g.maxBatch)
		vals := make([]uint64, 0, old.g.maxBatch)
		put := func() error {
			// Without the node cache: the copy's chunks are disjoint
			// and ascending, so a chunk's planning reads only the
			// right edge, and a cache filled with the copy would hold
			// the old and new trees' caches at once for nothing.
			err := db.be.Defer(func() error { return nt.insertHostCached(keys, vals) })
			keys, vals = keys[:0], vals[:0]
			return err
		}
		var perr error
		err = old.ScanErr(0, math.MaxUint64, func(k, v uint64) bool {
			keys, vals = append(keys, k), append(vals, v)
			if len(keys) == cap(keys) {
				perr = put()
			}
			return perr == nil
		})
		if err = cmp.Or(err, perr); err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := put(); err != nil {
				return err
			}
		}
		if nt.Len() != old.Len() {
			return fmt.Errorf("%w: growth copied %d of %d keys", ErrCorrupt, nt.Len(), old.Len())
		}
		return nil
	}()
	if err == nil {
		// Reads of the old tree finish first; later ones read the new.
		err = db.exclusive(func() error {
			if err := db.m.RemoveRegion(genRegion(db.gen)); err != nil {
				return err
			}
			nt.keepFreed()
			nt.noAtomic = old.noAtomic
			// The copy's scratch is sized for its chunks of the
			// largest batch; the DB's batches start their own.
			nt.dropScratch()
			db.t, db.gen = nt, db.gen+1
			db.maxBatch.Store(int64(nt.g.maxBatch))
			db.setView()
			return nil
		})
		if err == nil {
			return nil
		}
	}
	if nt != nil {
		_ = remove(name)
	}
	return fmt.Errorf("btree: grow to generation %d: %w", db.gen+1, err)
}

// use returns the open tree, or ErrClosed; the caller holds db.mu.
func (db *DB) use() (*Tree, error) {
	if db.closed {
		return nil, fmt.Errorf("%w: %s", ErrClosed, db.dir)
	}
	return db.t, nil
}

// Put sets key to val. It is durable when Put returns nil (a batch of
// one key, or of the puts committed with it, committed by one aligned
// store after the nodes it wrote; in log mode, one sync of the persist
// log shared by the group). Like PutBatch, it runs the
// batch on the host: the insert kernel's writes, byte for byte, in an
// order its barriers allow, so recovery finishes a cut batch with the
// kernel (see Tree.InsertBatch). In log mode a batch of up to 64 MiB of
// writes is instead one atomic record of the persist log, which a crash
// keeps whole or not at all, and it issues only the writes the tree needs
// (nodes, leaf chain, commit).
func (db *DB) Put(key, val uint64) error {
	return db.put([]uint64{key}, []uint64{val})
}

// PutBatch sets keys[i] to vals[i] for every i, atomically (the last value
// of a repeated key wins); the whole batch is durable when PutBatch
// returns nil (in log mode, one sync of the persist log), and a crash
// before leaves either all of it or none. A batch may hold up to
// MaxBatchKeys keys (ErrBadArg beyond); one of more keys than the tree's
// batch area (DirOptions.MaxBatch) first moves the tree to a generation
// whose area holds it, as a growth does, and then commits as one tree
// batch. A write that needs more free nodes than the pool has grows the
// tree first (see DB's Growth). In log mode, a batch that fails after it
// began writing (a corrupt node found on the way) fails the backend: every
// later call errors, and reopening the directory gives the tree before
// the batch.
func (db *DB) PutBatch(keys, vals []uint64) error {
	return db.put(keys, vals)
}

// put commits keys and vals in a group with the puts that wait beside it
// (see DB's Concurrency) and returns when its group is durable or failed.
// The put that finds no leader leads: it commits group after group until
// the queue is empty, its own among them, so under a steady stream of
// puts it may commit others' for a while before it returns.
func (db *DB) put(keys, vals []uint64) error {
	if len(keys) != len(vals) {
		return fmt.Errorf("%w: %d keys and %d values", ErrBadArg, len(keys), len(vals))
	}
	if len(keys) > MaxBatchKeys {
		return fmt.Errorf("%w: batch of %d keys (at most %d)", ErrBadArg, len(keys), MaxBatchKeys)
	}
	r := &putReq{keys: keys, vals: vals, done: make(chan struct{})}
	db.qmu.Lock()
	db.queue = append(db.queue, r)
	if db.leading {
		db.qmu.Unlock()
		<-r.done
		return r.err
	}
	db.leading = true
	db.qmu.Unlock()
	for {
		db.qmu.Lock()
		if len(db.queue) == 0 {
			db.leading = false
			db.qmu.Unlock()
			return r.err
		}
		group := db.takeGroup(int(db.maxBatch.Load()))
		db.qmu.Unlock()
		db.commitGroup(group)
	}
}

// takeGroup removes the longest prefix of the queue whose keys fit one
// batch of at most limit keys (at least one put); the caller holds db.qmu.
func (db *DB) takeGroup(limit int) []*putReq {
	n, keys := 0, 0
	for n < len(db.queue) && (n == 0 || keys+len(db.queue[n].keys) <= limit) {
		keys += len(db.queue[n].keys)
		n++
	}
	group := slices.Clone(db.queue[:n])
	db.queue = slices.Delete(db.queue, 0, n)
	return group
}

// commitGroup writes the puts of group as one batch, in order, and hands
// each its result.
func (db *DB) commitGroup(group []*putReq) {
	keys, vals := group[0].keys, group[0].vals
	if len(group) > 1 {
		keys, vals = nil, nil
		for _, r := range group {
			keys, vals = append(keys, r.keys...), append(vals, r.vals...)
		}
	}
	db.mu.Lock()
	err := db.write(len(keys), func(t *Tree) error { return t.insertHost(keys, vals) })
	db.mu.Unlock()
	for _, r := range group {
		r.err = err
		close(r.done)
	}
}

// Get returns the value of key and whether the DB holds it, as of the last
// write that returned (durable). It does not wait for a write under way.
func (db *DB) Get(key uint64) (val uint64, found bool, err error) {
	err = db.read(func(t *Tree, v view) error {
		val, found, err = t.getView(v, key)
		return err
	})
	return val, found, err
}

// GetBatch returns each key's value and whether the DB holds it, all as
// of one write (the last that returned; durable), looked up on the host
// one key after another. Keys may repeat. It does not wait for a write
// under way.
func (db *DB) GetBatch(keys []uint64) (vals []uint64, found []bool, err error) {
	err = db.read(func(t *Tree, v view) error {
		vals, found = make([]uint64, len(keys)), make([]bool, len(keys))
		for i, k := range keys {
			var err error
			if vals[i], found[i], err = t.getView(v, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return vals, found, nil
}

// Delete removes key and reports whether the DB held it. The removal is
// durable when Delete returns true and nil (in log mode, one sync of the
// persist log); a key that is not there writes nothing.
func (db *DB) Delete(key uint64) (bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	found := false
	err := db.write(0, func(t *Tree) error {
		var err error
		found, err = t.Delete(key)
		return err
	})
	return found, err
}

// Scan calls fn for the keys in [lo, hi] in ascending order with their
// values, until fn returns false, all as of one write (the last that
// returned when Scan began; durable), even while later writes go on. It
// returns the error of a read that failed, which ended the scan early. fn
// must not call the DB: a growth of the tree waits for the scan to end,
// and a write waiting for it would wait forever.
func (db *DB) Scan(lo, hi uint64, fn func(key, val uint64) bool) error {
	return db.read(func(t *Tree, v view) error { return t.scanView(v, lo, hi, fn) })
}

// Len returns the number of keys, as of the last write that returned.
func (db *DB) Len() (int, error) {
	n := 0
	err := db.read(func(_ *Tree, v view) error {
		n = int(v.count)
		return nil
	})
	return n, err
}

// Check verifies the stored tree (see Tree.Check); it writes nothing.
func (db *DB) Check() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.use()
	if err != nil {
		return err
	}
	return t.Check()
}

// Stats returns the counts of the DB's backend since OpenDir: in log mode,
// Syncs is the fdatasyncs of the persist log and SyncBytes the bytes
// logged (see native.Stats). They stay readable after Close.
func (db *DB) Stats() native.Stats {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.be.Stats()
}

// Dir returns the directory the DB is stored in.
func (db *DB) Dir() string { return db.dir }

// Close makes every write durable (they already are when they returned),
// writes the checkpoint of the stored files and releases the directory.
// It returns the I/O error of the backend, if any. Every later call on
// the DB returns an error wrapping ErrClosed; a second Close returns nil.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.rw.Lock() // reads under way finish first
	defer db.rw.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	db.t = nil
	if err := db.be.Close(); err != nil {
		return fmt.Errorf("btree: close %s: %w", db.dir, err)
	}
	return nil
}
