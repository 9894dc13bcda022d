package kvs

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/scopedpm/scopedpm/internal/radix"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/txn"
)

// HostBatches makes the store run its SET, DELETE and GET batches as host
// code on the calling goroutine instead of as GPU kernels: for a store
// used from Go on pm/native, where simulating one GPU thread per request
// is most of a batch's cost. A write batch makes the persists the kernels
// make, to the same addresses with the same bytes (batch thread i's HCL
// slot, the way the kernel's rules choose, the same flag words), in one
// order the kernels' fences allow: the begin flag, every request's log
// entry, every log tail, every update, the commit flag, then the log's
// truncation. A crash therefore leaves a state the kernels could have
// left, and Recover (which still runs its kernel) and every other
// operation are unchanged. On a backend that can make a batch's persists
// durable all together or not at all (pm/native's log mode,
// Backend.DeferAtomic, for batches whose persists fit its
// AtomicDeferBytes), a write batch is issued that way and writes no log
// entries, tails or truncation: a crash keeps the whole batch or none of
// it, the log region keeps the bytes it had, and the batch costs about
// half the CPU and half the bytes logged. Among requests for new keys that
// share a bucket, the host gives free ways in request order, which the
// kernels' threads need not. Batches take no simulated time (Cycles is 0).
// It needs an HCL log (LogHCL): a conventional log's partitions are shared
// under locks, so its appends depend on each other.
func HostBatches() Option { return func(s *Store) { s.host = true } }

// atomicDeferrer is a backend that can make a batch's persists durable
// all together or not at all (pm/native.Backend.DeferAtomic), for a batch
// of at most AtomicDeferBytes of them (each write counted as its bytes
// rounded up to 8, plus 16).
type atomicDeferrer interface {
	AtomicDeferBytes() int
	DeferAtomic(fn func() error) error
}

// hostAtomicBytes bounds the bytes of persists of a host batch of n
// requests without its log (atomicDeferrer's measure): two flag words
// and, per request, its signature and its value, each a write of its own
// (the plan merges adjacent ones, which only takes bytes off).
func hostAtomicBytes(n int) int { return 2*(8+16) + n*((8+16)+(8+16)) }

// hostWrite is a store a host batch holds until it issues the batch: n
// bytes at addr, kept at off in the batch's arena.
type hostWrite struct {
	addr   pm.Addr
	off, n uint32
	seq    uint32 // issue order within its phase
}

// hostBatch collects the persists of a host batch by phase and issues them
// in one pm.Machine.CopyInMany call, phase by phase. Within a phase the
// kernels order nothing (different threads, or one thread's stores between
// two of its fences), so the writes of a phase go out in address order
// (the window's, then the others'), runs of adjacent ones merged into one
// write. Writes of whole 4-byte words inside the window (the log's region,
// which a batch's log, tail and truncation phases cover densely) are kept
// in place, in a copy of the window per phase and a bitmap of the words
// written, whose runs need no sort; a later write of a word in the same
// phase replaces the earlier one (the kernels allow a crash to show
// either). A store keeps its batch's buffers for the next batch.
type hostBatch struct {
	m       *pm.Machine
	win     pm.Range
	shadows []shadow
	phases  [][]hostWrite
	arena   []byte
	out     []pm.Write
	keys    []uint64    // sortByAddr's scratch
	scratch []uint64    // radix.Sort's other buffer
	tmp     []hostWrite // sortByAddr's scratch
	err     error
	warm    byte // warmBuckets' sum, which keeps its reads
}

// shadow is one phase's writes inside the window, kept in place.
type shadow struct {
	data   []byte   // the window's bytes as the phase writes them
	words  []uint64 // a bit per 4-byte word of data written
	lo, hi int      // the words of the bitmap that may be set
}

// reset empties hb for a batch on m whose window is win.
func (hb *hostBatch) reset(m *pm.Machine, win pm.Range) {
	hb.m, hb.err = m, nil
	if win != hb.win {
		hb.win, hb.shadows = win, nil
	}
	for i := range hb.phases {
		hb.phases[i] = hb.phases[i][:0]
	}
	for i := range hb.shadows {
		sh := &hb.shadows[i]
		if sh.lo < sh.hi {
			clear(sh.words[sh.lo:sh.hi])
		}
		sh.lo, sh.hi = len(sh.words), 0
	}
	hb.arena, hb.out = hb.arena[:0], hb.out[:0]
}

