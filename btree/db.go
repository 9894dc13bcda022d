//go:build unix

package btree

import (
	"errors"
	"fmt"
	"sync"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// ErrClosed: the DB was closed; every later call on it returns an error
// wrapping ErrClosed.
var ErrClosed = errors.New("btree: db closed")

// DefaultDirCapacity is the node pool of a tree OpenDir creates with
// DirOptions.Capacity 0: 65,536 nodes of 256 bytes (16 MiB of file and of
// memory), room for about 500,000 random keys (560,000 written in batches
// of 4,096, 620,000 by single Puts, in a test).
const DefaultDirCapacity = 1 << 16

// dbRegion is the name of the PM region (the file btree.pmr) that holds
// the tree of a DB.
const dbRegion = "btree"

// DirOptions configure OpenDir. A nil *DirOptions, like the zero value,
// means every default.
type DirOptions struct {
	// Capacity is the node pool of a new tree, in nodes (256 bytes each
	// at the default order); 0 means DefaultDirCapacity. The pool is
	// allocated in full when the tree is created (file and memory) and
	// does not grow: a write that needs more nodes fails with ErrFull.
	// A tree that exists keeps the capacity it was created with.
	Capacity int
	// MaxBatch is the most keys of one PutBatch of a new tree (0: 4096).
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
// A DB is safe for concurrent use by several goroutines: its calls are
// serialised (one at a time), reads included. Scan's fn runs while the DB
// is held, so it must not call the DB.
type DB struct {
	mu     sync.Mutex
	be     *native.Backend
	t      *Tree
	dir    string
	closed bool
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
	be, err := native.Open(dir, native.Options{Mode: o.Mode, Create: !o.NoCreate})
	if err != nil {
		return nil, fmt.Errorf("btree: open %s: %w", dir, err)
	}
	t, err := openDirTree(be, o)
	if err != nil {
		_ = be.Close()
		return nil, fmt.Errorf("btree: open %s: %w", dir, err)
	}
	return &DB{be: be, t: t, dir: dir}, nil
}

// openDirTree opens the tree on be, or creates it. A creation that a crash
// interrupted before Create returned (never acknowledged: no commit word,
// no node but the first root) is started again.
func openDirTree(be *native.Backend, o DirOptions) (*Tree, error) {
	m, err := pm.NewMachine(be)
	if err != nil {
		return nil, err
	}
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
func (db *DB) write(fn func(t *Tree) error) error {
	t, err := db.use()
	if err != nil {
		return err
	}
	return db.be.Defer(func() error { return fn(t) })
}

// use returns the open tree, or ErrClosed; the caller holds db.mu.
func (db *DB) use() (*Tree, error) {
	if db.closed {
		return nil, fmt.Errorf("%w: %s", ErrClosed, db.dir)
	}
	return db.t, nil
}

// Put sets key to val. It is durable when Put returns nil (one batch of
// one key, committed by one aligned store after the nodes it wrote; in
// log mode, one sync of the persist log). Like PutBatch, it runs the
// batch on the host: the insert kernel's writes, byte for byte, in an
// order its barriers allow, so recovery finishes a cut batch with the
// kernel (see Tree.InsertBatch).
func (db *DB) Put(key, val uint64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.write(func(t *Tree) error { return t.insertHost([]uint64{key}, []uint64{val}) })
}

// PutBatch sets keys[i] to vals[i] for every i, atomically (the last value
// of a repeated key wins); the whole batch is durable when PutBatch
// returns nil (in log mode, one sync of the persist log), and a crash
// before leaves either all of it or none. A batch
// holds at most DirOptions.MaxBatch keys (ErrBadArg beyond).
func (db *DB) PutBatch(keys, vals []uint64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.write(func(t *Tree) error {
		return t.insertHost(keys, vals)
	})
}

// Get returns the value of key and whether the DB holds it, as of the last
// write that returned; what it returns is durable.
func (db *DB) Get(key uint64) (uint64, bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.use()
	if err != nil {
		return 0, false, err
	}
	return t.Get(key)
}

// GetBatch looks the keys up together (one parallel lookup kernel, one
// thread per key) and returns each key's value and whether the DB holds
// it, as Get would; what it returns is durable.
func (db *DB) GetBatch(keys []uint64) (vals []uint64, found []bool, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.use()
	if err != nil {
		return nil, nil, err
	}
	return t.GetBatch(keys)
}

// Delete removes key and reports whether the DB held it. The removal is
// durable when Delete returns true and nil (in log mode, one sync of the
// persist log); a key that is not there writes nothing.
func (db *DB) Delete(key uint64) (bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	found := false
	err := db.write(func(t *Tree) error {
		var err error
		found, err = t.Delete(key)
		return err
	})
	return found, err
}

// Scan calls fn for the keys in [lo, hi] in ascending order with their
// values, until fn returns false, as of the last write that returned
// (durable). It returns the error of a read that failed, which ended the
// scan early; fn must not call the DB (it runs while the DB is held).
func (db *DB) Scan(lo, hi uint64, fn func(key, val uint64) bool) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.use()
	if err != nil {
		return err
	}
	return t.ScanErr(lo, hi, fn)
}

// Len returns the number of keys, as of the last write that returned.
func (db *DB) Len() (int, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, err := db.use()
	if err != nil {
		return 0, err
	}
	return t.Len(), nil
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
