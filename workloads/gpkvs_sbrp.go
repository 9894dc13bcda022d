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
	register("gpkvs-sbrp", "gpKVS in the SBRP artifact's shape: 4-lane groups insert into a 2-choice table of 4-slot buckets, claims checked by re-reading PM after a block barrier, each update undo-logged (entry, OFence, head, OFence) and made durable by a DFence",
		func(s Size) crash.Workload { return mustWorkload(NewKVSInsert(kvsInsertShape(s), true)) })
	register("gpkvs-sbrp-no-ofence", "gpkvs-sbrp without the OFences of the log insert: the update can persist before its undo entry",
		func(s Size) crash.Workload { return mustWorkload(NewKVSInsert(kvsInsertShape(s), false)) })
	registerScaled("gpkvs-sbrp", func(s Size, f float64) (crash.Workload, error) { return scaledKVSInsert(s, f, true) })
	registerScaled("gpkvs-sbrp-no-ofence", func(s Size, f float64) (crash.Workload, error) { return scaledKVSInsert(s, f, false) })
}

// scaledKVSInsert is gpkvs-sbrp of size s with factor times the blocks and
// so the inserts. The table keeps its size (a store that takes more
// inserts), so its load factor grows with factor: at 4x paper size 262,144
// inserts go into 4 M buckets of 4 slots.
func scaledKVSInsert(s Size, factor float64, ofence bool) (crash.Workload, error) {
	sh := kvsInsertShape(s)
	var err error
	if sh.Blocks, err = scaleCount("blocks", sh.Blocks, factor); err != nil {
		return nil, err
	}
	return NewKVSInsert(sh, ofence)
}

// KVSInsertShape sizes a KVSInsert workload.
type KVSInsertShape struct {
	Blocks, Threads int // the insert kernel's grid; Threads a multiple of 4
	PerGroup        int // elements each 4-lane group inserts, one after another
	Buckets         int // 32-byte buckets, a power of two, split evenly among blocks
	Preload         int // elements placed by Setup
	Updates         int // batch elements that overwrite a preloaded element's value
}

func kvsInsertShape(s Size) KVSInsertShape {
	switch s {
	case Tiny:
		return KVSInsertShape{Blocks: 1, Threads: 8, PerGroup: 2, Buckets: 2, Preload: 2, Updates: 1}
	case Quick:
		return KVSInsertShape{Blocks: 4, Threads: 128, PerGroup: 8, Buckets: 1 << 14}
	}
	// The artifact: 65,536 inserts by 16 blocks of 512 threads (32 per
	// 4-lane group) into a 128 MB table of 4-slot buckets.
	return KVSInsertShape{Blocks: 16, Threads: 512, PerGroup: 32, Buckets: 1 << 22}
}

// kvsSlots is the number of slots of a bucket, one per lane of a group.
const kvsSlots = 4

// kvsElem is one insert: a signature (the key), its first bucket and a
// value (the artifact's "loc").
type kvsElem struct{ sig, bucket, loc uint32 }

// KVSInsert is gpKVS as the SBRP artifact runs it (a Mega-KV insert kernel
// with GPM's log): one batch of inserts into a PM hash table of 32-byte
// buckets, each 4 signatures then 4 values. Each block owns an equal range
// of buckets and inserts its share of the batch there, each 4-lane group
// PerGroup elements in sequence. For an element, the group reads the
// signatures of its first bucket; if one matches, that lane logs the old
// value and updates it. Otherwise the lane of a free slot claims it by
// writing the signature, the whole block meets at a barrier, and the lane
// re-reads the signature from PM: if its claim held it logs and writes the
// value, else the group tries again; a full bucket sends the element to its
// second bucket. Shared counters tell the block when every group is done
// (three, rotating: the artifact's single count can be read after a fast
// group has already added to it, and then the block's barriers no longer
// match).
//
// Every update is undo-logged in the element's own log partition: the
// entry (lane, old signature, bucket, old value), an OFence, the partition
// head advanced, an OFence, then the value, then a DFence. As the
// artifact's kernel and GPM's log library do, an update reads the element
// again from device memory and reaches the partition's head and tail
// through the log's PM-resident header (logged).
// After the kernel a commit word is set, then every partition's head is
// reset (the artifact's clearLogs). Recovery, if the commit word is not
// durable, undoes every logged entry, clears claims that never got a
// value (values are never 0), and resets the heads; if it is, it resets
// the heads.
type KVSInsert struct {
	Shape  KVSInsertShape
	OFence bool // false: the seeded bug

	pre, batch    []kvsElem
	before, after map[uint32]uint32 // signature -> value
}

