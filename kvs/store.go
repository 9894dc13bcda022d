package kvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

// Config describes a new store.
type Config struct {
	// Name is the table's PM region; the undo log is the region
	// Name+".log". Default "gpkvs".
	Name string
	// Buckets is the number of 128-byte buckets (at least 2).
	Buckets int
	// MaxBatch is the most requests of one batch: the batch grid has
	// MaxBatch threads rounded up to whole blocks, and the log is sized
	// for one entry per thread.
	MaxBatch int
	// BlockThreads is the threads per block of the batch kernels (1..1024,
	// default 256).
	BlockThreads int
	// Log selects the undo log (default LogHCL).
	Log LogKind
	// ConvParts is the number of partitions of a conventional log (default:
	// one per block of the batch grid). Ignored for HCL.
	ConvParts int
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "gpkvs"
	}
	if c.BlockThreads == 0 {
		c.BlockThreads = 256
	}
	if c.Log == 0 {
		c.Log = LogHCL
	}
	if c.ConvParts == 0 && c.BlockThreads > 0 && c.MaxBatch > 0 {
		c.ConvParts = (c.MaxBatch + c.BlockThreads - 1) / c.BlockThreads
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Buckets < 2 || c.Buckets > MaxBuckets:
		return fmt.Errorf("%w: %d buckets (want 2..%d)", ErrBadArg, c.Buckets, MaxBuckets)
	case c.MaxBatch < 1 || c.MaxBatch > MaxBatch:
		return fmt.Errorf("%w: batch of %d (want 1..%d)", ErrBadArg, c.MaxBatch, MaxBatch)
	case c.BlockThreads < 1 || c.BlockThreads > 1024:
		return fmt.Errorf("%w: %d threads per block (want 1..1024)", ErrBadArg, c.BlockThreads)
	case c.Log != LogHCL && c.Log != LogConv:
		return fmt.Errorf("%w: log kind %d", ErrBadArg, c.Log)
	case c.Log == LogConv && (c.ConvParts < 1 || c.ConvParts > txn.MaxParts):
		return fmt.Errorf("%w: %d conventional log partitions (want 1..%d)", ErrBadArg, c.ConvParts, txn.MaxParts)
	}
	return nil
}

// Option changes how a store's kernels run.
type Option func(*Store)

// WithoutOFence removes the OFence between logging a way and updating it in
// place. The result is not crash-consistent: it is the seeded bug the crash
// checker must find (a persistency bug by omission).
func WithoutOFence() Option { return func(s *Store) { s.skipOFence = true } }

// Store is an open gpKVS table on a machine.
type Store struct {
	// mu serialises the calls that use the machine or the store's state
	// (see the package doc's concurrency note); the accessors of what
	// Create or Open fixed (Name, Buckets, MaxBatch, LogKind, Log, Table,
	// CommitAddr) take no lock.
	mu         sync.Mutex
	m          *pm.Machine
	h          header
	name       string
	table      pm.Range
	log        txn.Log
	hcl        *txn.HCL
	conv       *txn.ConvLog
	masks      pm.Addr // device memory: per bucket, a bit per occupied way
	reqs       pm.Addr // device memory: 16 bytes per request
	out        pm.Addr // device memory: 16 bytes per request
	ready      bool    // no uncommitted batch and no leftover log entries
	failed     error   // why the last failed batch left the store not ready
	closed     bool
	skipOFence bool
	host       bool                // HostBatches
	seen       map[uint32]struct{} // checkKeys' set, kept between batches
	hb         hostBatch           // a host batch's buffers, kept for the next
}

// BatchResult is the outcome of a SET or DELETE batch.
type BatchResult struct {
	// Seq is the batch's number in the store's history.
	Seq uint64
	// Inserted, Updated, Deleted and Missing count the requests by
	// outcome (Missing: a DELETE of an absent key).
	Inserted, Updated, Deleted, Missing int
	// Full lists the keys of a SET batch that were not inserted because
	// both their buckets were full.
	Full []uint32
	// Cycles is the simulated cycles of the batch's four launches and
	// KernelCycles those of the batch kernel alone (0 on an untimed
	// backend, and for host batches).
	Cycles, KernelCycles uint64
}

// RecoverResult is the outcome of Recover.
type RecoverResult struct {
	// Active reports that a batch had not committed; Seq is its number.
	Active bool
	Seq    uint64
	// Restored is the number of ways restored from the log.
	Restored int
	// Cycles is the simulated cycles of the recovery launches.
	Cycles uint64
}

