package crash

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// TimedBackend is a backend that knows when each persist became durable
// (hwmodel): CrashAt returns the durable image at a cycle of the last launch.
type TimedBackend interface {
	pm.Backend
	CrashAt(cycle uint64) (*pm.Image, error)
	LastStart() uint64 // first cycle of the last launch
	Now() uint64       // the cycle by which everything issued is durable
}

// CheckTimed runs w once on a timed backend made by newBackend, then crashes
// it at up to states cycles of the last launch of Run (evenly spaced, plus
// seeded random ones, always including the first and last) and checks the
// recovery of each durable image on the functional backend. Unlike Check it
// explores what one timing model does, not everything a persistency model
// allows.
func CheckTimed(w Workload, newBackend func() (TimedBackend, error), gpu pm.GPULimits, states int, seed uint64) (*Report, error) {
	be, err := newBackend()
	if err != nil {
		return nil, err
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		return nil, err
	}
	if err := w.Setup(m); err != nil {
		return nil, fmt.Errorf("%w: %s setup: %w", ErrWorkload, w.Name(), err)
	}
	if err := w.Run(m); err != nil {
		return nil, fmt.Errorf("%w: %s run: %w", ErrWorkload, w.Name(), err)
	}
	lo, hi := be.LastStart(), be.Now()
	if states < 2 {
		states = 2
	}
	var cycles []uint64
	span := hi - lo
	for i := range states / 2 {
		cycles = append(cycles, lo+span*uint64(i)/uint64(max(states/2-1, 1)))
	}
	rng := rand.New(rand.NewPCG(seed, 0x7153))
	for len(cycles) < states && span > 0 {
		cycles = append(cycles, lo+rng.Uint64N(span+1))
	}
	slices.Sort(cycles)
	cycles = slices.Compact(cycles)
	rec := &Recording{GPU: gpu}
	rep := &Report{Workload: w.Name(), Seed: seed}
	for _, c := range cycles {
		img, err := be.CrashAt(c)
		if err != nil {
			return rep, err
		}
		rep.Checked++
		if err := rec.oracle(w, img); err != nil {
			rep.Violations = append(rep.Violations, Violation{Err: err, Seed: seed,
				Explanation: fmt.Sprintf("%s on %s crashed at cycle %d (launch cycles %d..%d): %v\n", w.Name(), be.Name(), c, lo, hi, err)})
		}
	}
	return rep, nil
}
