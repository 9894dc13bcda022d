package workloads

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("hm-sbrp", "SBRP's HM in its artifact's shape: each batch rebuilds the bucketed table (undo-logged compaction, append, a per-bucket cuckoo rebuild in shared memory with a block barrier per step), a DFence per thread",
		func(s Size) crash.Workload { return mustWorkload(NewHMRebuild(hmRebuildShape(s), true)) })
	register("hm-sbrp-no-ofence", "hm-sbrp without the OFence between a slot's undo entry and its tag: a tagged entry can hold a stale node",
		func(s Size) crash.Workload { return mustWorkload(NewHMRebuild(hmRebuildShape(s), false)) })
}

// HMRebuildShape sizes an HMRebuild workload.
type HMRebuildShape struct {
	Keys, Batch int // keys inserted, in batches of Batch
	Slots       int // slots per bucket, a multiple of 3 (three cuckoo sub-tables)
	PerBucket   int // the fill a bucket is sized for: buckets = keys/PerBucket + 1
	MaxBuckets  int // the table's capacity in buckets
}

func hmRebuildShape(s Size) HMRebuildShape {
	switch s {
	case Tiny:
		return HMRebuildShape{Keys: 6, Batch: 3, Slots: 6, PerBucket: 3, MaxBuckets: 3}
	case Quick:
		// A fifth of the artifact's: smaller tables (600 keys) put SBRP
		// behind Epoch on PM-far, the opposite of paper scale.
		return HMRebuildShape{Keys: 5000, Batch: 5000, Slots: 576, PerBucket: 309, MaxBuckets: 60}
	}
	// The artifact (parallel_hash_map.cu, main): one insert of 25,000
	// keys into the empty map, so 81 buckets of 576 slots sized for 309
	// keys (at most 300).
	return HMRebuildShape{Keys: 25000, Batch: 25000, Slots: 576, PerBucket: 309, MaxBuckets: 300}
}

// hmRounds is the number of cuckoo rounds of the rebuild (the artifact's).
const hmRounds = 25

// HMRebuild is SBRP's HM (Table 2) in the shape of its artifact: a hash
// map of Slots-slot buckets in PM, key k in bucket k mod buckets, whose
// every batch of inserts rebuilds the table in four kernels:
//
//  1. begin: the old key and bucket counts are logged and the batch marked
//     active (DFence);
//  2. compaction, one thread per slot: the slot's node is undo-logged
//     (entry, OFence, tag, OFence, DFence) and cleared; a second kernel
//     appends the old nodes to their buckets under the new bucket count;
//  3. append: each new key is appended to its bucket;
//  4. rebuild, one block per bucket and one thread per node: the bucket
//     is rebuilt as three cuckoo sub-tables in shared memory, hmRounds
//     rounds of one block barrier per sub-table plus one per round; each
//     thread clears its node's old slot first and writes the node to its
//     place last, then a DFence (a key the rounds cannot place takes the
//     first free cell, where the artifact drops it);
//
// and a commit marks the batch done. As in the artifact, whose run is
// timed whole, a kernel marks the buckets the batch touches before the
// compaction, and after the commit one clears the log's partitions and
// one looks every key of the batch up. Recovery of an active batch restores
// every slot whose undo entry carries the batch's tag and the old counts:
// the table before the batch. (The artifact appends the old nodes in the
// compaction kernel itself, racing with other blocks' clears once the
// bucket count grows; the second kernel removes that race.)
type HMRebuild struct {
	Shape  HMRebuildShape
	OFence bool // false: the seeded bug

	keys   []uint32
	vals   []uint32
	states []map[uint32]uint32 // after each whole number of batches
	hash   [3][2]uint32

	// onFallback, set by tests (export_test.go), is called for each key
	// the cuckoo rounds did not place.
	onFallback func()
}