// Create makes a new empty store on m: the table region, its undo log and
// the volatile buffers of the batch kernels. The empty store is durable
// when it returns.
func Create(m *pm.Machine, cfg Config, opts ...Option) (*Store, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil machine", ErrBadArg)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := options(opts)
	if err := o.checkOptions(cfg.Log); err != nil {
		return nil, err
	}
	h := header{buckets: uint64(cfg.Buckets), batch: uint64(cfg.MaxBatch), block: uint64(cfg.BlockThreads),
		convParts: uint64(cfg.ConvParts), log: cfg.Log}
	logName := cfg.Name + ".log"
	if _, err := m.OpenRegion(logName); err == nil {
		return nil, fmt.Errorf("%w: %q", pm.ErrRegionExists, logName)
	}
	table, err := m.CreateRegion(cfg.Name, tableSize(h.buckets))
	if err != nil {
		return nil, err
	}
	if err := m.CopyIn(table.Base, h.encode()); err != nil {
		return nil, err
	}
	s := &Store{m: m, h: h, name: cfg.Name, table: table}
	if h.log == LogHCL {
		s.hcl, err = txn.CreateHCL(m, logName, s.batchGrid(int(h.batch)).Blocks, int(h.block), entryBytes+8)
		s.log = s.hcl
	} else {
		per := (h.batch + h.convParts - 1) / h.convParts
		s.conv, err = txn.CreateConv(m, logName, int(h.convParts), per*(entryBytes+4+8))
		s.log = s.conv
	}
	if err != nil {
		return nil, err
	}
	if err := s.alloc(); err != nil {
		return nil, err
	}
	s.skipOFence, s.host = o.skipOFence, o.host
	s.ready = true
	return s, nil
}

// Open opens the store whose table region is name on m (a machine reopened
// after a crash, typically). If a batch did not commit, or the log holds
// entries, the store needs Recover before its next batch.
func Open(m *pm.Machine, name string, opts ...Option) (*Store, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil machine", ErrBadArg)
	}
	table, err := m.OpenRegion(name)
	if err != nil {
		return nil, err
	}
	hb := make([]byte, BucketBytes)
	if table.Size < bucketOff {
		return nil, fmt.Errorf("%w: region %q of %d bytes", ErrCorrupt, name, table.Size)
	}
	if err := m.CopyOut(table.Base, hb); err != nil {
		return nil, err
	}
	h, err := decodeHeader(hb)
	if err != nil {
		return nil, fmt.Errorf("region %q: %w", name, err)
	}
	if table.Size != tableSize(h.buckets) {
		return nil, fmt.Errorf("%w: region %q has %d bytes, its header wants %d", ErrCorrupt, name, table.Size, tableSize(h.buckets))
	}
	o := options(opts)
	if err := o.checkOptions(h.log); err != nil {
		return nil, err
	}
	s := &Store{m: m, h: h, name: name, table: table, skipOFence: o.skipOFence, host: o.host}
	logName := name + ".log"
	if h.log == LogHCL {
		s.hcl, err = txn.OpenHCL(m, logName)
		if err == nil {
			if b, t := s.hcl.Geometry(); b != s.batchGrid(int(h.batch)).Blocks || t != int(h.block) {
				err = fmt.Errorf("%w: log %q is for %d blocks of %d threads", ErrCorrupt, logName, b, t)
			}
		}
		s.log = s.hcl
	} else {
		s.conv, err = txn.OpenConv(m, logName)
		if err == nil && s.conv.Parts() != int(h.convParts) {
			err = fmt.Errorf("%w: log %q has %d partitions, want %d", ErrCorrupt, logName, s.conv.Parts(), h.convParts)
		}
		s.log = s.conv
	}
	if err != nil {
		return nil, err
	}
	if err := s.alloc(); err != nil {
		return nil, err
	}
	if err := s.rebuildMasks(); err != nil {
		return nil, err
	}
	s.ready, err = s.clean()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// options returns the settings opts make.
func options(opts []Option) *Store {
	var o Store
	for _, f := range opts {
		f(&o)
	}
	return &o
}

// checkOptions refuses settings a store with log kind k cannot take.
func (o *Store) checkOptions(k LogKind) error {
	if o.host && k != LogHCL {
		return fmt.Errorf("%w: host batches need an HCL log, the store's is %v", ErrBadArg, k)
	}
	return nil
}