// NewKVSInsert returns the workload with elements drawn from a fixed seed.
func NewKVSInsert(sh KVSInsertShape, ofence bool) (*KVSInsert, error) {
	if sh.Blocks <= 0 || sh.Threads <= 0 || sh.Threads%kvsSlots != 0 || sh.PerGroup <= 0 ||
		sh.Buckets <= 0 || sh.Buckets&(sh.Buckets-1) != 0 || sh.Buckets%sh.Blocks != 0 ||
		(sh.Buckets/sh.Blocks)&(sh.Buckets/sh.Blocks-1) != 0 || sh.Preload < 0 || sh.Updates < 0 ||
		sh.Updates > sh.Preload || sh.Updates > sh.PerGroup*sh.Threads/kvsSlots {
		return nil, fmt.Errorf("%w: gpkvs-sbrp shape %+v", ErrConfig, sh)
	}
	w := &KVSInsert{Shape: sh, OFence: ofence, before: map[uint32]uint32{}}
	rng := rand.New(rand.NewPCG(0x6b7673, 0x5b59))
	used := map[uint32]bool{}
	per := sh.Buckets / sh.Blocks
	elem := func(block int) kvsElem {
		for {
			if s := rng.Uint32(); s != 0 && !used[s] {
				used[s] = true
				return kvsElem{sig: s, bucket: uint32(block*per + rng.IntN(per)), loc: rng.Uint32() | 1}
			}
		}
	}
	for range sh.Preload {
		e := elem(0)
		w.pre = append(w.pre, e)
		w.before[e.sig] = e.loc
	}
	w.after = maps.Clone(w.before)
	E := w.perBlock()
	for b := range sh.Blocks {
		for i := range E {
			e := elem(b)
			if b == 0 && i < sh.Updates {
				e = w.pre[i]
				e.loc = rng.Uint32() | 1
			}
			w.batch = append(w.batch, e)
			w.after[e.sig] = e.loc
		}
	}
	return w, nil
}

// perBlock returns the elements each block inserts.
func (w *KVSInsert) perBlock() int { return w.Shape.PerGroup * w.Shape.Threads / kvsSlots }

// Name returns "gpkvs-sbrp" or "gpkvs-sbrp-no-ofence".
func (w *KVSInsert) Name() string {
	if w.OFence {
		return "gpkvs-sbrp"
	}
	return "gpkvs-sbrp-no-ofence"
}

// The PM regions: the table, the log (a head and a tail per partition,
// then one 16-byte entry per partition) and the commit word.
const (
	kvsiTable  = "gpkvs-sbrp.table"
	kvsiLog    = "gpkvs-sbrp.log"
	kvsiCommit = "gpkvs-sbrp.commit"
	kvsiHeader = "gpkvs-sbrp.loghdr" // the log's PM-resident metadata: its partition count
	kvsiEntry  = 16
)

type kvsiLayout struct {
	table, log, commit, hdr, in pm.Addr
	n                           int // log partitions: one per batch element
	per                         uint32
	bad                         errWord
}

func (l kvsiLayout) sig(b uint32, s int) pm.Addr { return l.table.Add(uint64(b)*32 + uint64(4*s)) }
func (l kvsiLayout) loc(b uint32, s int) pm.Addr {
	return l.table.Add(uint64(b)*32 + 16 + uint64(4*s))
}
func (l kvsiLayout) head(p int) pm.Addr       { return l.log.Add(uint64(16 * p)) }
func (l kvsiLayout) tail(p int) pm.Addr       { return l.log.Add(uint64(16*p + 8)) }
func (l kvsiLayout) entries() uint64          { return uint64(16 * l.n) }
func (l kvsiLayout) entry(off uint64) pm.Addr { return l.log.Add(l.entries() + off) }

// second returns an element's second bucket: its first with the in-block
// bits xor-ed with the signature, so it stays in the block's range.
func (l kvsiLayout) second(e kvsElem) uint32 {
	return e.bucket&^(l.per-1) | (e.bucket^e.sig)&(l.per-1)
}