// NewHMRebuild returns the workload: keys Keys+1..2*Keys (the artifact's
// insertRandomKeys starts its keys after numberOfKeys) with seeded values.
func NewHMRebuild(sh HMRebuildShape, ofence bool) (*HMRebuild, error) {
	if sh.Keys <= 0 || sh.Batch <= 0 || sh.Slots <= 0 || sh.Slots%3 != 0 || sh.PerBucket <= 0 ||
		sh.PerBucket > sh.Slots || sh.Keys/sh.PerBucket+1 > sh.MaxBuckets {
		return nil, fmt.Errorf("%w: hm-sbrp shape %+v", ErrConfig, sh)
	}
	w := &HMRebuild{Shape: sh, OFence: ofence}
	rng := rand.New(rand.NewPCG(0x686d, uint64(sh.Keys)))
	state := map[uint32]uint32{}
	w.states = append(w.states, maps.Clone(state))
	for i := range sh.Keys {
		w.keys = append(w.keys, uint32(sh.Keys+i+1))
		w.vals = append(w.vals, uint32(rng.IntN(100000)))
		state[w.keys[i]] = w.vals[i]
		if (i+1)%sh.Batch == 0 || i+1 == sh.Keys {
			w.states = append(w.states, maps.Clone(state))
		}
	}
	// The artifact's three hash functions, from seed 0.
	a := uint32(0)
	w.hash = [3][2]uint32{
		{(a + 0x7ed55d16) + (a << 12), (a + 0xd3a2646c) ^ (a << 9)},
		{(a ^ 0xc761c23c) ^ (a >> 19), (a + 0xfd7046c5) + (a << 3)},
		{(a + 0x165667b1) + (a << 5), (a ^ 0xb55a4f09) ^ (a >> 16)},
	}
	return w, nil
}

// Name returns "hm-sbrp" or "hm-sbrp-no-ofence".
func (w *HMRebuild) Name() string {
	if w.OFence {
		return "hm-sbrp"
	}
	return "hm-sbrp-no-ofence"
}

// The PM regions and the meta words.
const (
	hmrTable = "hm-sbrp.table" // MaxBuckets*Slots nodes: key | value<<32, key 0 empty
	hmrLog   = "hm-sbrp.log"   // per slot: the logged node, then its tag (generation+1)
	hmrMeta  = "hm-sbrp.meta"  // counts (keys | buckets<<32), active (gen<<1 | 1), old counts
	// hmrHeader is the log's PM-resident metadata (the artifact's gpmlog
	// header): its partition count, one per slot.
	hmrHeader = "hm-sbrp.loghdr"
	// hmrTail holds, per slot, where its log partition ends (the
	// artifact's tail[p]); a slot's tag is its head.
	hmrTail = "hm-sbrp.logtail"
)

type hmrLayout struct {
	table, log, meta, hdr, tail pm.Addr
	slots                       int
}

func (l hmrLayout) tailOf(b, s int) pm.Addr { return l.tail.Add(uint64(8 * (b*l.slots + s))) }

func (l hmrLayout) slot(b, s int) pm.Addr  { return l.table.Add(uint64(8 * (b*l.slots + s))) }
func (l hmrLayout) entry(b, s int) pm.Addr { return l.log.Add(uint64(16 * (b*l.slots + s))) }
func (l hmrLayout) counts() pm.Addr        { return l.meta }
func (l hmrLayout) active() pm.Addr        { return l.meta.Add(8) }
func (l hmrLayout) oldCounts() pm.Addr     { return l.meta.Add(16) }

// Setup creates the regions: an empty table.
func (w *HMRebuild) Setup(m *pm.Machine) error {
	n := uint64(w.Shape.MaxBuckets * w.Shape.Slots)
	if _, err := m.CreateRegion(hmrTable, 8*n); err != nil {
		return err
	}
	if _, err := m.CreateRegion(hmrLog, 16*n); err != nil {
		return err
	}
	if _, err := m.CreateRegion(hmrMeta, 24); err != nil {
		return err
	}
	if err := createWords(m, hmrHeader, n); err != nil {
		return err
	}
	tails := make([]uint64, n)
	for i := range tails {
		tails[i] = 16 * uint64(i+1)
	}
	return createWords(m, hmrTail, tails...)
}

func (w *HMRebuild) layout(m *pm.Machine) (hmrLayout, error) {
	b, err := openRegions(m, hmrTable, hmrLog, hmrMeta, hmrHeader, hmrTail)
	if err != nil {
		return hmrLayout{}, err
	}
	return hmrLayout{table: b[0], log: b[1], meta: b[2], hdr: b[3], tail: b[4], slots: w.Shape.Slots}, nil
}

// buckets returns the bucket count for n keys.
func (w *HMRebuild) buckets(n int) int { return n/w.Shape.PerBucket + 1 }

// Run inserts the batches.
func (w *HMRebuild) Run(m *pm.Machine) error {
	l, err := w.layout(m)
	if err != nil {
		return err
	}
	for gen, lo := 0, 0; lo < len(w.keys); gen, lo = gen+1, lo+w.Shape.Batch {
		if err := w.batch(m, l, gen, lo, min(lo+w.Shape.Batch, len(w.keys))); err != nil {
			return fmt.Errorf("hm-sbrp batch %d: %w", gen, err)
		}
	}
	return nil
}

