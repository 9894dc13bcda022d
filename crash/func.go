package crash

import (
	"errors"
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// ErrFunc is returned by CheckFunc for a Func without Run or Check.
var ErrFunc = errors.New("crash: incomplete Func")

// ErrViolation wraps the first violation in Report.Err.
var ErrViolation = errors.New("crash: crash consistency violated")

// Func is a workload made of functions, for checking a kernel of one's
// own without writing a type: Setup creates the PM regions and inputs
// (its persists are not crashed), Run launches the kernels whose persists
// are, and Check states the invariant that must hold after any crash the
// model allows, on a machine reopened from the crash image (volatile
// memory is gone: find the regions with OpenRegion). Recover, if set, runs
// first on that machine, as a program's recovery would.
type Func struct {
	// Name names the workload in reports (default "func").
	Name    string
	Setup   func(m *pm.Machine) error
	Run     func(m *pm.Machine) error
	Recover func(m *pm.Machine) error
	Check   func(m *pm.Machine) error
}

// Workload returns f as a Workload, for Record, Check and the rest of
// the package.
func (f Func) Workload() Workload { return funcWorkload{f} }

type funcWorkload struct{ f Func }

func (w funcWorkload) Name() string {
	if w.f.Name == "" {
		return "func"
	}
	return w.f.Name
}

func call(fn func(*pm.Machine) error, m *pm.Machine) error {
	if fn == nil {
		return nil
	}
	return fn(m)
}

func (w funcWorkload) Setup(m *pm.Machine) error   { return call(w.f.Setup, m) }
func (w funcWorkload) Run(m *pm.Machine) error     { return call(w.f.Run, m) }
func (w funcWorkload) Recover(m *pm.Machine) error { return call(w.f.Recover, m) }
func (w funcWorkload) Check(m *pm.Machine) error   { return call(w.f.Check, m) }

// CheckFunc is the one call for checking one's own kernel: it runs f once
// (on the functional backend, with pm.DefaultGPU), explores the crash
// states cfg.Model allows (cfg.States of them, 1000 by default, seeded by
// cfg.Seed), and shrinks and explains every violation found: the lost
// persist, the durable one that got ahead of it, and the verb (or missing
// verb) at the call site in f's code that should have ordered them.
// Report.Err turns the report into an error. cfg.Model must be set (an
// unset or unknown model is an error wrapping ErrModel). A Func that fails
// without a crash is an error wrapping ErrWorkload (and ErrPanic if it
// panicked).
func CheckFunc(f Func, cfg Config) (*Report, error) {
	if f.Run == nil || f.Check == nil {
		return nil, fmt.Errorf("%w: Run and Check are required", ErrFunc)
	}
	cfg.Shrink = true
	return Check(f.Workload(), pm.DefaultGPU(), cfg)
}

// AdviseFunc is the scope advisor for a Func, as CheckFunc is the checker:
// it runs f once (on the functional backend, with pm.DefaultGPU) and
// advises each scoped call site (Recording.Advise).
func AdviseFunc(f Func, cfg Config) ([]Advice, error) {
	rec, err := recordFunc(f, cfg)
	if err != nil {
		return nil, err
	}
	return rec.Advise(f.Workload(), cfg)
}

// MutateFunc is mutation analysis for a Func: it runs f once (on the
// functional backend, with pm.DefaultGPU) and explores each mutant of its
// persistency verbs (Recording.Mutate). The unmutated f must pass first
// (else every mutant would count as killed): if it fails, the error wraps
// ErrViolation.
func MutateFunc(f Func, cfg Config) ([]MutationResult, error) {
	rec, err := recordFunc(f, cfg)
	if err != nil {
		return nil, err
	}
	w := f.Workload()
	base, err := rec.Explore(w, Build(rec.Events, cfg.Model), cfg)
	if err != nil {
		return nil, err
	}
	if err := base.Err(); err != nil {
		return nil, fmt.Errorf("before any mutation: %w", err)
	}
	return rec.Mutate(w, cfg)
}

// recordFunc validates f and cfg's model and records f.
func recordFunc(f Func, cfg Config) (*Recording, error) {
	if f.Run == nil || f.Check == nil {
		return nil, fmt.Errorf("%w: Run and Check are required", ErrFunc)
	}
	if err := validModel(cfg.Model); err != nil {
		return nil, err
	}
	return recordCtx(f.Workload(), pm.DefaultGPU(), cfg.Context)
}

// Err returns nil if r found no violation, else an error wrapping
// ErrViolation with the first violation's explanation.
func (r *Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	v := r.Violations[0]
	where := "under " + r.Model.String()
	switch {
	case r.Backend != "" && r.Model.Valid():
		where += " on " + r.Backend
	case r.Backend != "":
		where = "on " + r.Backend
	}
	if v.Explanation != "" {
		return fmt.Errorf("%w: %s %s, seed %d:\n%s", ErrViolation, r.Workload, where, v.Seed, v.Explanation)
	}
	return fmt.Errorf("%w: %s %s, seed %d: %w", ErrViolation, r.Workload, where, v.Seed, v.Err)
}