func (s *Store) alloc() error {
	var err error
	if s.masks, err = s.m.Alloc(pm.DeviceMem, 4*s.h.buckets); err != nil {
		return err
	}
	if s.reqs, err = s.m.Alloc(pm.DeviceMem, 16*s.h.batch); err != nil {
		return err
	}
	s.out, err = s.m.Alloc(pm.DeviceMem, 16*s.h.batch)
	return err
}

// Close frees the store's volatile buffers; the handle is unusable after:
// its operations, and a second Close, return an error wrapping ErrClosed.
// Every committed batch is already durable; Close writes nothing to PM.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closedErr()
	}
	s.closed = true
	errs := []error{s.m.Free(s.masks), s.m.Free(s.reqs), s.m.Free(s.out)}
	if s.conv != nil {
		errs = append(errs, s.conv.Close(s.m))
	}
	return errors.Join(errs...)
}

// Name returns the table's region name.
func (s *Store) Name() string { return s.name }

// Buckets returns the number of buckets.
func (s *Store) Buckets() int { return int(s.h.buckets) }

// MaxBatch returns the most requests of one batch.
func (s *Store) MaxBatch() int { return int(s.h.batch) }

// LogKind returns the store's undo log.
func (s *Store) LogKind() LogKind { return s.h.log }

// Log returns the store's undo log.
func (s *Store) Log() txn.Log { return s.log }

// Table returns the table's PM region.
func (s *Store) Table() pm.Range { return s.table }

func (s *Store) closedErr() error { return fmt.Errorf("%w: %q", ErrClosed, s.name) }

// usable returns why the store cannot take an operation now: it was
// closed, or a batch is unfinished (ErrNeedsRecovery, wrapping the error
// of this handle's batch that failed part-way, if one did).
func (s *Store) usable() error {
	switch {
	case s.closed:
		return s.closedErr()
	case s.ready:
		return nil
	case s.failed != nil:
		return fmt.Errorf("%w: a batch failed part-way: %w", ErrNeedsRecovery, s.failed)
	}
	return ErrNeedsRecovery
}

// abandon records that a batch stopped on err. The store still takes
// batches if the batch left the visible image clean (it failed before its
// first kernel changed anything, as when the backend was closed, or after
// its truncation); otherwise only Recover can continue, and the next
// operations report err with ErrNeedsRecovery.
func (s *Store) abandon(err error) {
	ok, cerr := s.clean()
	s.ready = cerr == nil && ok
	s.failed = nil
	if !s.ready {
		s.failed = err
	}
}

// NeedsRecovery reports whether Recover must run before the next batch.
func (s *Store) NeedsRecovery() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ready
}

// batchGrid is the grid of a batch of n requests, one thread per request:
// whole blocks, or for a batch that fits one block, that block cut to the
// whole warps the batch needs. Thread i has the same block, warp and lane
// either way, so it owns the same HCL slot.
func (s *Store) batchGrid(n int) scope.Grid {
	bt := int(s.h.block)
	if n <= bt {
		return scope.Grid{Blocks: 1, Threads: min(bt, roundWarps(n))}
	}
	return scope.Grid{Blocks: (n + bt - 1) / bt, Threads: bt}
}

// roundWarps rounds n up to whole warps.
func roundWarps(n int) int { return (n + txn.Lanes - 1) / txn.Lanes * txn.Lanes }

// usedParts returns the grid of a kernel with one thread per log partition
// that a batch of n requests may have written (thread p serves partition
// p), and whether partition p is one of them. For HCL, batch thread i
// writes slot (i/b)·w + i%b, where b is the threads per block and w is b
// rounded up to whole warps: the grid is the batch grid with whole warps,
// and a thread past its block's b threads or past request n has no slot
// of the batch; a batch that fits one block wrote block 0's first n
// slots. For a conventional log, thread i writes partition i mod P:
// the first min(n, P) partitions. At n = MaxBatch with blocks of whole
// warps and whole blocks, or with at least P requests, this is partGrid
// and every partition.
func (s *Store) usedParts(n int) (scope.Grid, func(p int) bool) {
	if s.hcl != nil {
		bt := int(s.h.block)
		if n <= bt {
			// Block 0's first n slots.
			return scope.Grid{Blocks: 1, Threads: roundWarps(n)}, func(p int) bool { return p < n }
		}
		g := s.batchGrid(n)
		g.Threads = roundWarps(bt)
		return g, func(p int) bool {
			blk, in := p/g.Threads, p%g.Threads
			return in < bt && blk*bt+in < n
		}
	}
	u := min(n, s.conv.Parts())
	t := min(u, 256)
	return scope.Grid{Blocks: (u + t - 1) / t, Threads: t}, func(p int) bool { return p < u }
}