// batch inserts keys[lo:hi] as generation gen.
func (w *HMRebuild) batch(m *pm.Machine, l hmrLayout, gen, lo, hi int) error {
	S := w.Shape.Slots
	oldB := w.buckets(lo)
	if lo == 0 {
		oldB = 0
	}
	newB, size := w.buckets(hi), hi-lo
	launch := func(name string, g scope.Grid, k scope.Kernel, opts ...scope.Option) error {
		_, err := scope.Launch(m, g, k, append(opts, scope.WithName(name))...)
		return err
	}
	one := scope.Grid{Blocks: 1, Threads: 1}
	// The batch's device memory, freed when it returns.
	var dev []pm.Addr
	defer func() {
		for _, a := range dev {
			_ = m.Free(a) // allocated here: cannot fail
		}
	}()
	alloc := func(n uint64) (pm.Addr, error) {
		a, err := m.Alloc(pm.DeviceMem, n)
		if err == nil {
			dev = append(dev, a)
		}
		return a, err
	}
	// 1. begin
	if err := launch("hm-sbrp-begin", one, func(t *scope.Thread) {
		t.Store64(l.oldCounts(), uint64(lo)|uint64(oldB)<<32)
		t.OFence()
		t.Store64(l.active(), uint64(gen)<<1|1)
		t.OFence()
		t.Store64(l.counts(), uint64(hi)|uint64(newB)<<32)
		t.DFence()
	}); err != nil {
		return err
	}
	// Device memory: per-bucket fill, the old nodes, the batch, an error word.
	offset, err := alloc(uint64(4 * newB))
	if err != nil {
		return err
	}
	moved, err := alloc(uint64(8 * newB * S))
	if err != nil {
		return err
	}
	in, err := alloc(uint64(8 * size))
	if err != nil {
		return err
	}
	buf := make([]byte, 8*size)
	for i := range size {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(w.keys[lo+i])|uint64(w.vals[lo+i])<<32)
	}
	if err := m.CopyIn(in, buf); err != nil {
		return err
	}
	bad, err := newErrWord(m)
	if err != nil {
		return err
	}
	dev = append(dev, bad.a)
	// appendNode puts node in the next free slot of its bucket under the
	// new count.
	appendNode := func(t *scope.Thread, node uint64) {
		b := int(uint32(node) % uint32(newB))
		if pos := int(t.AtomicAdd32(offset.Add(uint64(4*b)), 1, pm.Device)); pos < S {
			t.Store64(l.slot(b, pos), node)
		} else {
			bad.set(t)
		}
	}
	grid := scope.Grid{Blocks: newB, Threads: S}
	tag := uint64(gen + 1)
	// The buckets the batch touches (the artifact's markBuckets<<<32,
	// 1024>>>: it marks them for the compaction, which rehashes every
	// bucket when the count grows, as it does at every batch here).
	marked, err := alloc(uint64(4 * newB))
	if err != nil {
		return err
	}
	if err := launch("hm-sbrp-mark", scope.Grid{Blocks: 32, Threads: 1024}, func(t *scope.Thread) {
		for i := t.ID(); i < size; i += 32 * 1024 {
			key := t.Load32(in.Add(uint64(8 * i)))
			t.Store32(marked.Add(uint64(4*(key%uint32(newB)))), 1)
		}
	}); err != nil {
		return err
	}
	// 2. compaction: log and clear every slot of the new bucket range
	// (the bucket count grows with every batch, so every bucket is
	// rehashed), then append the old nodes under the new count.
	if err := launch("hm-sbrp-compact", grid, func(t *scope.Thread) {
		b, s := t.Block(), t.TID()
		node := t.Load64(l.slot(b, s))
		t.Store64(moved.Add(uint64(8*t.ID())), node)
		// The log's insert, as the artifact's gpmlog_insert_manual (a
		// partition a slot) makes it: the header's partition count,
		// the partition's head (the tag) and tail, the entry, and after
		// the entry's OFence the header and the head again, for the
		// head's new value. Under Epoch, whose OFence invalidates the
		// L1, the second reads come from the L2.
		p := uint64(b*S + s)
		if t.Load64(l.hdr) <= p {
			bad.set(t) // no such partition
			return
		}
		var ht [2]uint64
		t.Gather64(ht[:], l.entry(b, s).Add(8), l.tailOf(b, s))
		if ht[1] != 16*(p+1) {
			bad.set(t) // a partition holds one entry
			return
		}
		t.Store64(l.entry(b, s), node)
		if w.OFence {
			t.OFence() // hm-sbrp: entry before tag
		}
		t.Load64(l.hdr)
		t.Load64(l.entry(b, s).Add(8))
		t.Store64(l.entry(b, s).Add(8), tag)
		t.OFence()
		t.DFence()
		t.Store64(l.slot(b, s), 0) // hm-sbrp: clear
	}); err != nil {
		return err
	}
	if err := bad.check(m, "hm-sbrp: the log's header or a partition's tail is corrupt"); err != nil {
		return err
	}
	if err := launch("hm-sbrp-move", grid, func(t *scope.Thread) {
		node := t.Load64(moved.Add(uint64(8 * t.ID())))
		if uint32(node) == 0 {
			return
		}
		appendNode(t, node)
	}); err != nil {
		return err
	}
	// 3. append the batch.
	if err := launch("hm-sbrp-append", scope.Grid{Blocks: blocksFor(size, S), Threads: S}, func(t *scope.Thread) {
		i := t.ID()
		if i >= size {
			return
		}
		appendNode(t, t.Load64(in.Add(uint64(8*i))))
	}); err != nil {
		return err
	}
	if err := bad.check(m, "hm-sbrp: a bucket overflowed"); err != nil {
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	// 4. rebuild each bucket as a cuckoo table.
	sub := S / 3
	if err := launch("hm-sbrp-rebuild", grid, func(t *scope.Thread) {
		b, s := t.Block(), t.TID()
		if s >= int(t.Load32(offset.Add(uint64(4*b)))) {
			return
		}
		cell := func(j, off int) pm.Addr { return t.Shared().Add(uint64(8 * (j*sub + off))) }
		node := t.Load64(l.slot(b, s))
		key := uint32(node)
		t.Store32(l.slot(b, s), 0) // the key leaves its appended slot
		loc, table := -1, 0
		for range hmRounds {
			for j := range 3 {
				off := int((w.hash[j][0] + w.hash[j][1]*key) % 1900813 % uint32(sub))
				if loc < 0 || uint32(t.Load64(cell(table, loc))) != key {
					loc = -1
					t.Store64(cell(j, off), node)
				}
				t.SyncThreads()
				if uint32(t.Load64(cell(j, off))) == key {
					loc, table = off, j
				}
			}
			t.SyncThreads()
		}
		if loc < 0 || uint32(t.Load64(cell(table, loc))) != key {
			// The rounds did not place the key: it takes the first
			// cell no key holds (lookups then scan the bucket).
			loc, table = -1, 0
			if w.onFallback != nil {
				w.onFallback()
			}
			for c := 0; c < S && loc < 0; c++ {
				if t.AtomicCAS32(cell(0, c), 0, key, pm.Block) == 0 {
					t.Store64(cell(0, c), node)
					loc = c
				}
			}
			if loc < 0 {
				bad.set(t)
				return
			}
		}
		t.Store64(l.slot(b, table*sub+loc), node) // hm-sbrp: place
		t.DFence()
	}, scope.WithShared(8*S)); err != nil {
		return err
	}
	if err := bad.check(m, "hm-sbrp: the cuckoo rebuild could not place a key"); err != nil {
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	// 5. commit (the artifact's clearLog1: its metadata log cleared).
	if err := launch("hm-sbrp-commit", one, func(t *scope.Thread) {
		t.Store64(l.active(), uint64(gen)<<1)
		t.DFence()
	}); err != nil {
		return err
	}
	// 6. clear the log, as the artifact's clearLog2 does with
	// gpmlog_clear_manual, a thread a partition: take the partition's
	// lock (device memory), set its head to the end of the partition
	// before it (read from PM; here the tag, cleared), read the header's
	// flags, OFence, unlock. A crash here finds the batch committed.
	locks, err := alloc(uint64(4 * newB * S))
	if err != nil {
		return err
	}
	if err := launch("hm-sbrp-clear", grid, func(t *scope.Thread) {
		b, s := t.Block(), t.TID()
		lock := locks.Add(uint64(4 * t.ID()))
		if t.AtomicCAS32(lock, 0, 1, pm.Device) != 0 {
			bad.set(t) // a partition has one clearing thread
			return
		}
		if p := b*S + s; p > 0 {
			t.Load64(l.tailOf((p-1)/S, (p-1)%S))
		}
		t.Store64(l.entry(b, s).Add(8), 0)
		t.Load64(l.hdr) // the flags: a strict log orders the clear
		t.OFence()
		t.AtomicExch32(lock, 0, pm.Device)
	}); err != nil {
		return err
	}
	if err := bad.check(m, "hm-sbrp: a log partition's lock was held"); err != nil {
		return err
	}
	// 7. find every key of the batch, as the artifact's insertRandomKeys
	// does after its insert (findKernel<<<30, BUCKET_SIZE>>>, timed with
	// the rest): a thread a key at a time, three probes of its bucket
	// from PM. Check verifies the table; this times the lookups.
	vals, err := alloc(uint64(4 * size))
	if err != nil {
		return err
	}
	return launch("hm-sbrp-find", scope.Grid{Blocks: hmFindBlocks, Threads: S}, func(t *scope.Thread) {
		for i := t.ID(); i < size; i += hmFindBlocks * S {
			key := t.Load32(in.Add(uint64(8 * i)))
			b := int(key % uint32(newB))
			for j := range 3 {
				off := int((w.hash[j][0] + w.hash[j][1]*key) % 1900813 % uint32(sub))
				if v := t.Load64(l.slot(b, j*sub+off)); uint32(v) == key {
					t.Store32(vals.Add(uint64(4*i)), uint32(v>>32))
					break
				}
			}
		}
	})
}

// hmFindBlocks is the blocks of the artifact's find kernel.
const hmFindBlocks = 30

// CommitPoint returns the active word (crash.CommitPointer): a batch is
// done when it is cleared.
func (w *HMRebuild) CommitPoint(m *pm.Machine) (pm.Addr, error) {
	l, err := w.layout(m)
	return l.active(), err
}

// Recover undoes an active batch: every slot whose entry carries the
// batch's tag gets its logged node back, then the old counts return and
// the batch is marked inactive.
func (w *HMRebuild) Recover(m *pm.Machine) error {
	l, err := w.layout(m)
	if err != nil {
		return err
	}
	act, err := m.Memory().Load(l.active(), 8)
	if err != nil || act&1 == 0 {
		return err
	}
	tag := act>>1 + 1
	S := w.Shape.Slots
	if _, err := scope.Launch(m, scope.Grid{Blocks: w.Shape.MaxBuckets, Threads: S}, func(t *scope.Thread) {
		b, s := t.Block(), t.TID()
		if t.Load64(l.entry(b, s).Add(8)) == tag {
			t.Store64(l.slot(b, s), t.Load64(l.entry(b, s)))
		}
		t.DFence()
	}, scope.WithName("hm-sbrp-restore")); err != nil {
		return err
	}
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		t.Store64(l.counts(), t.Load64(l.oldCounts()))
		t.OFence()
		t.Store64(l.active(), act&^1)
		t.DFence()
	}, scope.WithName("hm-sbrp-undone"))
	return err
}