// Setup creates the regions, places the preloaded elements and sets every
// partition's head and tail.
func (w *KVSInsert) Setup(m *pm.Machine) error {
	n := len(w.batch)
	table, err := m.CreateRegion(kvsiTable, uint64(32*w.Shape.Buckets))
	if err != nil {
		return err
	}
	lg, err := m.CreateRegion(kvsiLog, uint64(32*n))
	if err != nil {
		return err
	}
	if _, err := m.CreateRegion(kvsiCommit, 8); err != nil {
		return err
	}
	if err := createWords(m, kvsiHeader, uint64(n)); err != nil {
		return err
	}
	ht := make([]byte, 16*n)
	for p := range n {
		binary.LittleEndian.PutUint64(ht[16*p:], uint64(kvsiEntry*p))
		binary.LittleEndian.PutUint64(ht[16*p+8:], uint64(kvsiEntry*(p+1)))
	}
	if err := m.CopyIn(lg.Base, ht); err != nil {
		return err
	}
	l := kvsiLayout{table: table.Base}
	used := map[pm.Addr]bool{}
	for _, e := range w.pre {
		s := 0
		for used[l.sig(e.bucket, s)] {
			s++
		}
		if s == kvsSlots {
			return fmt.Errorf("%w: preloaded bucket %d", ErrFull, e.bucket)
		}
		used[l.sig(e.bucket, s)] = true
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], e.sig)
		if err := m.CopyIn(l.sig(e.bucket, s), b[:]); err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(b[:], e.loc)
		if err := m.CopyIn(l.loc(e.bucket, s), b[:]); err != nil {
			return err
		}
	}
	return nil
}

// layout opens the regions and copies the batch to fresh device memory.
func (w *KVSInsert) layout(m *pm.Machine) (kvsiLayout, error) {
	bases, err := openRegions(m, kvsiTable, kvsiLog, kvsiCommit, kvsiHeader)
	if err != nil {
		return kvsiLayout{}, err
	}
	l := kvsiLayout{table: bases[0], log: bases[1], commit: bases[2], hdr: bases[3], n: len(w.batch), per: uint32(w.Shape.Buckets / w.Shape.Blocks)}
	if l.in, err = m.Alloc(pm.DeviceMem, uint64(16*len(w.batch))); err != nil {
		return l, err
	}
	buf := make([]byte, 16*len(w.batch))
	for i, e := range w.batch {
		binary.LittleEndian.PutUint32(buf[16*i:], e.sig)
		binary.LittleEndian.PutUint32(buf[16*i+4:], e.bucket)
		binary.LittleEndian.PutUint32(buf[16*i+8:], e.loc)
	}
	if err := m.CopyIn(l.in, buf); err != nil {
		return l, err
	}
	l.bad, err = newErrWord(m)
	return l, err
}

// readElem loads batch element p from device memory.
func (l kvsiLayout) readElem(t *scope.Thread, p int) kvsElem {
	a := l.in.Add(uint64(16 * p))
	w := t.Load64(a)
	return kvsElem{sig: uint32(w), bucket: uint32(w >> 32), loc: t.Load32(a.Add(8))}
}

// sigs loads the 4 signatures of bucket b (every lane of the group reads
// them all, as the artifact's ballot gives every lane every lane's match).
func (l kvsiLayout) sigs(t *scope.Thread, b uint32) [kvsSlots]uint32 {
	var w [2]uint64
	t.Gather64(w[:], l.sig(b, 0), l.sig(b, 2))
	lo, hi := w[0], w[1]
	return [kvsSlots]uint32{uint32(lo), uint32(lo >> 32), uint32(hi), uint32(hi >> 32)}
}

// logged writes slot s of bucket b to the value of batch element p after
// logging its old contents in partition p: the GPM log insert, then the
// update, then a DFence. It reads what the artifact's insert reads where
// it reads it: the element from device memory, the log's PM-resident
// header before the partition's head and tail and again for the head's
// address after the entry's OFence (GPM's log keeps its head and tail
// arrays behind pointers in that header), and the element's value after
// the log's OFences. A model whose fences and barriers invalidate the L1
// (Epoch) fetches these again from the L2; SBRP keeps them.
func (w *KVSInsert) logged(t *scope.Thread, l kvsiLayout, p int, b uint32, s int, oldSig uint32) {
	l.readElem(t, p)
	if int(t.Load64(l.hdr)) <= p {
		l.bad.set(t) // no such partition
		return
	}
	var ht [2]uint64
	t.Gather64(ht[:], l.head(p), l.tail(p))
	start, end := ht[0], ht[1]
	if start+kvsiEntry > end {
		l.bad.set(t) // a partition holds one entry
		return
	}
	old := t.Load32(l.loc(b, s))
	t.Store64(l.entry(start), uint64(s)|uint64(oldSig)<<32)
	t.Store64(l.entry(start+8), uint64(b)|uint64(old)<<32)
	if w.OFence {
		t.OFence() // gpkvs-sbrp: entry before head
	}
	t.Load64(l.hdr) // the head's address
	t.Store64(l.head(p), start+kvsiEntry)
	if w.OFence {
		t.OFence() // gpkvs-sbrp: head before the update
	}
	t.Store32(l.loc(b, s), l.readElem(t, p).loc)
	t.DFence()
}