func (hb *hostBatch) fail(err error) {
	if hb.err == nil && err != nil {
		hb.err = err
	}
}

// add holds n bytes at a in phase and returns where to put them.
func (hb *hostBatch) add(phase int, a pm.Addr, n int) []byte {
	if off := uint64(a - hb.win.Base); off < hb.win.Size && uint64(n) <= hb.win.Size-off && (off|uint64(n))%4 == 0 {
		return hb.shadowOf(phase).mark(off, n)
	}
	for len(hb.phases) <= phase {
		hb.phases = append(hb.phases, nil)
	}
	off := len(hb.arena)
	hb.arena = slices.Grow(hb.arena, n)[:off+n]
	ws := hb.phases[phase]
	hb.phases[phase] = append(ws, hostWrite{addr: a, off: uint32(off), n: uint32(n), seq: uint32(len(ws))})
	return hb.arena[off : off+n]
}

// shadowOf returns phase's copy of the window, made at its first use.
func (hb *hostBatch) shadowOf(phase int) *shadow {
	for len(hb.shadows) <= phase {
		hb.shadows = append(hb.shadows, shadow{})
	}
	sh := &hb.shadows[phase]
	if sh.data == nil {
		sh.data = make([]byte, hb.win.Size)
		sh.words = make([]uint64, (hb.win.Size/4+63)/64)
		sh.lo, sh.hi = len(sh.words), 0
	}
	return sh
}

// mark records a write of the n bytes at off (whole words) and returns
// them.
func (sh *shadow) mark(off uint64, n int) []byte {
	w0, w1 := int(off/4), int(off/4)+n/4
	for w := w0; w < w1; w++ {
		sh.words[w/64] |= 1 << (w % 64)
	}
	if i := w0 / 64; i < sh.lo {
		sh.lo = i
	}
	if i := (w1-1)/64 + 1; i > sh.hi {
		sh.hi = i
	}
	return sh.data[off : off+uint64(n)]
}

// runs appends the runs of words written, in address order, as writes.
func (sh *shadow) runs(base pm.Addr, out []pm.Write) []pm.Write {
	start := -1 // the word the open run starts at
	for i := sh.lo; i < sh.hi; i++ {
		for bw := sh.words[i]; ; {
			if start < 0 {
				if bw == 0 {
					break
				}
				start = i*64 + bits.TrailingZeros64(bw)
				bw |= 1<<(start%64) - 1 // the bits below are spent
			}
			// The run goes on to the first clear bit at or after start.
			end := bits.TrailingZeros64(^bw)
			if end == 64 {
				break // it goes on into the next word
			}
			out = append(out, pm.Write{Addr: base.Add(uint64(start) * 4), Data: sh.data[start*4 : (i*64+end)*4]})
			start = -1
			bw &^= 1<<end - 1
		}
	}
	if start >= 0 {
		out = append(out, pm.Write{Addr: base.Add(uint64(start) * 4), Data: sh.data[start*4 : sh.hi*64*4]})
	}
	return out
}

func (hb *hostBatch) put(phase int, a pm.Addr, data []byte) { copy(hb.add(phase, a, len(data)), data) }

func (hb *hostBatch) putWord(phase int, a pm.Addr, n int, v uint64) {
	pm.PutLE(hb.add(phase, a, n), v)
}

