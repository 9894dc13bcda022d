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

// CheckTimed runs w once on a timed backend made by newBackend and crashes
// every GPU launch and CPU run of Run: at up to states cycles of each
// (evenly spaced, plus seeded random ones, always including its first and
// last), or, with states <= 0 and a backend that reports durability
// (DurabilityBackend), at every cycle where the durable image changes. The
// recovery of each durable image is checked on the functional backend.
// Unlike Check it explores what one timing model does, not everything a
// persistency model allows. The report names the backend, and the model it
// times if it says (a Model() method, as hwmodel's backend has).
func CheckTimed(w Workload, newBackend func() (TimedBackend, error), gpu pm.GPULimits, states int, seed uint64) (*Report, error) {
	be, err := newBackend()
	if err != nil {
		return nil, err
	}
	if states <= 0 {
		if _, ok := be.(DurabilityBackend); !ok {
			return nil, fmt.Errorf("%w: %s cannot list the cycles its image changes at; give a number of states", ErrState, be.Name())
		}
	}
	rep := &Report{Workload: w.Name(), Seed: seed, Backend: be.Name()}
	if mb, ok := be.(interface{ Model() Model }); ok {
		rep.Model = mb.Model()
	}
	p := &timedProbe{TimedBackend: be, w: w, rec: &Recording{GPU: gpu}, rep: rep, states: states, rng: rand.New(rand.NewPCG(seed, 0x7153))}
	m, err := pm.NewMachine(p)
	if err != nil {
		return nil, err
	}
	if err := guard("Setup", func() error { return w.Setup(m) }); err != nil {
		return nil, fmt.Errorf("%w: %s setup: %w", ErrWorkload, w.Name(), err)
	}
	p.running = true
	if err := guard("Run", func() error { return w.Run(m) }); err != nil {
		return nil, fmt.Errorf("%w: %s run: %w", ErrWorkload, w.Name(), err)
	}
	if p.err != nil {
		return rep, p.err
	}
	return rep, nil
}

// timedProbe crashes the backend it wraps at the end of every GPU launch
// and CPU run of the workload's Run.
type timedProbe struct {
	TimedBackend
	w       Workload
	rec     *Recording
	rep     *Report
	states  int
	rng     *rand.Rand
	running bool // in Run (Setup's launches are not crashed)
	launch  int
	err     error
}

// Unwrap returns the backend the probe wraps.
func (p *timedProbe) Unwrap() pm.Backend { return p.TimedBackend }

func (p *timedProbe) End() (pm.Stats, error) {
	st, err := p.TimedBackend.End()
	if err != nil || !p.running || p.err != nil {
		return st, err
	}
	p.launch++
	lo, hi := p.LastStart(), p.Now()
	for _, c := range p.cycles(lo, hi) {
		img, err := p.CrashAt(c)
		if err != nil {
			p.err = err
			return st, nil
		}
		p.rep.Checked++
		if err := p.rec.oracle(p.w, img); err != nil {
			p.rep.Violations = append(p.rep.Violations, Violation{Err: err, Seed: p.rep.Seed,
				Explanation: fmt.Sprintf("%s on %s crashed at cycle %d of launch %d (cycles %d..%d): %v\n", p.w.Name(), p.Name(), c, p.launch, lo, hi, err)})
		}
	}
	return st, nil
}

// cycles returns the crash cycles for a launch spanning lo..hi.
func (p *timedProbe) cycles(lo, hi uint64) []uint64 {
	var cycles []uint64
	if p.states <= 0 {
		cycles = append(cycles, lo, hi)
		p.TimedBackend.(DurabilityBackend).Durability(func(_ pm.Addr, _ int, ack uint64) {
			if ack >= lo && ack <= hi {
				cycles = append(cycles, ack)
			}
		})
	} else {
		n := max(p.states, 2)
		span := hi - lo
		for i := range n / 2 {
			cycles = append(cycles, lo+span*uint64(i)/uint64(max(n/2-1, 1)))
		}
		for len(cycles) < n && span > 0 {
			cycles = append(cycles, lo+p.rng.Uint64N(span+1))
		}
	}
	slices.Sort(cycles)
	return slices.Compact(cycles)
}
