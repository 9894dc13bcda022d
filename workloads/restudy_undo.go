package workloads

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// Durable transactions for the re-study's kernels (schemes with Undo set:
// undo_K, undo_C+wt, undo_L+clwb, ...). Every PM word a workload's kernels
// may overwrite has an 8-byte slot in the region <prefix>.undo: the tag of
// the epoch that last logged it (high half) and the word's value before
// that epoch (low half). Before its first store to a word in an epoch, a
// thread writes the slot and makes it durable (written back, MemBar, and
// PCommit on a PCT machine); only then does it store the word. The epoch's
// marker (kernel, block or loop count, see rsState) is its commit point.
// Recovery first rolls back every word whose slot belongs to an epoch
// whose marker is not durable, then re-runs the kernels as usual.
//
// A kernel declares itself idempotent (rsKernel.idempotent) when re-running
// it from any crash state gives the same result without a rollback; under
// "+idem" schemes such kernels skip the log. The crash checker is how a
// declaration is tested: an undo_X+idem scheme that the checker accepts
// for a kernel confirms it.

// rsRange is a writable PM array: its base and its length in 4-byte words.
type rsRange struct {
	base  pm.Addr
	words int
}

// epochTag is the tag of an epoch: the index of its marker in the marker
// region plus one (high 16 bits) and, for a loop epoch, the loop count it
// completes (low 16 bits).
func epochTag(markIdx int, loop uint64) uint32 { return uint32(markIdx+1)<<16 | uint32(loop&0xFFFF) }

// rsLog is one thread's undo log state.
type rsLog struct {
	r    *rsState
	tag  uint32
	loop pm.Addr // the block's loop count (loop epochs), else 0
	mark int     // index of the epoch's marker
}

// slot returns the undo slot of the PM word at a, or false if a is not in a
// writable array.
func (r *rsState) slot(a pm.Addr) (pm.Addr, bool) {
	off := 0
	for _, rg := range r.ranges {
		if a >= rg.base && a < rg.base.Add(uint64(4*rg.words)) {
			return r.undo.Add(uint64(8 * (off + int(a-rg.base)/4))), true
		}
		off += rg.words
	}
	return 0, false
}

// logBefore logs the old values of the words of [a, a+size) that the
// thread's current epoch has not logged yet, durably, before the store.
func (p *Persister) logBefore(a pm.Addr, size int) {
	l, t := p.log, p.T
	if l.tag == 0 {
		var n uint64
		if l.loop != 0 {
			n = t.Load64(l.loop) + 1
		}
		l.tag = epochTag(l.mark, n)
	}
	logged := false
	for w := a &^ 3; w < a.Add(uint64(size)); w += 4 {
		s, ok := l.r.slot(w)
		if !ok {
			continue
		}
		if uint32(t.Load64(s)>>32) == l.tag {
			continue // logged earlier in this epoch
		}
		e := uint64(l.tag)<<32 | uint64(t.Load32(w))
		writeBack64(t, p.S.Mech == WT, s, e)
		logged = true
	}
	if logged {
		p.fence()
	}
}

// rollback restores, on the host, every word whose undo slot belongs to an
// epoch whose marker is not durable. Host writes to PM are durable at
// once, so a crash during the rollback leaves it to be redone.
func (r *rsState) rollback(m *pm.Machine) error {
	if r.undoWords == 0 {
		return nil
	}
	slots, err := readWords(m, r.undo, r.undoWords, 8)
	if err != nil {
		return err
	}
	i := 0
	for _, rg := range r.ranges {
		for w := range rg.words {
			e := slots[i]
			i++
			tag := uint32(e >> 32)
			if tag == 0 {
				continue
			}
			idx, loop := int(tag>>16)-1, uint64(tag&0xFFFF)
			done, err := m.Memory().Load(r.marks.Add(uint64(8*idx)), 8)
			if err != nil {
				return fmt.Errorf("%w: undo slot %d names marker %d: %w", ErrInconsistent, i-1, idx, err)
			}
			if done != 0 {
				continue
			}
			if loop > 0 {
				n, err := m.Memory().Load(r.loops.Add(uint64(8*idx)), 8)
				if err != nil {
					return err
				}
				if n&0xFFFF >= loop {
					continue
				}
			}
			var b [4]byte
			pm.PutLE(b[:], e&0xFFFFFFFF)
			if err := m.CopyIn(rg.base.Add(uint64(4*w)), b[:]); err != nil {
				return err
			}
		}
	}
	return nil
}