// insertKernel is the artifact's insert kernel.
func (w *KVSInsert) insertKernel(l kvsiLayout) scope.Kernel {
	T, E := w.Shape.Threads, w.perBlock()
	step := T / kvsSlots
	return func(t *scope.Thread) {
		tid, blk := t.TID(), t.Block()
		lane, grp := tid%kvsSlots, tid/kvsSlots
		// Three rotating shared counters of the lanes that are done (or
		// failed in the current bucket): iteration i counts in count(i) and
		// resets count(i+2), which nobody reads or adds to until iteration
		// i+2, so the whole block always reads the same count.
		count := func(i int) pm.Addr { return t.Shared().Add(uint64(4 * (i % 3))) }
		for id := grp; id < E; id += step {
			t.SyncThreads()
			if tid == 0 {
				for i := range 3 {
					t.Store32(count(i), 0)
				}
			}
			t.SyncThreads()
			p := blk*E + id
			e := l.readElem(t, p)
			done := false
			first := int(e.sig % kvsSlots) // where the free-slot search starts
			i := 0
			for _, b := range [2]uint32{e.bucket, l.second(e)} {
				// An existing signature: update its value in place.
				sigs := l.sigs(t, b)
				for s, sg := range sigs {
					if !done && sg == e.sig {
						if lane == s {
							w.logged(t, l, p, b, s, e.sig)
						}
						done = true
					}
				}
				// Where a SIMT GPU reconverges the warp's lanes after a
				// divergent branch (its immediate post-dominator), the
				// kernel says so: the lanes issue together again.
				t.SyncWarp()
				// Claim a free slot, meet, and check the claim.
				fail := false
				for ; ; i++ {
					chosen := -1
					if !done && !fail {
						sigs = l.sigs(t, b)
						for k := range kvsSlots {
							if s := (first + k) % kvsSlots; sigs[s] == 0 {
								chosen = s
								break
							}
						}
						if chosen < 0 {
							fail = true
						}
					}
					// The warp's lanes read the bucket together (the
					// artifact's warp-synchronous ballot) before any claims
					// a slot: a lane must not see its own group's claim.
					t.SyncWarp()
					if chosen >= 0 && lane == chosen {
						t.Store32(l.sig(b, chosen), e.sig)
					}
					t.SyncWarp()
					if done || fail {
						t.AtomicAdd32(count(i), 1, pm.Block)
					}
					t.SyncThreads()
					if tid == 0 {
						t.Store32(count(i+2), 0)
					}
					t.SyncWarp()
					if t.Load32(count(i)) == uint32(T) {
						i++
						break
					}
					if chosen >= 0 && t.Load32(l.sig(b, chosen)) == e.sig { // gpkvs-sbrp: re-read the claim
						if lane == chosen {
							w.logged(t, l, p, b, chosen, 0)
						}
						done = true
					}
					t.SyncWarp()
				}
			}
			if !done && lane == 0 {
				l.bad.set(t) // both buckets full
			}
		}
	}
}

// Run inserts the batch, sets the commit word and clears the log.
func (w *KVSInsert) Run(m *pm.Machine) error {
	l, err := w.layout(m)
	if err != nil {
		return err
	}
	g := scope.Grid{Blocks: w.Shape.Blocks, Threads: w.Shape.Threads}
	if _, err := scope.Launch(m, g, w.insertKernel(l), scope.WithName("gpkvs-sbrp-insert"), scope.WithShared(12)); err != nil {
		return err
	}
	if err := l.bad.check(m, "gpkvs-sbrp: an element found both buckets full or its log partition full"); err != nil {
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	if _, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		t.Store64(l.commit, 1)
		t.DFence()
	}, scope.WithName("gpkvs-sbrp-commit")); err != nil {
		return err
	}
	return w.clearLogs(m, l)
}