// Check requires no active batch and a table holding exactly the keys of
// a whole number of batches, each in its bucket under the recorded count.
func (w *HMRebuild) Check(m *pm.Machine) error {
	l, err := w.layout(m)
	if err != nil {
		return err
	}
	var meta [24]byte
	if err := m.Memory().Read(l.meta, meta[:]); err != nil {
		return err
	}
	counts, act := binary.LittleEndian.Uint64(meta[:]), binary.LittleEndian.Uint64(meta[8:])
	if act&1 != 0 {
		return fmt.Errorf("%w: hm-sbrp batch %d still active", ErrInconsistent, act>>1)
	}
	raw := make([]byte, 8*w.Shape.MaxBuckets*w.Shape.Slots)
	if err := m.Memory().Read(l.table, raw); err != nil {
		return err
	}
	nb := uint32(counts >> 32)
	got := map[uint32]uint32{}
	for i := 0; i < len(raw); i += 8 {
		node := binary.LittleEndian.Uint64(raw[i:])
		k := uint32(node)
		if k == 0 {
			continue
		}
		b := uint32(i / 8 / w.Shape.Slots)
		if _, dup := got[k]; dup || nb == 0 || k%nb != b {
			return fmt.Errorf("%w: hm-sbrp key %d in bucket %d (buckets %d, duplicate %v)", ErrInconsistent, k, b, nb, dup)
		}
		got[k] = uint32(node >> 32)
	}
	for _, s := range w.states {
		if maps.Equal(got, s) && uint64(len(s)) == counts&0xFFFFFFFF {
			return nil
		}
	}
	return fmt.Errorf("%w: hm-sbrp holds %d keys (count %d), not a whole number of batches", ErrInconsistent, len(got), uint32(counts))
}