// partGrid is the grid of the kernels with one thread per log partition:
// for HCL, the batch grid with whole warps, so thread i owns slot i.
func (s *Store) partGrid() scope.Grid {
	if s.hcl != nil {
		b, t := s.hcl.Geometry()
		return scope.Grid{Blocks: b, Threads: roundWarps(t)}
	}
	p := s.conv.Parts()
	t := min(p, 256)
	return scope.Grid{Blocks: (p + t - 1) / t, Threads: t}
}

func (s *Store) flag() (uint64, error) {
	return s.m.Memory().Load(s.flagAddr(), 8)
}

// clean reports whether the flag is not active and the log is empty.
func (s *Store) clean() (bool, error) {
	w, err := s.flag()
	if err != nil || flagActive(w) {
		return false, err
	}
	h := txn.Host(s.m)
	for p := range s.log.Parts() {
		n, err := s.log.Size(h, p)
		if err != nil {
			return false, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if n != 0 {
			return false, nil
		}
	}
	return true, nil
}

// rebuildMasks recomputes the volatile occupancy masks from the table.
func (s *Store) rebuildMasks() error {
	const chunk = 8192
	buf := make([]byte, chunk*BucketBytes)
	mb := make([]byte, 4*chunk)
	for b0 := uint64(0); b0 < s.h.buckets; b0 += chunk {
		n := min(chunk, s.h.buckets-b0)
		if err := s.m.CopyOut(s.bucketAddr(b0), buf[:n*BucketBytes]); err != nil {
			return err
		}
		for i := range n {
			var mask uint32
			for w := range Ways {
				if binary.LittleEndian.Uint32(buf[i*BucketBytes+sigOff+4*uint64(w):]) != 0 {
					mask |= 1 << w
				}
			}
			binary.LittleEndian.PutUint32(mb[4*i:], mask)
		}
		if err := s.m.CopyIn(s.masks.Add(4*b0), mb[:4*n]); err != nil {
			return err
		}
	}
	return nil
}

// deferrer is a backend that can defer its durability points to the end
// of a function while keeping their order (pm/native's Backend.Defer: in
// log mode, one sync at the end instead of one per launch).
type deferrer interface {
	Defer(fn func() error) error
}

// deferred runs fn, a batch's launches, with their durability points
// deferred to its end where the backend can (see deferrer). The batch's
// protocol needs only the order of its persists (a crash that keeps a
// prefix of them recovers as if each launch had been durable), so a batch
// costs one durability point, not one per launch.
func (s *Store) deferred(fn func() error) error {
	if d, ok := pm.As[deferrer](s.m.Backend()); ok {
		return d.Defer(fn)
	}
	return fn()
}

func (s *Store) launch(name string, g scope.Grid, k scope.Kernel) (uint64, error) {
	res, err := scope.Launch(s.m, g, k, scope.WithName(name))
	if err != nil {
		return 0, fmt.Errorf("kvs: %s kernel: %w", name, err)
	}
	return res.Stats.Cycles, nil
}

// stage checks a batch's keys and copies the requests to device memory
// (host batches need no copy). A write batch's keys must be distinct (see
// the package doc); a read batch may repeat a key.
func (s *Store) stage(keys []uint32, vals []uint64, distinct bool) error {
	if err := s.checkKeys(keys, vals, distinct); err != nil || s.host {
		return err
	}
	buf := make([]byte, 16*len(keys))
	for i, k := range keys {
		binary.LittleEndian.PutUint32(buf[16*i:], k)
		if vals != nil {
			binary.LittleEndian.PutUint64(buf[16*i+8:], vals[i])
		}
	}
	if err := s.m.CopyIn(s.reqs, buf); err != nil {
		return err
	}
	return s.m.CopyIn(s.out, make([]byte, 16*len(keys)))
}

// checkKeys checks a batch's keys (and values).
func (s *Store) checkKeys(keys []uint32, vals []uint64, distinct bool) error {
	if len(keys) == 0 || len(keys) > int(s.h.batch) {
		return fmt.Errorf("%w: batch of %d keys (want 1..%d)", ErrBadArg, len(keys), s.h.batch)
	}
	if vals != nil && len(vals) != len(keys) {
		return fmt.Errorf("%w: %d keys but %d values", ErrBadArg, len(keys), len(vals))
	}
	// The set of keys seen is the store's, emptied for each batch.
	seen := s.seen
	if distinct {
		if seen == nil {
			s.seen = make(map[uint32]struct{}, len(keys))
			seen = s.seen
		}
		clear(seen)
	}
	for _, k := range keys {
		if k == 0 {
			return fmt.Errorf("%w: key 0 (keys are 1..%d)", ErrBadArg, uint32(1<<32-1))
		}
		if distinct {
			if _, dup := seen[k]; dup {
				return fmt.Errorf("%w: key %d twice in one write batch", ErrBadArg, k)
			}
			seen[k] = struct{}{}
		}
	}
	return nil
}

// SetBatch inserts or updates keys[i] with vals[i], one GPU thread per
// request (or on the host, with HostBatches), as one crash-atomic batch. Keys must be distinct and nonzero. If
// some new keys found both their buckets full, the others are still
// committed and the error wraps ErrFull; the result lists those keys.
func (s *Store) SetBatch(keys []uint32, vals []uint64) (BatchResult, error) {
	if vals == nil {
		return BatchResult{}, fmt.Errorf("%w: nil values", ErrBadArg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batch(opSet, keys, vals)
}

// DeleteBatch removes keys (absent ones are counted as Missing), as one
// crash-atomic batch. Keys must be distinct and nonzero.
func (s *Store) DeleteBatch(keys []uint32) (BatchResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batch(opDelete, keys, nil)
}

func (s *Store) batch(op opKind, keys []uint32, vals []uint64) (BatchResult, error) {
	if err := s.usable(); err != nil {
		return BatchResult{}, err
	}
	if err := s.stage(keys, vals, true); err != nil {
		return BatchResult{}, err
	}
	w, err := s.flag()
	if err != nil {
		return BatchResult{}, err
	}
	res := BatchResult{Seq: flagSeq(w) + 1}
	if s.host {
		status, err := s.hostRun(op, keys, vals, res.Seq)
		if err != nil {
			s.abandon(err)
			return res, err
		}
		return res, res.count(keys, status)
	}
	var kerr kernelErr
	// The log was empty before the batch (ready), so only the partitions
	// the batch's threads wrote can hold entries: truncate those.
	tg, used := s.usedParts(len(keys))
	steps := []struct {
		name string
		g    scope.Grid
		k    scope.Kernel
	}{
		{"gpkvs-begin", scope.Grid{Blocks: 1, Threads: 1}, s.flagKernel(res.Seq, true)},
		{"gpkvs-" + op.String(), s.batchGrid(len(keys)), s.batchKernel(op, len(keys), &kerr)},
		{"gpkvs-commit", scope.Grid{Blocks: 1, Threads: 1}, s.flagKernel(res.Seq, false)},
		{"gpkvs-truncate", tg, s.truncateKernel(used, &kerr)},
	}
	err = s.deferred(func() error {
		for i, st := range steps {
			c, err := s.launch(st.name, st.g, st.k)
			if err != nil {
				return err
			}
			res.Cycles += c
			if i == 1 {
				res.KernelCycles = c
			}
		}
		return nil
	})
	if err != nil {
		// The machine may be mid-batch, or the batch not durable:
		// unless nothing visible changed, only a recovery can continue.
		s.abandon(err)
		return res, err
	}
	if kerr.err != nil {
		s.ready, s.failed = false, kerr.err
		return res, kerr.err
	}
	out := make([]byte, 16*len(keys))
	if err := s.m.CopyOut(s.out, out); err != nil {
		return res, err
	}
	status := make([]uint32, len(keys))
	for i := range keys {
		status[i] = binary.LittleEndian.Uint32(out[16*i:])
	}
	return res, res.count(keys, status)
}

// count adds the requests' statuses to res; it returns an error wrapping
// ErrFull if some new keys found no free way.
func (res *BatchResult) count(keys []uint32, status []uint32) error {
	for i, k := range keys {
		switch status[i] {
		case stInserted:
			res.Inserted++
		case stUpdated:
			res.Updated++
		case stDeleted:
			res.Deleted++
		case stMissing:
			res.Missing++
		case stFull:
			res.Full = append(res.Full, k)
		default:
			return fmt.Errorf("%w: request %d (key %d) has no status", ErrKernel, i, k)
		}
	}
	if len(res.Full) > 0 {
		return fmt.Errorf("%w: %d of %d new keys found both buckets full", ErrFull, len(res.Full), len(keys))
	}
	return nil
}

// GetBatch looks keys up, one GPU thread per request (or on the host,
// with HostBatches), and returns each key's value and whether it was
// found. A key may appear more than once: each request reads the table
// independently, so every copy gets the same answer. Keys must be nonzero.
func (s *Store) GetBatch(keys []uint32) (vals []uint64, found []bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, nil, err
	}
	if err := s.stage(keys, nil, false); err != nil {
		return nil, nil, err
	}
	if s.host {
		vals, found = make([]uint64, len(keys)), make([]bool, len(keys))
		for i, k := range keys {
			if vals[i], found[i], err = s.lookup(k); err != nil {
				return nil, nil, err
			}
		}
		return vals, found, nil
	}
	if _, err := s.launch("gpkvs-get", s.batchGrid(len(keys)), s.getKernel(len(keys))); err != nil {
		return nil, nil, err
	}
	out := make([]byte, 16*len(keys))
	if err := s.m.CopyOut(s.out, out); err != nil {
		return nil, nil, err
	}
	vals, found = make([]uint64, len(keys)), make([]bool, len(keys))
	for i := range keys {
		found[i] = binary.LittleEndian.Uint32(out[16*i:]) == stFound
		vals[i] = binary.LittleEndian.Uint64(out[16*i+8:])
	}
	return vals, found, nil
}

// Put sets one key: a batch of one.
func (s *Store) Put(key uint32, val uint64) error {
	_, err := s.SetBatch([]uint32{key}, []uint64{val})
	return err
}

// Get looks one key up from the host: it reads the key's two candidate
// buckets in the table's visible image with the GET kernel's rules, so it
// answers as GetBatch would, without a kernel launch (and, on a timing
// backend, without simulated time). It reads what committed batches
// wrote; the store is not changed.
func (s *Store) Get(key uint32) (uint64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return 0, false, err
	}
	if key == 0 {
		return 0, false, fmt.Errorf("%w: key 0 (keys are 1..%d)", ErrBadArg, uint32(1<<32-1))
	}
	return s.lookup(key)
}

// lookup is the GET kernel's lookup (find, then the way's value) on the
// host: the first way of bucket b1, then of b2, whose signature is key.
func (s *Store) lookup(key uint32) (uint64, bool, error) {
	var line [BucketBytes]byte
	_, w, ok, err := s.findHost(key, &line)
	if !ok || err != nil {
		return 0, false, err
	}
	return binary.LittleEndian.Uint64(line[valOff+8*w:]), true, nil
}

// Delete removes one key and reports whether it was present.
func (s *Store) Delete(key uint32) (bool, error) {
	r, err := s.DeleteBatch([]uint32{key})
	return r.Deleted == 1, err
}

// Recover brings the store to a committed state after a crash: if the flag
// says a batch was active, a recovery kernel (one thread per log
// partition) restores every logged way, waits for the restores to be
// durable and clears its partition, then the flag is cleared; otherwise
// leftover entries of a committed batch are discarded. It is idempotent.
func (s *Store) Recover() (RecoverResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return RecoverResult{}, s.closedErr()
	}
	w, err := s.flag()
	if err != nil {
		return RecoverResult{}, err
	}
	res := RecoverResult{Active: flagActive(w), Seq: flagSeq(w)}
	var kerr kernelErr
	if res.Active {
		var restored uint64
		c, err := s.launch("gpkvs-recover", s.partGrid(), s.recoverKernel(&restored, &kerr))
		if err != nil {
			return res, err
		}
		res.Cycles += c
		res.Restored = int(restored)
		if kerr.err != nil {
			return res, kerr.err
		}
		c, err = s.launch("gpkvs-recover-flag", scope.Grid{Blocks: 1, Threads: 1}, s.flagKernel(res.Seq, false))
		if err != nil {
			return res, err
		}
		res.Cycles += c
	} else {
		c, err := s.launch("gpkvs-truncate", s.partGrid(), s.truncateKernel(nil, &kerr))
		if err != nil {
			return res, err
		}
		res.Cycles += c
		if kerr.err != nil {
			return res, kerr.err
		}
	}
	if err := s.rebuildMasks(); err != nil {
		return res, err
	}
	s.ready, s.failed = true, nil
	return res, nil
}

// occupancy returns the number of used ways in a mask.
func occupancy(mask uint32) int { return bits.OnesCount32(mask & fullMask) }
