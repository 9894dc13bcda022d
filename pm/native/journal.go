//go:build unix

package native

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/scopedpm/scopedpm/pm"
)

// journal keeps, for PowerCut, the durable image when it started and the
// words each sync made durable after it.
type journal struct {
	base    *pm.Image
	groups  [][]entry // one per sync, in order
	pending []entry   // written to the mapping since the last sync
}

func (j *journal) commit() {
	if len(j.pending) == 0 {
		return
	}
	j.groups = append(j.groups, slices.Clone(j.pending))
	j.pending = j.pending[:0]
}

func (j *journal) addRegion(r *region) {
	j.base.Regions = append(j.base.Regions, pm.RegionImage{Name: r.name, Base: r.base, Data: make([]byte, r.size)})
	slices.SortFunc(j.base.Regions, func(x, y pm.RegionImage) int { return strings.Compare(x.Name, y.Name) })
}

func (j *journal) removeRegion(name string) {
	j.base.Regions = slices.DeleteFunc(j.base.Regions, func(x pm.RegionImage) bool { return x.Name == name })
}

// StartJournal starts recording for PowerCut: the durable image now, then
// the words of every later sync. It needs Options.Journal and restarts the
// journal if one is running.
func (b *Backend) StartJournal() error {
	if !b.opts.Journal {
		return fmt.Errorf("%w: the backend was opened without Options.Journal", ErrJournal)
	}
	if b.closed {
		return ErrClosed
	}
	if b.mode == ModeUnsafeNoSync {
		return fmt.Errorf("%w: unsafe-nosync has no syncs to cut at", ErrJournal)
	}
	b.flush()
	b.jrn = &journal{base: b.durable()}
	return nil
}

// Syncs returns the number of syncs recorded since StartJournal.
func (b *Backend) Syncs() int {
	if b.jrn == nil {
		return 0
	}
	return len(b.jrn.groups)
}

// PowerCut returns the image a power failure during sync number n (0-based,
// counted from StartJournal) would leave: every word synced by syncs 0..n-1,
// plus each word written to the mapping for sync n (and not yet synced)
// with probability 1/2, drawn from seed, applied in the order they were
// written. n == Syncs() gives the image after the last sync.
func (b *Backend) PowerCut(n int, seed uint64) (*pm.Image, error) {
	if b.jrn == nil {
		return nil, fmt.Errorf("%w: no journal (call StartJournal)", ErrJournal)
	}
	if n < 0 || n > len(b.jrn.groups) {
		return nil, fmt.Errorf("%w: sync %d of %d", ErrJournal, n, len(b.jrn.groups))
	}
	img := b.jrn.base.Clone()
	apply := func(e *entry) error { return img.Write(e.addr, e.b[:e.size]) }
	for _, g := range b.jrn.groups[:n] {
		for i := range g {
			if err := apply(&g[i]); err != nil {
				return nil, err
			}
		}
	}
	if n < len(b.jrn.groups) {
		rng := rand.New(rand.NewPCG(seed, uint64(n)))
		g := b.jrn.groups[n]
		for i := range g {
			if rng.IntN(2) == 0 {
				continue
			}
			if err := apply(&g[i]); err != nil {
				return nil, err
			}
		}
	}
	return img, nil
}