// clearLogs truncates the committed batch's log: one thread per partition
// resets its head, orders it, fences at device scope and makes it durable,
// as the artifact's clearLogs kernel does after the insert (its
// gpmlog_clear: the head, srp_order, fence.sc.gpu; then srp_persist). The
// artifact's figures time it with the insert.
func (w *KVSInsert) clearLogs(m *pm.Machine, l kvsiLayout) error {
	n := len(w.batch)
	_, err := scope.Launch(m, scope.Grid{Blocks: blocksFor(n, 512), Threads: 512}, func(t *scope.Thread) {
		p := t.ID()
		if p >= n {
			return
		}
		t.Store64(l.head(p), uint64(kvsiEntry*p))
		t.OFence()
		t.Fence(pm.Device)
		t.DFence()
	}, scope.WithName("gpkvs-sbrp-clear"))
	return err
}

// CommitPoint returns the commit word (crash.CommitPointer).
func (w *KVSInsert) CommitPoint(m *pm.Machine) (pm.Addr, error) {
	b, err := openRegions(m, kvsiCommit)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

// Recover undoes an uncommitted batch: one thread per batch element
// restores its logged slot, clears a claim of its signature that never got
// a value, and resets its partition's head.
func (w *KVSInsert) Recover(m *pm.Machine) error {
	l, err := w.layout(m)
	if err != nil {
		return err
	}
	c, err := m.Memory().Load(l.commit, 8)
	if err != nil {
		return err
	}
	if c == 1 {
		return w.clearLogs(m, l) // committed: finish the log's truncation
	}
	n := len(w.batch)
	_, err = scope.Launch(m, scope.Grid{Blocks: blocksFor(n, 256), Threads: 256}, func(t *scope.Thread) {
		p := t.ID()
		if p >= n {
			return
		}
		base := uint64(kvsiEntry * p)
		if t.Load64(l.head(p)) > base {
			var ab [2]uint64
			t.Gather64(ab[:], l.entry(base), l.entry(base+8))
			a, b := ab[0], ab[1]
			s, bk := int(uint32(a)%kvsSlots), uint32(b)
			t.Store32(l.sig(bk, s), uint32(a>>32))
			t.Store32(l.loc(bk, s), uint32(b>>32))
		}
		e := l.readElem(t, p)
		for _, bk := range [2]uint32{e.bucket, l.second(e)} {
			for s := range kvsSlots {
				if t.Load32(l.sig(bk, s)) == e.sig && t.Load32(l.loc(bk, s)) == 0 {
					t.Store32(l.sig(bk, s), 0)
				}
			}
		}
		t.OFence() // the undo before the head reset
		t.Store64(l.head(p), base)
		t.DFence()
	}, scope.WithName("gpkvs-sbrp-recover"))
	return err
}

// Check requires the table to hold exactly the elements before the batch
// or exactly those after it (after it, if the commit word is set), each in
// one of its two buckets.
func (w *KVSInsert) Check(m *pm.Machine) error {
	bases, err := openRegions(m, kvsiTable, kvsiCommit)
	if err != nil {
		return err
	}
	raw := make([]byte, 32*w.Shape.Buckets)
	if err := m.Memory().Read(bases[0], raw); err != nil {
		return err
	}
	got := map[uint32]uint32{}
	where := map[uint32]uint32{}
	for b := range w.Shape.Buckets {
		for s := range kvsSlots {
			sig := binary.LittleEndian.Uint32(raw[32*b+4*s:])
			loc := binary.LittleEndian.Uint32(raw[32*b+16+4*s:])
			if sig == 0 && loc == 0 {
				continue
			}
			if _, dup := got[sig]; dup || sig == 0 {
				return fmt.Errorf("%w: gpkvs-sbrp bucket %d slot %d: signature %#x value %#x (duplicate or no signature)", ErrInconsistent, b, s, sig, loc)
			}
			got[sig], where[sig] = loc, uint32(b)
		}
	}
	c, err := m.Memory().Load(bases[1], 8)
	if err != nil {
		return err
	}
	l := kvsiLayout{per: uint32(w.Shape.Buckets / w.Shape.Blocks)}
	home := map[uint32]kvsElem{}
	for _, e := range append(append([]kvsElem(nil), w.pre...), w.batch...) {
		home[e.sig] = e
	}
	for sig, b := range where {
		if e, ok := home[sig]; !ok || (b != e.bucket && b != l.second(e)) {
			return fmt.Errorf("%w: gpkvs-sbrp signature %#x in bucket %d, not one of its own", ErrInconsistent, sig, b)
		}
	}
	if maps.Equal(got, w.after) || (c != 1 && maps.Equal(got, w.before)) {
		return nil
	}
	return fmt.Errorf("%w: gpkvs-sbrp holds %d elements, neither the %d before the batch nor the %d after it (commit word %d)",
		ErrInconsistent, len(got), len(w.before), len(w.after), c)
}