// plan returns the batch's writes in issue order: by phase, then by
// address (the window's first), with adjacent writes of a phase merged.
// Writes of one phase outside the window that overlap keep their issue
// order instead (none of the store's do: the requests of a batch touch
// distinct ways and slots).
func (hb *hostBatch) plan() []pm.Write {
	for p := range max(len(hb.phases), len(hb.shadows)) {
		if p < len(hb.shadows) {
			hb.out = hb.shadows[p].runs(hb.win.Base, hb.out)
		}
		if p >= len(hb.phases) {
			continue
		}
		ws := hb.phases[p]
		hb.sortByAddr(ws)
		overlap := false
		for i := 1; i < len(ws); i++ {
			if ws[i].addr < ws[i-1].addr.Add(uint64(ws[i-1].n)) {
				overlap = true
				break
			}
		}
		if overlap {
			// Their issue order decides the bytes.
			slices.SortFunc(ws, func(a, b hostWrite) int { return cmp.Compare(a.seq, b.seq) })
			for _, w := range ws {
				hb.out = append(hb.out, pm.Write{Addr: w.addr, Data: hb.arena[w.off : w.off+w.n]})
			}
			continue
		}
		for lo := 0; lo < len(ws); {
			end, hi := ws[lo].addr.Add(uint64(ws[lo].n)), lo+1
			contiguous := true // the run's bytes lie together in the arena
			for hi < len(ws) && ws[hi].addr == end {
				contiguous = contiguous && ws[hi].off == ws[hi-1].off+ws[hi-1].n
				end = end.Add(uint64(ws[hi].n))
				hi++
			}
			n := uint32(end - ws[lo].addr)
			var b []byte
			if contiguous {
				b = hb.arena[ws[lo].off : ws[lo].off+n]
			} else {
				b = make([]byte, 0, n)
				for _, w := range ws[lo:hi] {
					b = append(b, hb.arena[w.off:w.off+w.n]...)
				}
			}
			hb.out = append(hb.out, pm.Write{Addr: ws[lo].addr, Data: b})
			lo = hi
		}
	}
	return hb.out
}

// sortByAddr sorts the writes of a phase by address: as packed integers
// (the offset from the phase's lowest address above the write's index)
// when they fit in 64 bits, which sorts several times faster.
func (hb *hostBatch) sortByAddr(ws []hostWrite) {
	if len(ws) < 2 {
		return
	}
	lo, hi := ws[0].addr, ws[0].addr
	for _, w := range ws[1:] {
		lo, hi = min(lo, w.addr), max(hi, w.addr)
	}
	ib := uint(bits.Len(uint(len(ws))))
	if uint(bits.Len64(uint64(hi-lo)))+ib > 64 {
		slices.SortFunc(ws, func(a, b hostWrite) int { return cmp.Compare(a.addr, b.addr) })
		return
	}
	hb.keys = slices.Grow(hb.keys[:0], len(ws))[:len(ws)]
	hb.scratch = slices.Grow(hb.scratch[:0], len(ws))[:len(ws)]
	for i, w := range ws {
		hb.keys[i] = uint64(w.addr-lo)<<ib | uint64(i)
	}
	keys := radix.SortFrom(hb.keys, hb.scratch, ib, uint(bits.Len64(uint64(hi-lo)))+ib) // the indices ascend already
	tmp := append(hb.tmp[:0], ws...)
	hb.tmp = tmp
	for i, k := range keys {
		ws[i] = tmp[k&(1<<ib-1)]
	}
}

// hostExec is the txn.Exec of one request of a host batch: its loads read
// the visible image, its stores join the batch in its current phase, Order
// and Durable move it to the next phase, and Who is batch thread i's, so
// the log gives it the kernel thread's slot.
type hostExec struct {
	hb    *hostBatch
	who   txn.Who
	phase int
	entry [entryBytes]byte // the request's undo entry, which the log copies
}

func (x *hostExec) load(a pm.Addr, n uint64) uint64 {
	if x.hb.err != nil {
		return 0
	}
	v, err := x.hb.m.Memory().Load(a, n)
	x.hb.fail(err)
	return v
}

// Load32 reads 4 bytes of the visible image.
func (x *hostExec) Load32(a pm.Addr) uint32 { return uint32(x.load(a, 4)) }

// Load64 reads 8 bytes of the visible image.
func (x *hostExec) Load64(a pm.Addr) uint64 { return x.load(a, 8) }

// LoadBytes reads len(buf) bytes of the visible image.
func (x *hostExec) LoadBytes(a pm.Addr, buf []byte) {
	if x.hb.err == nil {
		x.hb.fail(x.hb.m.Memory().Read(a, buf))
	}
	if x.hb.err != nil {
		clear(buf)
	}
}

// Store32 holds a 4-byte store.
func (x *hostExec) Store32(a pm.Addr, v uint32) {
	binary.LittleEndian.PutUint32(x.hb.add(x.phase, a, 4), v)
}

