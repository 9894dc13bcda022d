package crash

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// cycleCounter wraps a backend and adds up the cycles of every run.
type cycleCounter struct {
	pm.Backend
	cycles uint64
}

// Unwrap returns the counted backend (pm.Wrapper).
func (c *cycleCounter) Unwrap() pm.Backend { return c.Backend }

func (c *cycleCounter) End() (pm.Stats, error) {
	s, err := c.Backend.End()
	c.cycles += s.Cycles
	return s, err
}

// Cycles runs w on a fresh machine over newBackend with the given call sites'
// scopes overridden and returns the simulated cycles of its Run.
func Cycles(w Workload, newBackend func() (pm.Backend, error), sites map[string]pm.Scope) (uint64, error) {
	be, err := newBackend()
	if err != nil {
		return 0, err
	}
	cc := &cycleCounter{Backend: be}
	m, err := pm.NewMachine(cc)
	if err != nil {
		return 0, err
	}
	if len(sites) > 0 {
		m.SetLaunchDefaults(pm.LaunchDefaults{SiteScopes: sites})
	}
	if err := w.Setup(m); err != nil {
		return 0, fmt.Errorf("%w: %s setup: %w", ErrWorkload, w.Name(), err)
	}
	cc.cycles = 0
	if err := w.Run(m); err != nil {
		return 0, fmt.Errorf("%w: %s run: %w", ErrWorkload, w.Name(), err)
	}
	return cc.cycles, nil
}

// Speedups fills in Advice.Speedup: for each site whose recommended scope is
// narrower than its current one, the simulated speedup of the workload on
// newBackend (a timing backend such as hwmodel) with that site alone
// narrowed. Other sites get 1.
func Speedups(w Workload, adv []Advice, newBackend func() (pm.Backend, error)) error {
	base, err := Cycles(w, newBackend, nil)
	if err != nil {
		return err
	}
	for i := range adv {
		adv[i].Speedup = 1
		if adv[i].Recommended() >= adv[i].Current {
			continue
		}
		c, err := Cycles(w, newBackend, map[string]pm.Scope{adv[i].Site: adv[i].Recommended()})
		if err != nil {
			return err
		}
		adv[i].Speedup = float64(base) / float64(max(c, 1))
	}
	return nil
}
