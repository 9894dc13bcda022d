package hwmodel

import (
	"cmp"
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// The machine of the persistency re-study (a GPGPU-Sim 4.0 re-study of
// "Exploring Memory Persistency Models for GPUs"), timed under the models
// persistency.WriteBackADR (ADR: the memory controllers' write-pending queues,
// WPQs, are durable) and persistency.WriteBackPCT (volatile WPQs: durable only
// after a PCOMMIT).
//
// How it is timed:
//   - The L1 is write-through and does not allocate on a store (Volta's L1
//     for global stores); the L2 is write-back. A plain PM store makes its
//     L2 line dirty and costs the warp one issue slot; its record is not
//     durable.
//   - The L2 is sectored (writeback.sector_bytes): a write-back or a
//     write-through sends only the sectors written, and counts as many
//     bytes against the NVM write bandwidth.
//   - A dirty line is written back by a write-through store (StoreWT), a
//     CLWB of the line, an L2WB, or its eviction: any L2 fill (a store, a
//     load or atomic that misses, a volatile line) that picks a dirty PM
//     line as its victim writes that line back. A write-back takes the path
//     of every other flush (L2 latency, the NVM bus it shares with reads,
//     PCIe when PM is far); it is acknowledged when its WPQ accepts it
//     (persist.ack_at_queue; without it, after the NVM write latency too).
//     Under ADR it is durable then; under PCT only once a later PCommit
//     has drained it to the media, the NVM write latency later.
//   - An eviction's write-back goes through a write-back buffer that is
//     assumed never to fill: the access that evicted the line does not wait
//     for it, and the write-back costs only its share of the NVM write
//     bandwidth (which later write-backs and write-throughs queue behind).
//     GPGPU-Sim's L2, which the re-study ran, holds write-backs in a
//     32-entry miss queue per L2 bank and stalls the bank when it is full;
//     that back-pressure is not modelled. A MemBar waits for an eviction's
//     write-back only after an L2WB or a CLWB of the line (below). A
//     launch still ends
//     only once every write-back, evictions' included, is acknowledged
//     (Backend.Now), so a kernel whose evictions outrun the NVM write
//     bandwidth pays for them at its end, where a full buffer would have
//     stalled it along the way.
//   - A CLWB of a clean line costs a round trip to the L2 and writes
//     nothing to NVM; if another warp's CLWB or L2WB, or an eviction, took
//     the warp's own stores to the line, the CLWB is acknowledged only once
//     that write-back has reached its WPQ (the refiner's return-time check
//     found MemBars returning before such stores were durable). A warp
//     remembers the entry of its latest store to each of the last 16
//     lines it stored into (maxOwn); for an older store, or one of an
//     earlier launch, the CLWB waits for the line's latest write-back.
//   - L2WB is sent to every L2 bank (writeback.channels ×
//     writeback.l2_banks_per_channel) and each bank walks its lines in
//     parallel, as the re-study's GPGPU-Sim does (data_cache::nvm_wb_timing):
//     each cycle a bank examines its next writeback.l2_tag_checks_per_cycle
//     lines, stopping at the first dirty PM line, which it writes back that
//     cycle; the bank is done one cycle after its walk has passed its last
//     line. The warp waits for the slowest bank; a MemBar waits for the
//     write-backs, and also for every write-back another warp or an
//     eviction had started by the walk's end: a line it took is clean when
//     the walk passes, but the L2WB covers it all the same (the refiner's
//     return-time check found MemBars returning before such lines were
//     durable). (GPGPU-Sim also stalls a bank's walk while its miss
//     queue is full and serves no other request at that bank during the
//     walk; neither is modelled.)
//   - PCommit (WriteBackPCT; a no-op under ADR) reaches every memory
//     controller after the L2 latency, waits there until every write
//     acknowledged by a WPQ before it has drained, makes those writes
//     durable, and is acknowledged after the L2 latency again.
//   - Warps are timed a few instructions out of time order (package
//     scope's engine), so a write-back, an L2WB walk or a PCommit may be
//     timed before a store or write-back that happened earlier, or after
//     one that happened later. A write-back carries only the stores made
//     by its cycle (a later store timed before it stays dirty), an L2WB
//     waits for a write-back that carries a store made before its walk
//     ended even if another warp's walk or CLWB, timed first, took the
//     line after that, and a PCommit commits every write that reached its
//     WPQ by its arrival, even one a PCommit timed first but issued later
//     committed (wbTake, wbFlush, wbPCommit).
//   - MemBar waits until the warp's earlier stores have reached the L2 and
//     its write-backs and PCommits have been acknowledged.
//   - The persistency verbs of the other models (DFence, OFence, PRel,
//     PAcq, PBarrier, EpochBarrier) write back every dirty line as an L2WB
//     does, commit under PCT and wait for all of it, so programs written for
//     those models keep their guarantees; SyncThreads and SyncWarp are
//     execution barriers only.
//
// Where the re-study's own GPGPU-Sim (its published artifact, see
// PresetVolta) times things differently, kept as they are here and noted
// for whoever compares the two:
//   - It acknowledges a CLWB at the L2 once its write-back is queued there
//     (was_write_sent ignores write-back events), before the write reaches
//     a WPQ, so its MemBar after a CLWB can return before the line is in
//     the persistence domain. Here a write-back is acknowledged when its
//     WPQ accepts it: a MemBar must not return before the data is durable
//     (the refiner checks that).
//   - Its WPQ is the memory partition's FIFO latency queue, served in
//     order, and holds reads too: a read queued behind a write waits for
//     the write's 600 cycles. Here the WPQ delays no read; reads and writes
//     share only the channel's bus (nvm.shared_bus).
// Launches and the host. A kernel's end writes nothing back: the L2's dirty
// PM lines stay dirty, and the WPQs' uncommitted write-backs uncommitted,
// into the next launch, until a write-back (and under PCT a PCommit) makes
// them durable; that is why the re-study's kernel-level epochs end with an
// L2WB. The backend therefore keeps every persist record from the first
// launch that began with one not yet durable (CrashAt and Durability see
// them all; see compact). What makes data durable from the host is a host
// event that touches PM (CreateRegion, RemoveRegion, CopyIn, and a CPU
// run): the host synchronises with the GPU and flushes its caches, so every
// earlier persist is durable when the event returns (untimed, like all
// host work). A program that must leave its results durable without one
// ends with a kernel that does L2WB, MemBar and, under PCT, PCommit and
// MemBar (the re-study's EP_K epilogue).

// WriteBackConfig holds the parameters of the re-study's write-back
// hardware that no other model uses.
type WriteBackConfig struct {
	// Channels is the number of memory channels (memory controllers, each
	// with a WPQ) the re-study's L2 write-back walk proceeds over in
	// parallel; 0 turns the re-study's write-back GPU off. The re-study's
	// Table I: 32.
	Channels int `json:"channels"`
	// L2BanksPerChannel is the number of L2 banks per channel; an L2WB
	// walks the banks in parallel. Table I: 2.
	L2BanksPerChannel int `json:"l2_banks_per_channel"`
	// L2TagChecksPerCycle is how many lines each L2 bank examines per
	// cycle during an L2WB; a cycle that finds a dirty PM line ends there
	// (it writes that line back). Not in the paper; the re-study's
	// GPGPU-Sim (data_cache::nvm_wb_timing, called once per L2 cycle)
	// examines up to the L2's associativity, 24 lines, per call.
	L2TagChecksPerCycle int `json:"l2_tag_checks_per_cycle"`
	// SectorBytes is the sector of the sectored L2: a write-back sends
	// only the dirty sectors of a line, a write-through store only the
	// sectors it wrote. Not in Table I: GPGPU-Sim 4.0's Volta
	// configuration, which the re-study ran, has 32-byte sectors. 0 writes
	// whole lines.
	SectorBytes int `json:"sector_bytes"`
}

// wbVolta is the write-back hardware of the re-study's Table I.
func wbVolta() WriteBackConfig {
	return WriteBackConfig{Channels: 32, L2BanksPerChannel: 2, L2TagChecksPerCycle: 24, SectorBytes: 32}
}

// validate checks the fields: zero is allowed (a preset without this
// hardware; the backend then assumes one bank examining one line per
// cycle), negative values are not.
func (r WriteBackConfig) validate() error {
	for _, p := range []struct {
		k string
		v int
	}{{"writeback.channels", r.Channels}, {"writeback.l2_banks_per_channel", r.L2BanksPerChannel}, {"writeback.l2_tag_checks_per_cycle", r.L2TagChecksPerCycle}} {
		if p.v < 0 || p.v > 1<<16 {
			return fmt.Errorf("%w: %s: %d, want 0..65536", ErrConfig, p.k, p.v)
		}
	}
	return nil
}

// validateSectors checks writeback.sector_bytes against the line size.
func (r WriteBackConfig) validateSectors(line int) error {
	sb := r.SectorBytes
	if sb != 0 && (sb < 8 || sb&(sb-1) != 0 || sb > line || line/sb > 64) {
		return fmt.Errorf("%w: writeback.sector_bytes: %d, want 0 or a power of two from 8 to l2.line_bytes (%d), at most 64 sectors a line", ErrConfig, sb, line)
	}
	return nil
}

// writeBackHW is the backend's state under the write-back models.
type writeBackHW struct {
	pct bool
	// wt is set while a write-through store instruction is timed.
	wt bool
	// banks and rate shape the L2WB walk.
	banks, rate uint64
	// dirty lists the L2 ways given a dirty PM entry, with the entry, in
	// the order they were dirtied; an item is stale once the way holds
	// another entry.
	dirty []dirtyWay
	// wpq holds, under PCT, the written-back entries not yet committed,
	// with the cycle each reached its WPQ.
	wpq []wpqItem
	// committed holds, under PCT, the entries a PCommit committed that a
	// PCommit timed later but issued earlier may still commit sooner
	// (warps are timed a few instructions out of time order); those
	// committed by the safe time are dropped once the list reaches
	// pruneAt.
	committed []wpqItem
	pruneAt   int
	// wbAck holds, per line, the cycle the latest write-back of the line's
	// dirty data (by any warp, or an eviction) reaches its WPQ, so that a
	// CLWB that finds the line clean, by a warp that does not know which
	// write-back took its stores (ownLine), waits for it; lines whose
	// write-back is in by the safe time are dropped once the map reaches
	// wbPrune. wbAt holds, per entry, the cycle its write-back reaches its
	// WPQ.
	wbAck   map[uint64]uint64
	wbPrune int
	wbAt    []uint64
	// sector is the sector size (0: whole lines); sectors holds each
	// entry's dirty sectors.
	sector  uint64
	sectors map[int32]uint64
	// late holds the entries that a store made later than the entry's
	// first (entry.dirty) joined, with the latest such store's cycle
	// (wbTake, wbFlush).
	late map[int32]uint64
	// rec0 holds, per entry made dirty by a store, a record index no
	// later than its first record's; recT, per record, the cycle of its
	// store (wbTake).
	rec0 []int32
	recT []uint64
	// walk is scratch space for an L2WB's dirty lines.
	walk []walkItem
	// Counts for WriteBackStats.
	evictions, evictedBytes, l2wbs, walkCycles uint64
}

type dirtyWay struct {
	way   int
	entry int32
	line  uint64
}

// walkItem is a dirty line an L2WB walk reaches: its bank and its place in
// the bank's walk.
type walkItem struct {
	bank, pos uint64
	d         dirtyWay
}

type wpqItem struct {
	entry int32
	at    uint64
}

func newWriteBackHW(cfg Config, pct bool) *writeBackHW {
	r := cfg.WriteBack
	banks := uint64(max(r.Channels, 1) * max(r.L2BanksPerChannel, 1))
	return &writeBackHW{pct: pct, banks: banks, rate: uint64(max(r.L2TagChecksPerCycle, 1)),
		sector: uint64(r.SectorBytes), sectors: map[int32]uint64{}, late: map[int32]uint64{}, wbAck: map[uint64]uint64{}}
}

// bytesOf returns how many bytes writing entry e back sends: its dirty
// sectors, or n (the line) without sectors.
func (r *writeBackHW) bytesOf(e int32, n uint64) uint64 {
	if r.sector == 0 {
		return n
	}
	m, ok := r.sectors[e]
	if !ok || m == 0 {
		return n
	}
	return uint64(bits.OnesCount64(m)) * r.sector
}

// sectorMask returns the sectors of line that the step's persists not yet
// timed write.
func (b *Backend) sectorMask(line uint64) uint64 {
	sec := b.rs.sector
	if sec == 0 {
		return 0
	}
	var m uint64
	for i := range b.pending {
		p := &b.pending[i]
		if p.done || p.rec0 < 0 {
			continue
		}
		for r := p.rec0; r < p.rec1; r++ {
			rec := b.records.at(int(r))
			if uint64(rec.addr)>>b.lineShift != line {
				continue
			}
			off := uint64(rec.addr) & (b.lineBytes - 1)
			for s := off / sec; s <= (off+uint64(max(rec.size, 1))-1)/sec; s++ {
				m |= 1 << s
			}
		}
	}
	return m
}

// wbBegin carries the L2's dirty PM lines and the WPQs' uncommitted
// write-backs into the new launch unchanged (a kernel's end writes nothing
// back); it only forgets the dirty-list items that are stale (written back
// or evicted since), so that the list stays as long as the L2.
func (b *Backend) wbBegin() {
	r := b.rs
	r.dirty = slices.DeleteFunc(r.dirty, func(d dirtyWay) bool { return !b.wbDirty(d) })
}

// wbDirty reports whether dirty-list item d still names a dirty way:
// the way holds d's line and entry, and the entry is not written back.
func (b *Backend) wbDirty(d dirtyWay) bool {
	k := b.l2
	return k.entry[d.way] == d.entry && k.tag[d.way] == d.line+1 && k.gen[d.way] == k.curGen &&
		b.entries.at(d.entry).start == noAck
}

// wbCompact reports whether compact may fold every record into the
// durable image and forget the records and entries: only when every record
// is durable. Otherwise a dirty L2 line or an uncommitted write-back still
// holds one, and every record stays (from the first launch that began with
// one not durable), applied in store order by CrashAt, so that a later
// write-back of an older record never overwrites a newer durable one.
// When it reports true it drops the L2's and the WPQs' references to the
// entries.
func (b *Backend) wbCompact() bool {
	for i := b.applied; i < b.records.len(); i++ {
		if b.ackOf(i) == noAck {
			return false
		}
	}
	r := b.rs
	for _, d := range r.dirty {
		if b.l2.entry[d.way] == d.entry {
			b.l2.entry[d.way] = -1 // its records are durable: the line is clean
		}
	}
	r.dirty, r.wpq, r.committed = r.dirty[:0], r.wpq[:0], r.committed[:0]
	clear(r.sectors)
	clear(r.late)
	r.rec0, r.recT, r.wbAt = r.rec0[:0], r.recT[:0], r.wbAt[:0]
	return true
}

// wbHostFlush makes every persist durable now, as a host event that
// touches PM does (see the package notes): the host waits for the GPU and
// flushes its caches, writing back every dirty PM line of the L2 and
// draining the WPQs. Host work is not timed: the write-backs take no cycles
// and count no NVM bytes.
func (b *Backend) wbHostFlush() {
	now := b.Now()
	r := b.rs
	for _, d := range r.dirty {
		if b.wbDirty(d) {
			e := b.entries.at(d.entry)
			e.start, e.ack = now, now
			b.l2.entry[d.way] = -1
			delete(r.late, d.entry)
		}
	}
	for _, w := range r.wpq {
		if e := b.entries.at(w.entry); e.ack == noAck {
			e.ack = now
		}
	}
	r.dirty, r.wpq, r.committed = r.dirty[:0], r.wpq[:0], r.committed[:0]
}

// l2Insert places line in the L2 at cycle t (a fill by an atomic, or a PM
// write passing through) and writes back the dirty volatile line it evicts
// from t; under the write-back models a dirty PM line it evicts is written
// back too. Other models never leave a dirty PM entry in the L2.
func (b *Backend) l2Insert(line, t uint64) int {
	way, v := b.l2Fill(line, t)
	if v.n > 0 {
		b.ms.writeBackDRAM(v.line, v.n, t)
	}
	return way
}

// l2Fill is l2Insert that leaves the write-back of a dirty volatile victim
// to the caller: it returns the way and that victim, whose write-back
// the line waits for (memSystem.toL2, l2Read).
func (b *Backend) l2Fill(line, t uint64) (int, victim) {
	way, old, ve, evicted := b.l2.insert(line)
	var v victim
	if m := b.l2Dirty[way]; m != 0 {
		if evicted {
			v = victim{old, b.dirtyBytes(m)}
		}
		b.l2Dirty[way] = 0
	}
	if evicted && ve >= 0 && b.rs != nil {
		b.wbEvict(ve, t)
	}
	return way, v
}

// wbEvict writes back entry e, whose line the L2 evicted at cycle t,
// if it is dirty. The write-back takes the path of every other one; the
// evicting access does not wait for it (the package notes' write-back
// buffer) and no warp's MemBar does. Under PCT it waits in its WPQ for a
// PCommit like any other.
func (b *Backend) wbEvict(e int32, t uint64) {
	if b.entries.at(e).start != noAck {
		return // written back already
	}
	sm := 0
	if b.curWarp < len(b.warps) {
		sm = b.warps[b.curWarp].sm
	}
	n := b.flushBytes(e)
	ack := b.wbFlush(e, t, sm)
	b.noteWriteBack(b.entries.at(e).line, ack)
	b.rs.evictions++
	b.rs.evictedBytes += n
	if b.rs.pct {
		b.entries.at(e).ack = noAck
		b.rs.wpq = append(b.rs.wpq, wpqItem{entry: e, at: ack})
	}
}

// WriteBackStats are counts of the re-study's write-back hardware, summed
// over the launches since Attach (zero under the other models).
type WriteBackStats struct {
	// Evictions is the number of dirty PM lines the L2 wrote back because
	// a fill evicted them; EvictedBytes the NVM bytes they sent (their
	// dirty sectors), included in Stats.NVMWriteBytes.
	Evictions, EvictedBytes uint64
	// L2WBs is the number of L2WB walks, WalkCycles the cycles the warps
	// issuing them waited for the walks.
	L2WBs, WalkCycles uint64
}

// WriteBackStats returns the counts of the re-study's write-back hardware.
func (b *Backend) WriteBackStats() WriteBackStats {
	if b.rs == nil {
		return WriteBackStats{}
	}
	r := b.rs
	return WriteBackStats{Evictions: r.evictions, EvictedBytes: r.evictedBytes, L2WBs: r.l2wbs, WalkCycles: r.walkCycles}
}

// wbStore times one PM line of a store instruction at cycle t.
func (b *Backend) wbStore(ws *warpState, line uint64, t uint64) (int32, uint64, bool) {
	way := b.l2.lookup(line)
	if way < 0 {
		way = b.l2Insert(line, t) // a dirty victim is written back
	}
	ws.lastAck = max(ws.lastAck, t+b.l2Lat) // the store's own ack from the L2
	mask := b.sectorMask(line)
	if b.rs.wt {
		e := b.newEntry(line)
		b.rs.sectors[e] = mask
		b.entries.at(e).dirty = t
		b.wbWriteBack(ws, e, t)
		return e, t + 1, false
	}
	if e := b.l2.entry[way]; e >= 0 && b.entries.at(e).start == noAck {
		b.rs.sectors[e] |= mask
		// Warps are timed a few instructions out of time order: the entry
		// may hold a store timed before this one but made later in time.
		if ent := b.entries.at(e); t > ent.dirty {
			b.rs.late[e] = max(b.rs.late[e], t)
		} else if t < ent.dirty {
			b.rs.late[e] = max(b.rs.late[e], ent.dirty)
			ent.dirty = t
			b.rs.rec0[e] = min(b.rs.rec0[e], b.stepRec0)
		}
		return e, t + 1, true
	}
	e := b.wbDirtyEntry(way, line, t, b.stepRec0)
	b.rs.sectors[e] = mask
	return e, t + 1, false
}

// wbDirtyEntry makes a dirty entry for line in L2 way way, its first
// store at cycle t and its first record no earlier than rec0.
func (b *Backend) wbDirtyEntry(way int, line, t uint64, rec0 int32) int32 {
	r := b.rs
	e := b.newEntry(line)
	b.entries.at(e).dirty = t
	b.l2.entry[way] = e
	r.dirty = append(r.dirty, dirtyWay{way, e, line})
	for int(e) >= len(r.rec0) {
		r.rec0 = append(r.rec0, 0)
	}
	r.rec0[e] = rec0
	return e
}

// wbStoreCycle notes that record i was stored at cycle t.
func (r *writeBackHW) wbStoreCycle(i int32, t uint64) {
	for int(i) >= len(r.recT) {
		r.recT = append(r.recT, 0)
	}
	r.recT[i] = t
}

// wbTake reports whether a write-back that takes dirty entry e, of
// L2 way way, at cycle t has anything to carry, and makes the entry hold
// only stores made by t. Warps are timed a few instructions out of time
// order, so a warp may take, at its cycle, a line into which a warp timed
// before it stored at a later cycle: at t the line held only the stores
// made by then. A store made later stays dirty in a new entry of the way
// (or, if every store of the entry is later, the line was clean at t and
// the entry stays as it is). Writing back the later stores at t would make
// them durable before they were made, ahead of what their warps had fenced
// before them (the refiner found such crash images); writing the entry
// back only once its latest store was made would make the warp that took
// it wait for stores it never saw.
func (b *Backend) wbTake(e int32, way int, t uint64) bool {
	r := b.rs
	ent := b.entries.at(e)
	if ent.dirty > t {
		return false
	}
	l, ok := r.late[e]
	if !ok || l <= t {
		return true
	}
	delete(r.late, e)
	line := ent.line
	moved := int32(-1)
	var kept uint64 // the sectors the stores made by t wrote
	for i := r.rec0[e]; int(i) < b.records.len(); i++ {
		rec := b.records.at(int(i))
		if rec.entry != e {
			continue
		}
		sec := r.sectorBits(uint64(rec.addr)&(b.lineBytes-1), uint64(rec.size))
		st := r.recT[i]
		if st <= t {
			kept |= sec
			continue
		}
		if moved < 0 {
			moved = b.wbDirtyEntry(way, line, st, i)
			r.sectors[moved] = 0
		} else if d := b.entries.at(moved); st < d.dirty {
			r.late[moved] = max(r.late[moved], d.dirty)
			d.dirty = st
		} else if st > d.dirty {
			r.late[moved] = max(r.late[moved], st)
		}
		rec.entry = moved
		r.sectors[moved] |= sec
	}
	if kept != 0 {
		r.sectors[e] = kept
	}
	return true
}

// sectorBits returns the writeback.sector_bytes sectors of the size bytes at
// offset off of a line; 0 without sectors.
func (r *writeBackHW) sectorBits(off, size uint64) uint64 {
	if r.sector == 0 {
		return 0
	}
	var m uint64
	for s := off / r.sector; s <= (off+max(size, 1)-1)/r.sector; s++ {
		m |= 1 << s
	}
	return m
}

// wbWriteBack writes entry e back from the L2 from cycle t and
// returns the cycle its WPQ acknowledges it. Under PCT the entry is not
// durable until a PCommit commits it.
func (b *Backend) wbWriteBack(ws *warpState, e int32, t uint64) uint64 {
	ack := b.wbFlush(e, t, ws.sm)
	ws.lastAck = max(ws.lastAck, ack)
	if b.rs.pct {
		b.entries.at(e).ack = noAck
		b.rs.wpq = append(b.rs.wpq, wpqItem{entry: e, at: ack})
	}
	return ack
}

// wbFlush writes entry e back, its line taken at cycle t by a warp of
// SM sm (or an eviction), and returns its WPQ's acknowledgement cycle.
//
// A warp's write-back holds only stores made by t (wbTake); an
// eviction's, which no warp waits for, leaves no earlier than the entry's
// latest store (its first, entry.dirty, or a later one in late). And the
// flush log has the write-back outstanding from the entry's first store if
// that is earlier than t, so that an L2WB whose walk ended after that
// store but before t (timed after it: warps are timed a few instructions
// out of time order) waits for the write-back too: had the warps been
// timed in time order, its walk would have taken the line itself (the
// refiner found MemBars after such an L2WB returning early).
func (b *Backend) wbFlush(e int32, t uint64, sm int) uint64 {
	d := b.entries.at(e).dirty
	claim, start := min(t, d), max(t, d)
	r := b.rs
	if l, ok := r.late[e]; ok {
		start = max(start, l)
		delete(r.late, e)
	}
	ack := b.flushAt(e, claim, start, sm)
	for int(e) >= len(r.wbAt) {
		r.wbAt = append(r.wbAt, 0)
	}
	r.wbAt[e] = ack
	return ack
}

// ownLine is a line a warp stored into since it last wrote it back: the
// record of its latest store to the line (whose entry, after any split,
// holds it) and the latest WPQ acknowledgement of the write-backs that
// took its earlier stores to the line.
type ownLine struct {
	line uint64
	rec  int32
	prev uint64
}

// maxOwn is how many lines a warp's rsOwn remembers: a CLWB of a line
// stored into longer ago waits for the line's latest write-back (wbAck).
const maxOwn = 16

// wbOwn notes that record rec is warp ws's latest store to line.
func (b *Backend) wbOwn(ws *warpState, line uint64, rec int32) {
	for i := range ws.rsOwn {
		o := &ws.rsOwn[i]
		if o.line != line {
			continue
		}
		if e := b.records.at(int(o.rec)).entry; b.entries.at(e).start != noAck {
			o.prev = max(o.prev, b.rs.wbAt[e])
		}
		o.rec = rec
		return
	}
	if len(ws.rsOwn) == maxOwn {
		ws.rsOwn = append(ws.rsOwn[:0], ws.rsOwn[1:]...)
	}
	ws.rsOwn = append(ws.rsOwn, ownLine{line: line, rec: rec})
}

// wbOwnAck returns, for a CLWB of line by warp ws, the cycle by which
// the write-backs that took the warp's stores to the line reach their WPQs
// (0 if none is on its way), and forgets the line.
func (b *Backend) wbOwnAck(ws *warpState, line uint64) uint64 {
	for i, o := range ws.rsOwn {
		if o.line != line {
			continue
		}
		ws.rsOwn = append(ws.rsOwn[:i], ws.rsOwn[i+1:]...)
		ack := o.prev
		if e := b.records.at(int(o.rec)).entry; b.entries.at(e).start != noAck {
			ack = max(ack, b.rs.wbAt[e])
		}
		return ack
	}
	// Stores longer ago, or in an earlier launch: the line's latest
	// write-back took them, or an earlier one.
	return b.rs.wbAck[line]
}

// noteWriteBack notes that a write-back of line's dirty data (by a CLWB,
// an L2WB or an eviction; a write-through store carries only its own)
// reaches its WPQ at cycle ack (wbAck).
func (b *Backend) noteWriteBack(line, ack uint64) {
	r := b.rs
	r.wbAck[line] = max(r.wbAck[line], ack)
	if len(r.wbAck) > r.wbPrune {
		// No CLWB issues before the safe time, and a CLWB waits for the
		// L2's reply, later than that, anyway.
		safe := b.safeTime()
		maps.DeleteFunc(r.wbAck, func(_, at uint64) bool { return at <= safe })
		r.wbPrune = 2*len(r.wbAck) + 1024
	}
}

// wbL2WB walks the L2 from cycle t, writing back every dirty PM line,
// and returns when the walk is over (see the package notes: every bank
// walks its lines in parallel, rate lines a cycle, stopping at each dirty
// one).
func (b *Backend) wbL2WB(ws *warpState, t uint64) uint64 {
	r := b.rs
	t0 := t + b.l2Lat // the request reaches the banks
	assoc := uint64(b.l2.assoc)
	// Sets are spread over the banks; within a bank the walk visits set
	// after set, every way of a set: bank line p is way p%assoc of the
	// bank's set p/assoc.
	perBank := (uint64(b.l2.sets) + r.banks - 1) / r.banks * assoc
	r.walk = r.walk[:0]
	for _, d := range r.dirty {
		if !b.wbDirty(d) {
			continue // written back since, or evicted
		}
		set := uint64(d.way) / assoc
		pos := (set/r.banks)*assoc + uint64(d.way)%assoc
		r.walk = append(r.walk, walkItem{bank: set % r.banks, pos: pos, d: d})
	}
	slices.SortFunc(r.walk, func(x, y walkItem) int {
		if x.bank != y.bank {
			return cmp.Compare(x.bank, y.bank)
		}
		return cmp.Compare(x.pos, y.pos)
	})
	// A bank without dirty lines walks all its lines at rate a cycle.
	slowest := (perBank+r.rate-1)/r.rate + 1
	r.dirty = r.dirty[:0]   // what the walk leaves dirty comes back (wbTake)
	ws.rsOwn = ws.rsOwn[:0] // the walk and ackBy below cover them
	for i := 0; i < len(r.walk); {
		bank := r.walk[i].bank
		var cur, calls uint64 // next line to examine; cycles used
		for ; i < len(r.walk) && r.walk[i].bank == bank; i++ {
			w := &r.walk[i]
			calls += (w.pos-cur)/r.rate + 1 // the cycle that finds it
			if at := t0 + calls - 1; b.wbTake(w.d.entry, w.d.way, at) {
				b.noteWriteBack(w.d.line, b.wbWriteBack(ws, w.d.entry, at))
				if b.l2.entry[w.d.way] == w.d.entry {
					b.l2.entry[w.d.way] = -1
				}
			} else {
				r.dirty = append(r.dirty, w.d) // its stores came after the walk passed
			}
			cur = w.pos + 1
		}
		calls += (perBank-cur+r.rate-1)/r.rate + 1 // the rest, and the cycle that reports done
		slowest = max(slowest, calls)
	}
	done := t0 + slowest
	// A line another write-back (another warp's L2WB or CLWB, an eviction)
	// took before the walk reached it is clean, so the walk does not write
	// it again; the L2WB still covers it, so the warp's next MemBar waits
	// for that write-back too.
	ws.lastAck = max(ws.lastAck, b.ackBy(done))
	b.last.Stalls.Epoch += done - t - 1
	r.l2wbs++
	r.walkCycles += done - t
	return done
}

// wbPCommit times a PCommit issued at cycle t: every write a WPQ
// accepted by the time it arrives becomes durable once the queues have
// drained it, and the PCommit is acknowledged then; it returns the cycle
// that acknowledgement is back at the SM. With persist.ack_at_queue a
// write is accepted the NVM write latency before it has drained to the
// media; without, its acceptance cycle already includes that latency.
//
// The PCommit waits for every write accepted by its arrival, those another
// PCommit committed first included: they are in the queues when it
// arrives, and the code after it may rely on them. Warps are timed a few
// instructions out of time order, so a PCommit timed earlier may have been
// issued later: a write it committed is committed again, sooner, by this
// one if it reached its WPQ by this one's arrival (r.committed). Without
// either, a warp's MemBar after its PCommit could return before its own
// write-backs were durable (the refiner's return-time check found both).
func (b *Backend) wbPCommit(t uint64) uint64 {
	r := b.rs
	arrive := t + b.l2Lat
	var drain uint64
	if b.cfg.Persist.AckAtQueue {
		drain = b.nvmWr
	}
	drained := arrive
	for _, q := range [][]wpqItem{r.wpq, r.committed} {
		for _, w := range q {
			if w.at <= arrive {
				drained = max(drained, w.at+drain)
			}
		}
	}
	kept := r.wpq[:0]
	for _, w := range r.wpq {
		if w.at <= arrive {
			b.entries.at(w.entry).ack = drained
			r.committed = append(r.committed, w)
		} else {
			kept = append(kept, w)
		}
	}
	r.wpq = kept
	for _, w := range r.committed {
		if e := b.entries.at(w.entry); w.at <= arrive && e.ack > drained {
			e.ack = drained
		}
	}
	if len(r.committed) > r.pruneAt {
		// No PCommit is issued before the safe time, so none commits
		// sooner, or waits for, what is durable by then.
		safe := b.safeTime()
		r.committed = slices.DeleteFunc(r.committed, func(w wpqItem) bool { return b.entries.at(w.entry).ack <= safe })
		r.pruneAt = 2*len(r.committed) + 64
	}
	b.globalAck = max(b.globalAck, drained)
	return drained + b.l2Lat
}

// wbVerb times a verb under the write-back models.
func (b *Backend) wbVerb(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope, group []pendOp) uint64 {
	st := &b.last.Stalls
	switch kind {
	case pm.OpCLWB:
		// The lanes' lines coalesce like a store's: one request per
		// distinct line, issued a cycle apart.
		b.lines = b.lines[:0]
		for i := range group {
			p := &group[i]
			if p.done || p.kind != kind || p.scope != sc {
				continue
			}
			if l := uint64(p.addr) >> b.lineShift; !slices.Contains(b.lines, l) {
				b.lines = append(b.lines, l)
			}
		}
		for n, line := range b.lines {
			tl := t + uint64(n)
			ws.lastAck = max(ws.lastAck, tl+b.l2Lat)
			if way := b.l2.lookup(line); way >= 0 {
				if e := b.l2.entry[way]; e >= 0 && b.entries.at(e).start == noAck && b.wbTake(e, way, tl) {
					b.noteWriteBack(line, b.wbWriteBack(ws, e, tl))
					if b.l2.entry[way] == e {
						b.l2.entry[way] = -1
					}
				}
			}
			// The warp's stores to the line may have left already, in a
			// write-back another warp's CLWB or L2WB, or an eviction,
			// started, which may still be on its way: the CLWB is
			// acknowledged once it is in.
			ws.lastAck = max(ws.lastAck, b.wbOwnAck(ws, line))
		}
		return t + uint64(max(len(b.lines), 1))
	case pm.OpL2WB:
		return b.wbL2WB(ws, t)
	case pm.OpPCommit:
		if b.rs.pct {
			if ack := b.wbPCommit(t); !b.hooks.earlyPCTMemBar {
				ws.lastAck = max(ws.lastAck, ack)
			}
		}
		return t + 1
	case pm.OpMemBar:
		return waitAcks(t, ws.lastAck, &st.DFence)
	case pm.OpFence:
		if sc >= pm.Device {
			return t + b.l2Lat
		}
		return t + 1
	case pm.OpSyncThreads, pm.OpSyncWarp, pm.OpSFence, pm.OpSetCtx, pm.OpCFence, pm.OpYield:
		return t + 1
	}
	// A persistency verb of another model: write back everything, commit,
	// and wait (see the package's timing notes above).
	d := b.wbL2WB(ws, t)
	d = waitAcks(d, ws.lastAck, &st.DFence)
	if b.rs.pct {
		d = waitAcks(d, b.wbPCommit(d), &st.DFence)
	}
	switch kind {
	case pm.OpPAcq:
		return b.acquire(ws, d, sc, group)
	case pm.OpPRel:
		return max(d, b.persistOps(ws, d, kind, sc, group))
	}
	return d
}