// Store64 holds an 8-byte store.
func (x *hostExec) Store64(a pm.Addr, v uint64) {
	binary.LittleEndian.PutUint64(x.hb.add(x.phase, a, 8), v)
}

// StoreBytes holds a store of data.
func (x *hostExec) StoreBytes(a pm.Addr, data []byte) { x.hb.put(x.phase, a, data) }

// CAS64 is never used by an HCL log; it reports an error if it is.
func (x *hostExec) CAS64(a pm.Addr, old, nv uint64) uint64 {
	x.hb.fail(fmt.Errorf("%w: a host batch takes no lock (CAS at %v)", ErrBadArg, a))
	return ^old
}

// Order starts the next phase.
func (x *hostExec) Order() { x.phase++ }

// Durable starts the next phase.
func (x *hostExec) Durable() { x.phase++ }

// Pause does nothing.
func (x *hostExec) Pause() {}

// Who returns batch thread i's ids.
func (x *hostExec) Who() txn.Who { return x.who }

// Err returns the first failed load, as a host Exec's does.
func (x *hostExec) Err() error { return x.hb.err }

// threadWho returns the ids of thread i of a batch grid.
func (s *Store) threadWho(i int) txn.Who {
	bt := int(s.h.block)
	in := i % bt
	return txn.Who{ID: i, Block: i / bt, WarpInBlock: in / txn.Lanes, Lane: in % txn.Lanes, WarpSize: txn.Lanes}
}

// Phases of a host write batch.
const (
	phaseBegin = 0 // the begin flag
	phaseLog   = 1 // each request's log entry; its tail, and its update, in the phases after
	// The commit flag and the truncation follow the requests' last phase.
)

// hostRun runs a SET or DELETE batch on the host (see HostBatches) and
// returns each request's status.
func (s *Store) hostRun(op opKind, keys []uint32, vals []uint64, seq uint64) ([]uint32, error) {
	hb := &s.hb
	hb.reset(s.m, s.hcl.Region())
	hb.putWord(phaseBegin, s.flagAddr(), 8, flagWord(seq, true))
	status := make([]uint32, len(keys))
	slots := make([]int, 0, len(keys))
	type way struct {
		b uint64
		w int
	}
	var freed, claimed []way
	issued := false
	defer func() {
		if !issued {
			// Nothing was written: give back the ways claimed.
			for _, c := range claimed {
				_ = s.releaseHost(c.b, c.w) // the masks are volatile; Recover rebuilds them anyway
			}
		}
	}()
	// On a backend whose deferred persists can be all or nothing
	// (pm/native's log mode), the batch is issued that way and needs no
	// undo log: a crash keeps all of it or none.
	ad, atomic := pm.As[atomicDeferrer](s.m.Backend())
	atomic = atomic && hostAtomicBytes(len(keys)) <= ad.AtomicDeferBytes()
	s.warmBuckets(keys)
	last := phaseLog
	x := &hostExec{hb: hb}
	var line [BucketBytes]byte
	for i, key := range keys {
		x.who, x.phase = s.threadWho(i), phaseLog
		b, w, found, err := s.findHost(key, &line)
		if err != nil {
			return nil, err
		}
		st := stUpdated
		switch {
		case op == opDelete && !found:
			status[i] = stMissing
			continue
		case op == opDelete:
			st = stDeleted
			freed = append(freed, way{b, w})
		case !found:
			var ok bool
			if b, w, ok, err = s.claimHost(key); err != nil {
				return nil, err
			} else if !ok {
				status[i] = stFull
				continue
			}
			claimed = append(claimed, way{b, w})
			st = stInserted
		}
		sigA, valA := s.sigAddr(b, w), s.valAddr(b, w)
		if !atomic {
			part, err := s.log.Part(x)
			if err == nil {
				err = s.log.Insert(x, part, putEntry(x.entry[:], uint32(b), w, x.Load32(sigA), x.Load64(valA)))
			}
			if err != nil {
				return nil, fmt.Errorf("request %d (key %d): log: %w", i, key, err)
			}
			slots = append(slots, part)
			// Insert ordered the entry before its tail and the tail
			// before what follows: the kernel's OFence. Without it
			// (the seeded bug) the update joins the tail's phase.
			if s.skipOFence {
				x.phase--
			}
		}
		if op == opSet {
			x.Store64(valA, vals[i])
			x.Store32(sigA, key)
		} else {
			x.Store32(sigA, 0)
			x.Store64(valA, 0)
		}
		last = max(last, x.phase)
		status[i] = st
	}
	if hb.err != nil {
		return nil, hb.err
	}
	commit := last + 1
	hb.putWord(commit, s.flagAddr(), 8, flagWord(seq, false))
	x.who = txn.Who{}
	for _, p := range slots {
		x.phase = commit + 1
		if err := s.log.Clear(x, p); err != nil {
			return nil, err
		}
	}
	issued = true // from here the visible image holds the batch, the masks with it
	issue := func() error { return s.m.CopyInMany(hb.plan()) }
	var err error
	if atomic {
		err = ad.DeferAtomic(issue)
	} else {
		err = s.deferred(issue)
	}
	if err != nil {
		return nil, err
	}
	// The kernel frees a deleted way after its DFence: once the batch is
	// durable.
	for _, f := range freed {
		if err := s.releaseHost(f.b, f.w); err != nil {
			return nil, err
		}
	}
	return status, nil
}

