package txn

import (
	"errors"
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// MaxEpoch is the largest epoch number the epoch status table holds.
const MaxEpoch = maxTagged

// EST is the epoch status table of the scoped persist barrier paper (§8.3). Persist barriers divide a
// program into epochs; an epoch's undo entries are tagged with its number,
// and once every write of the epoch has persisted, its completion is noted
// in the table with one aligned 8-byte store, the table's commit point.
// After a crash, recovery undoes the entries of later epochs and resumes
// from the last completed one.
//
// The table has lanes independent words (one per stream of epochs, e.g. one
// per block, or one for the whole kernel). A word holds the last completed
// epoch (48 bits) and a 16-bit check of the lane and epoch, so a corrupt word
// is detected rather than trusted.
type EST struct {
	r     pm.Range
	lanes int
	w0    pm.Addr
}

// CreateEST creates an epoch status table of lanes lanes in a new region.
func CreateEST(m *pm.Machine, name string, lanes int) (*EST, error) {
	if lanes < 1 || lanes > MaxHCLSlots {
		return nil, fmt.Errorf("%w: %d lanes", ErrBadArg, lanes)
	}
	size := Line + roundUp(uint64(lanes)*8, Line)
	r, err := createRegion(m, name, size, encodeHeader(magicEST, uint64(lanes), size))
	if err != nil {
		return nil, err
	}
	return &EST{r: r, lanes: lanes, w0: r.Base.Add(Line)}, nil
}

// OpenEST opens the epoch status table in region name.
func OpenEST(m *pm.Machine, name string) (*EST, error) {
	r, f, err := openRegion(m, name, magicEST, 2)
	if err != nil {
		return nil, err
	}
	lanes := f[0]
	if lanes < 1 || lanes > MaxHCLSlots || f[1] != Line+roundUp(lanes*8, Line) || f[1] > r.Size {
		return nil, fmt.Errorf("%w: region %q: %d lanes in %d bytes", ErrCorrupt, name, lanes, f[1])
	}
	return &EST{r: r, lanes: int(lanes), w0: r.Base.Add(Line)}, nil
}

// Lanes returns the number of lanes.
func (e *EST) Lanes() int { return e.lanes }

func (e *EST) check(x Exec, lane int) error {
	if err := checkExec(x); err != nil {
		return err
	}
	if lane < 0 || lane >= e.lanes {
		return fmt.Errorf("%w: lane %d of %d", ErrBadArg, lane, e.lanes)
	}
	return nil
}

// Complete marks epoch (1..MaxEpoch) of lane complete: one aligned 8-byte
// store, made durable before it returns. The caller orders the epoch's
// writes before it (Exec.Order).
func (e *EST) Complete(x Exec, lane int, epoch uint64) error {
	if err := e.check(x, lane); err != nil {
		return err
	}
	if epoch == 0 || epoch > MaxEpoch {
		return fmt.Errorf("%w: epoch %d (want 1..%d)", ErrBadArg, epoch, uint64(MaxEpoch))
	}
	x.Store64(e.w0.Add(uint64(lane)*8), tagWord('E', uint64(lane), epoch))
	x.Durable()
	return execErr(x)
}

// Last returns the last completed epoch of lane, 0 if none.
func (e *EST) Last(x Exec, lane int) (uint64, error) {
	if err := e.check(x, lane); err != nil {
		return 0, err
	}
	w := x.Load64(e.w0.Add(uint64(lane) * 8))
	if err := execErr(x); err != nil {
		return 0, err
	}
	v, err := untag('E', uint64(lane), w)
	if err != nil {
		return 0, fmt.Errorf("epoch status lane %d: %w", lane, err)
	}
	return v, nil
}

// LastAll returns the last epoch every lane has completed: the minimum.
func (e *EST) LastAll(x Exec) (uint64, error) {
	var low uint64
	for l := 0; l < e.lanes; l++ {
		v, err := e.Last(x, l)
		if err != nil {
			return 0, err
		}
		if l == 0 || v < low {
			low = v
		}
	}
	return low, nil
}

// Check verifies every lane's word.
func (e *EST) Check(x Exec) error {
	if err := checkExec(x); err != nil {
		return err
	}
	var errs []error
	for l := 0; l < e.lanes && len(errs) < maxReported; l++ {
		if _, err := e.Last(x, l); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
