//go:build unix

package native

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/scopedpm/scopedpm/pm"
)

// journal keeps, for PowerCut, the durable image when it started, the
// log record each sync made durable after it, and the regions created and
// removed after it, in order with the records.
type journal struct {
	base *pm.Image
	recs [][]byte // one record per sync of the log, in order
	offs []int64  // each record's offset in its log file
	ops  []regionOp
}

// regionOp is a region created (zeroed) or removed after the journal
// started, durable (its directory synced) once the first at records were.
type regionOp struct {
	at     int
	name   string
	base   pm.Addr // created: its base and size
	size   uint64
	remove bool
}

func (j *journal) addRegion(r *region) {
	j.ops = append(j.ops, regionOp{at: len(j.recs), name: r.name, base: r.base, size: r.size})
}

func (j *journal) removeRegion(name string) {
	j.ops = append(j.ops, regionOp{at: len(j.recs), name: name, remove: true})
}

// apply applies op to img.
func (op regionOp) apply(img *pm.Image) {
	img.Regions = slices.DeleteFunc(img.Regions, func(x pm.RegionImage) bool { return x.Name == op.name })
	if !op.remove {
		img.Regions = append(img.Regions, pm.RegionImage{Name: op.name, Base: op.base, Data: make([]byte, op.size)})
		slices.SortFunc(img.Regions, func(x, y pm.RegionImage) int { return strings.Compare(x.Name, y.Name) })
	}
}

// sectorSize is the unit a power failure keeps or loses in PowerCut.
const sectorSize = 512

// StartJournal starts recording for PowerCut: the durable image now, then
// the log record of every later sync. It needs Options.Journal and log
// mode, and restarts the journal if one is running.
func (b *Backend) StartJournal() error {
	if !b.opts.Journal {
		return fmt.Errorf("%w: the backend was opened without Options.Journal", ErrJournal)
	}
	if b.closed {
		return ErrClosed
	}
	if b.mode != ModeLog {
		return fmt.Errorf("%w: %s mode has no log to cut", ErrJournal, b.mode)
	}
	if err := b.commit(); err != nil {
		return err
	}
	j := &journal{base: b.durable()}
	b.jrn = j
	b.plog.mu.Lock()
	b.plog.onSync = func(off int64, rec []byte) {
		j.recs = append(j.recs, slices.Clone(rec))
		j.offs = append(j.offs, off)
	}
	b.plog.mu.Unlock()
	return nil
}

// Syncs returns the number of syncs of the log recorded since
// StartJournal.
func (b *Backend) Syncs() int {
	if b.jrn == nil {
		return 0
	}
	return len(b.jrn.recs)
}

// PowerCut returns the image a power failure during sync number n (0-based,
// counted from StartJournal) would leave, as Open would recover it: every
// record synced by syncs 0..n-1 replayed, then record n with each of its
// 512-byte sectors (aligned in the log file) kept with probability 1/2 and otherwise left as random
// bytes (drawn from seed), put through the log's decoder, which keeps it
// only if it survived whole. n == Syncs() gives the image after the last
// sync.
func (b *Backend) PowerCut(n int, seed uint64) (*pm.Image, error) {
	if b.jrn == nil {
		return nil, fmt.Errorf("%w: no journal (call StartJournal)", ErrJournal)
	}
	if n < 0 || n > len(b.jrn.recs) {
		return nil, fmt.Errorf("%w: sync %d of %d", ErrJournal, n, len(b.jrn.recs))
	}
	img := b.jrn.base.Clone()
	apply := func(rec []byte) error {
		_, _, ents, err := decodeRecord(rec, binary.LittleEndian.Uint64(rec[8:]))
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := img.Write(e.addr, e.data); err != nil {
				return err
			}
		}
		return nil
	}
	ops := b.jrn.ops
	// opsUpTo applies the region operations made before record i.
	opsUpTo := func(i int) {
		for len(ops) > 0 && ops[0].at <= i {
			ops[0].apply(img)
			ops = ops[1:]
		}
	}
	for i, rec := range b.jrn.recs[:n] {
		opsUpTo(i)
		if err := apply(rec); err != nil {
			return nil, fmt.Errorf("%w: synced record: %w", ErrJournal, err)
		}
	}
	opsUpTo(n)
	if n < len(b.jrn.recs) {
		rng := rand.New(rand.NewPCG(seed, uint64(n)))
		torn := slices.Clone(b.jrn.recs[n])
		gen := binary.LittleEndian.Uint64(torn[8:]) // the log's generation, which recovery knows from the header
		// Sectors are aligned in the file, not in the record.
		for s := -int(b.jrn.offs[n] % sectorSize); s < len(torn); s += sectorSize {
			if rng.IntN(2) == 0 {
				for i := max(s, 0); i < min(s+sectorSize, len(torn)); i++ {
					torn[i] = byte(rng.Uint32())
				}
			}
		}
		if _, _, ents, err := decodeRecord(torn, gen); err == nil {
			for _, e := range ents {
				if err := img.Write(e.addr, e.data); err != nil {
					return nil, err
				}
			}
		}
	}
	return img, nil
}