// warmBuckets reads a byte of each line of the keys' buckets before the
// requests run. The reads depend on nothing, so the processor overlaps
// their cache misses, which the requests' lookups, one after the other,
// would take one at a time; the lookups then find the lines in the cache.
// It changes nothing and reports nothing (a lookup reports what fails).
func (s *Store) warmBuckets(keys []uint32) {
	tbl, _, err := s.m.Memory().Bytes(s.bucketAddr(0), s.h.buckets*BucketBytes, 1)
	if err != nil {
		return
	}
	var sum byte
	for _, k := range keys {
		b1, b2 := candidates(k, s.h.buckets)
		// A bucket's first and last bytes: its two 64-byte lines.
		sum += tbl[b1*BucketBytes] + tbl[b1*BucketBytes+BucketBytes-1] + tbl[b2*BucketBytes] + tbl[b2*BucketBytes+BucketBytes-1]
	}
	s.hb.warm = sum // keeps the reads
}

// findHost is find on the host: the bucket and way of key, read from the
// visible image into line (which then holds the bucket the key is in).
func (s *Store) findHost(key uint32, line *[BucketBytes]byte) (b uint64, w int, found bool, err error) {
	b1, b2 := candidates(key, s.h.buckets)
	for _, b := range [2]uint64{b1, b2} {
		if err := s.m.CopyOut(s.bucketAddr(b), line[:]); err != nil {
			return 0, 0, false, err
		}
		for w := range Ways {
			if binary.LittleEndian.Uint32(line[sigOff+4*w:]) == key {
				return b, w, true, nil
			}
		}
	}
	return 0, 0, false, nil
}

// claimHost is claim on the host: a free way of the less occupied of key's
// buckets, taken in the volatile occupancy masks.
func (s *Store) claimHost(key uint32) (uint64, int, bool, error) {
	b1, b2 := candidates(key, s.h.buckets)
	mem := s.m.Memory()
	m1, err := mem.Load(s.masks.Add(4*b1), 4)
	if err != nil {
		return 0, 0, false, err
	}
	m2, err := mem.Load(s.masks.Add(4*b2), 4)
	if err != nil {
		return 0, 0, false, err
	}
	b, m := b1, uint32(m1)
	if occupancy(uint32(m2)) < occupancy(m) {
		b, m = b2, uint32(m2)
	}
	if occupancy(m) == Ways {
		return 0, 0, false, nil
	}
	w := 0
	for m&(1<<w) != 0 {
		w++
	}
	return b, w, true, mem.Store(s.masks.Add(4*b), 4, uint64(m|1<<w))
}

// releaseHost frees way w of bucket b in the occupancy masks.
func (s *Store) releaseHost(b uint64, w int) error {
	mem := s.m.Memory()
	m, err := mem.Load(s.masks.Add(4*b), 4)
	if err != nil {
		return err
	}
	return mem.Store(s.masks.Add(4*b), 4, m&^(1<<w))
}
