package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// The write-combining L1 of the scoped persist barrier paper's GPU (§3,
// Table 2), for volatile stores, with mem.sfifo_l1 > 0: an L1 keeps the
// lines its SM stores into dirty, tracked by its S-FIFO (Hechtman et al.'s
// synchronization FIFO), one entry per line.
//
//   - A store into a line the S-FIFO tracks joins its entry; the warp goes
//     on at once. A store into another line takes a new entry, and the line
//     a place in the L1 (without reading it: later loads of it hit); when
//     the S-FIFO is full its head leaves first: the line is written to the
//     L2 over the SM's port, and the store waits until it has left.
//   - A release of device or system scope (a fence, a PRel, a persist or
//     epoch barrier of that scope) writes every tracked line to the L2 and
//     waits until they are there; so does the kernel's end.
//   - Under ScopedBarrier a PM store's new dirty line takes an S-FIFO
//     entry as well as its NVW-FIFO entry (the S-FIFO tracks every write):
//     whichever FIFO sends the line on first, it leaves the L1 then.
//   - As for the NVW-FIFOs, the S-FIFO is taken as it stands at the
//     store's cycle: lines first stored later by a warp the engine ran
//     ahead are not in it yet.
//
// Without it (mem.sfifo_l1 = 0, every machine but gope) the L1 writes
// volatile stores through to the L2, as GPGPU-Sim's L1 does for global
// stores.

// wcLine is a dirty line of a write-combining L1.
type wcLine struct {
	line        uint64
	mask        uint64 // written sectors (bit 0 alone without sectors)
	first, last uint64 // its first and latest store
	e           int32  // a PM line's persist entry (ScopedBarrier), else -1
}

// wcStore times volatile line l, sectors mask, stored by warp ws at t into
// its write-combining L1, and returns when the warp may go on.
func (b *Backend) wcStore(ws *warpState, l, mask, t uint64) uint64 {
	s := &b.sms[ws.sm]
	for i := range s.wc {
		if w := &s.wc[i]; w.line == l {
			w.mask |= mask
			w.first, w.last = min(w.first, t), max(w.last, t)
			return t + 1
		}
	}
	start := b.wcRoom(ws.sm, t)
	if s.l1.lookup(l) < 0 {
		// The store allocates its line in the L1 without reading it, so
		// the SM's later loads of it hit there, as they do a PM line's
		// under ScopedBarrier.
		if _, _, ve, evicted := s.l1.insert(l); evicted && ve >= 0 {
			b.pol.evict(ws.sm, ve, start)
		}
	}
	s.wc = append(s.wc, wcLine{line: l, mask: mask, first: start, last: start, e: -1})
	b.last.Stalls.Memory += start - t
	return start + 1
}

// wcRoom makes room in SM sm's S-FIFO at cycle t, sending its head's line
// to the L2 while it is full, and returns when there is room.
func (b *Backend) wcRoom(sm int, t uint64) uint64 {
	s := &b.sms[sm]
	start := t
	for {
		i, n := firstBy(s.wc, t, func(w wcLine) uint64 { return w.first })
		if n < b.cfg.Mem.SFIFOL1 {
			return start
		}
		w := s.wc[i]
		s.wc = append(s.wc[:i], s.wc[i+1:]...)
		start = max(start, b.wcLeave(sm, w, max(t, w.last)))
	}
}

// wcTrackPM puts PM entry e, a new dirty line of SM sm's L1 at cycle t,
// into the S-FIFO too (ScopedBarrier: the S-FIFO tracks every write, the
// NVW-FIFO the persistent ones), and returns when there was room.
func (b *Backend) wcTrackPM(sm int, e int32, t uint64) uint64 {
	if b.cfg.Mem.SFIFOL1 == 0 {
		return t
	}
	start := b.wcRoom(sm, t)
	ent := b.entries.at(e)
	b.sms[sm].wc = append(b.sms[sm].wc, wcLine{line: ent.line, first: ent.dirty, last: ent.dirty, e: e})
	return start
}

// wcLeave writes S-FIFO line w of SM sm to the L2 from cycle t and returns
// when its entry is free: a volatile line once its bytes have left the SM,
// a PM line as its policy lets it leave the L1 (an entry that left the L1
// already costs nothing).
func (b *Backend) wcLeave(sm int, w wcLine, t uint64) uint64 {
	if w.e >= 0 {
		return b.pol.evict(sm, w.e, t)
	}
	left, _ := b.volatileToL2(sm, w.line, w.mask, t)
	return left
}

// wcFlush writes SM sm's dirty volatile lines first stored by t to the L2
// from cycle t and returns when they are all there.
func (b *Backend) wcFlush(sm int, t uint64) uint64 {
	s := &b.sms[sm]
	done := t
	kept := s.wc[:0]
	for _, w := range s.wc {
		if w.first > t {
			kept = append(kept, w) // stored after the release
			continue
		}
		if w.e >= 0 {
			b.pol.evict(sm, w.e, max(t, w.last)) // made visible in the L2 (ScopedBarrier)
			continue
		}
		_, in := b.volatileToL2(sm, w.line, w.mask, max(t, w.last))
		done = max(done, in)
	}
	s.wc = kept
	return done
}

// wcRelease is the S-FIFOs' part of verb kind of scope sc by warp ws at
// t: a release of device or system scope writes the SM's dirty volatile
// lines to the L2 first. It returns when the verb may go on.
func (b *Backend) wcRelease(ws *warpState, t uint64, kind pm.OpKind, sc pm.Scope) uint64 {
	if b.cfg.Mem.SFIFOL1 == 0 || sc < pm.Device {
		return t
	}
	switch kind {
	case pm.OpFence, pm.OpPRel, pm.OpPBarrier, pm.OpEpochBarrier, pm.OpDFence, pm.OpOFence, pm.OpMemBar:
		return b.wcFlush(ws.sm, t)
	}
	return t
}

// volatileToL2 writes volatile line l, sectors mask, from SM sm to the L2
// at cycle t, where it is dirty, and returns when its bytes have left the
// SM and when they are in the L2: after the write-back of the dirty line
// its way held has entered the memory's queue.
func (b *Backend) volatileToL2(sm int, l, mask, t uint64) (left, in uint64) {
	way := b.l2.lookup(l)
	var v victim
	if way < 0 {
		way, v = b.l2Fill(l, t)
	}
	left, in = b.ms.toL2(sm, l, b.dirtyBytes(max(mask, 1)), t, v)
	if b.l2Dirty[way] == 0 {
		if len(b.dirtyWays) >= max(b.dirtyLimit, len(b.l2Dirty)) {
			// Without a flush at every kernel's end (mem.l2_flush_at_end
			// off) the list only grows: keep the ways still dirty, and
			// let it grow to twice those before the next pass.
			b.dirtyWays = b.dirtyWays[:0]
			for w, m := range b.l2Dirty {
				if m != 0 {
					b.dirtyWays = append(b.dirtyWays, int32(w))
				}
			}
			b.dirtyLimit = 2 * len(b.dirtyWays)
		}
		b.dirtyWays = append(b.dirtyWays, int32(way))
	}
	b.l2Dirty[way] |= max(mask, 1)
	return left, in
}
