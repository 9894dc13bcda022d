package crash

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"

	"github.com/scopedpm/scopedpm/internal/callsite"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/pm/record"
)

// Workload is a PM program the checker can crash: it sets up its inputs and
// regions, runs (the part whose persists are checked), and after a crash
// recovers from PM alone and checks its invariant (the result is right, or
// a consistent earlier state). Recover and Check run on a fresh machine
// reopened from the crash image; volatile memory is gone.
type Workload interface {
	Name() string
	Setup(m *pm.Machine) error
	Run(m *pm.Machine) error
	Recover(m *pm.Machine) error
	Check(m *pm.Machine) error
}

// Recording is one recorded run of a workload.
type Recording struct {
	Base   *pm.Image      // PM as Setup left it
	Events []record.Event // what Run did
	GPU    pm.GPULimits
	// ctx cancels the launches of recoveries (Check's Config.Context).
	ctx context.Context
}

// Record runs w once on the functional backend under a recorder with call
// sites.
func Record(w Workload, gpu pm.GPULimits) (*Recording, error) {
	return recordCtx(w, gpu, nil)
}

// recordCtx is Record with every launch cancelled once ctx (if not nil) is
// done, as are those of recoveries on the recording (Recording.ctx).
func recordCtx(w Workload, gpu pm.GPULimits, ctx context.Context) (*Recording, error) {
	rec := record.New(functional.New(gpu), true)
	m, err := pm.NewMachine(rec)
	if err != nil {
		return nil, err
	}
	m.SetLaunchDefaults(pm.LaunchDefaults{Context: ctx})
	if err := guard("Setup", func() error { return w.Setup(m) }); err != nil {
		return nil, fmt.Errorf("%w: %s setup: %w", ErrWorkload, w.Name(), err)
	}
	base := m.Memory().Snapshot()
	rec.Reset()
	if err := guard("Run", func() error { return w.Run(m) }); err != nil {
		return nil, fmt.Errorf("%w: %s run: %w", ErrWorkload, w.Name(), err)
	}
	// The uncrashed result must pass the check: otherwise every crash
	// state would be blamed for a plain bug.
	img, err := m.Crash()
	if err != nil {
		return nil, err
	}
	r := &Recording{Base: base, Events: rec.Events(), GPU: gpu, ctx: ctx}
	if err := r.oracle(w, img); err != nil {
		return nil, fmt.Errorf("%w: %s fails its check without a crash: %w", ErrWorkload, w.Name(), err)
	}
	return r, nil
}

// oracle reopens img, recovers and checks. A panic in Recover or Check is
// an error wrapping ErrPanic.
func (r *Recording) oracle(w Workload, img *pm.Image) error {
	m, err := pm.Reopen(img, functional.New(r.GPU))
	if err != nil {
		return err
	}
	m.SetLaunchDefaults(pm.LaunchDefaults{Context: r.ctx})
	if err := guard("Recover", func() error { return w.Recover(m) }); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	return guard("Check", func() error { return w.Check(m) })
}

// located adds to a panic's error (ErrPanic) the crash state it happened
// in and the seed that replays it: a panic has no message of the
// workload's to say where it was.
func (g *Graph) located(err error, s State, seed uint64) error {
	if !errors.Is(err, ErrPanic) {
		return err
	}
	return fmt.Errorf("%w (in %s; replay with seed %d)", err, g.describe(s), seed)
}

// guard calls fn, a workload's function named what, and turns a panic in
// it into an error wrapping ErrPanic that names the panic's site.
func guard(what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s panicked%s: %v", ErrPanic, what, panicSite(), p)
		}
	}()
	return fn()
}

// panicSite returns " at <site>" for the frame that panicked (called from
// the deferred function of guard), or "".
func panicSite() string {
	var pcs [32]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function != "" && !strings.HasPrefix(f.Function, "runtime.") {
			return " at " + callsite.Name(f.Function, f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}

// Strategy chooses which crash states to explore.
type Strategy uint8

// Strategies. Mixed explores growing prefixes (all of them if they fit, a
// tenth of the budget but at most 100, spread evenly), then every allowed
// state if the whole space fits the budget, else single drops
// (Graph.SingleDrops, taken coarse to fine over the run) with three
// quarters of what is left, interleaved three to one with random closed
// states, and random states for the rest.
const (
	Mixed Strategy = iota
	Prefixes
	RandomStates
	Exhaustive
	SingleDrops // each persist lost alone, as late as it can be
	numStrategies
)

// ErrStopped: Config.Context ended Advise or Mutate before an exploration
// could conclude (a mutant that survived so far, a scope that passed so
// far); what was concluded is returned with it.
var ErrStopped = errors.New("crash: stopped by its context")

// ErrStrategy: an unknown strategy name.
var ErrStrategy = errors.New("crash: unknown strategy")

var strategyNames = [...]string{"mixed", "prefix", "random", "exhaustive", "single"}

// String returns the strategy's name as ParseStrategy accepts it (and as
// pmcheck's -strategy flag takes it).
func (s Strategy) String() string {
	if s < numStrategies {
		return strategyNames[s]
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

// ParseStrategy returns the strategy called name (see Strategy.String);
// the error wraps ErrStrategy.
func ParseStrategy(name string) (Strategy, error) {
	for i, n := range strategyNames {
		if n == name {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q (have %s)", ErrStrategy, name, strings.Join(strategyNames[:], ", "))
}

// Config tells Check what to explore.
type Config struct {
	// Model is the persistency model whose crash states are explored. It
	// must be set: the zero Model is an error (ErrModel), not Strict.
	Model    Model
	States   int    // crash states to check at most (default 1000)
	Seed     uint64 // for RandomStates and Mixed
	Strategy Strategy
	// Shrink, if set, shrinks each violation to a minimal set of dropped
	// persists and explains it (costs a few oracle runs each).
	Shrink bool
	// MaxViolations stops the exploration after this many (default 1).
	MaxViolations int
	// Progress, if set, is called after each crash state is checked
	// (Mutate and Advise explore once per mutant, and call it throughout).
	Progress func()
	// Context, if set, bounds the exploration's time: once it is done
	// (context.WithTimeout gives a time limit), Check, Explore and the
	// Func calls stop after the state in progress and Report.Stopped says
	// so; Advise and Mutate, which need whole explorations to conclude,
	// return an error wrapping ErrStopped. Check and the Func calls also
	// cancel the kernels of the recorded run and of its recoveries with
	// it (pm.LaunchDefaults.Context): a kernel that spins and writes, which
	// is no deadlock, fails with an error saying where its threads were. Which states are explored, and
	// in what order, depend on Seed alone (the checker reads no clock), so
	// a replay with more time explores the same states first.
	Context context.Context
}

// cancelled reports whether err comes from a context that ended (a
// recovery's kernels cancelled with Config.Context), not from the
// workload's recovery or check.
func cancelled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// stopped reports whether cfg's context is done.
func (cfg Config) stopped() bool { return cfg.Context != nil && cfg.Context.Err() != nil }

// Violation is a crash state after which recovery failed.
type Violation struct {
	State State
	Err   error // what Recover or Check said
	// Dropped are the persists whose loss (with everything PMO-ordered
	// after them) breaks recovery: minimal if shrunk.
	Dropped []int
	// Explanation is a report a person can act on (set when shrunk).
	Explanation string
	Seed        uint64
}

// Report is the result of Check.
type Report struct {
	Workload string
	// Model is the persistency model explored (Check), or the one the
	// timed backend times (CheckTimed; Unset if it does not say).
	Model Model
	// Backend names the timed backend CheckTimed crashed ("" for Check).
	Backend  string
	Seed     uint64
	Persists int
	Checked  int
	Complete bool // Exhaustive or Mixed covered every allowed state
	// Stopped reports that Config.Context ended the exploration early.
	Stopped    bool
	Violations []Violation
}

// Summary returns "checked N crash states, M violations", and says when
// the time limit stopped the exploration.
func (r *Report) Summary() string {
	s := fmt.Sprintf("checked %d crash states, %d violations", r.Checked, len(r.Violations))
	if r.Stopped {
		s += " (stopped by its context: time limit or cancel)"
	}
	return s
}

// validModel returns nil if m is a model, else an error wrapping ErrModel:
// the zero Model means none was chosen, which is not taken for Strict.
func validModel(m Model) error {
	if m == persistency.Unset {
		return fmt.Errorf("%w: Config.Model is not set; name one (%s)", ErrModel, modelNames())
	}
	if !m.Valid() {
		return fmt.Errorf("%w: %v (have %s)", ErrModel, m, modelNames())
	}
	return nil
}

func modelNames() string {
	var names []string
	for _, m := range Models() {
		names = append(names, m.String())
	}
	return strings.Join(names, ", ")
}

// Check records w and explores its crash states under cfg.Model, which
// must be set: an unset or unknown model is an error wrapping ErrModel.
func Check(w Workload, gpu pm.GPULimits, cfg Config) (*Report, error) {
	if err := validModel(cfg.Model); err != nil {
		return nil, err
	}
	rec, err := recordCtx(w, gpu, cfg.Context)
	if err != nil {
		return nil, err
	}
	return rec.Explore(w, Build(rec.Events, cfg.Model), cfg)
}

// Explore checks crash states of graph g (built from r's events, perhaps
// mutated) with w's oracle. g's model must be valid (ErrModel otherwise).
func (r *Recording) Explore(w Workload, g *Graph, cfg Config) (*Report, error) {
	if err := validModel(g.Model); err != nil {
		return nil, err
	}
	if cfg.States <= 0 {
		cfg.States = 1000
	}
	if cfg.MaxViolations <= 0 {
		cfg.MaxViolations = 1
	}
	rep := &Report{Workload: w.Name(), Model: g.Model, Seed: cfg.Seed, Persists: len(g.Persists)}
	var oerr error
	try := func(s State) bool {
		img, err := g.Image(r.Base, s)
		if err != nil {
			oerr = err
			return false
		}
		rep.Checked++
		if cfg.Progress != nil {
			defer cfg.Progress()
		}
		if err := r.oracle(w, img); err != nil {
			if cancelled(err) {
				// The context stopped the recovery: no verdict on s.
				rep.Checked--
				rep.Stopped = true
				return false
			}
			err = g.located(err, s, cfg.Seed)
			v := Violation{State: s, Err: err, Seed: cfg.Seed}
			for i, k := range s.Kept[:g.issued(s.Point)] {
				if !k {
					v.Dropped = append(v.Dropped, i)
				}
			}
			if cfg.Shrink {
				r.shrink(w, g, &v)
			}
			rep.Violations = append(rep.Violations, v)
		}
		if cfg.stopped() {
			rep.Stopped = true
			return false
		}
		return len(rep.Violations) < cfg.MaxViolations && rep.Checked < cfg.States
	}
	switch cfg.Strategy {
	case Prefixes:
		r.prefixes(g, try)
	case RandomStates:
		r.random(g, cfg.Seed, try)
	case Exhaustive:
		rep.Complete = g.Enumerate(cfg.States, try)
	case SingleDrops:
		g.SingleDrops(cfg.States, try)
	default:
		if r.prefixesWithin(g, mixedPrefixes(cfg.States), try) {
			budget := cfg.States - rep.Checked
			if budget > 0 && g.Enumerate(budget+1, func(State) bool { return true }) {
				// The whole space fits: enumerate it for real.
				rep.Complete = g.Enumerate(cfg.States, try)
			} else {
				r.drops(g, cfg.Seed, max(budget*3/4, 1), try)
			}
		}
	}
	return rep, oerr
}

// prefixesWithin tries at most n prefixes, evenly spread, always including
// the empty and the full one.
func (r *Recording) prefixesWithin(g *Graph, n int, try func(State) bool) bool {
	total := len(g.Persists) + 1
	if n >= total {
		return r.prefixes(g, try)
	}
	n = max(n, 2)
	for i := range n {
		if !try(g.Prefix(i * (total - 1) / (n - 1))) {
			return false
		}
	}
	return true
}

func (r *Recording) prefixes(g *Graph, try func(State) bool) bool {
	for k := 0; k <= len(g.Persists); k++ {
		if !try(g.Prefix(k)) {
			return false
		}
	}
	return true
}

// mixedPrefixes is how many growing prefixes Mixed tries of a budget of
// states: a tenth, at most 100. A prefix never loses a persist ahead of a
// later one, so it finds only bugs that no ordering fixes; past a few
// spread over the run, the budget is better spent on lost persists.
func mixedPrefixes(states int) int { return min(max(states/10, 2), 100) }

// drops is the rest of Mixed: n single drops (Graph.SingleDrops' states,
// taken coarse to fine over the persists so that any part of the budget
// covers the whole run), three for every random closed state, then random
// states only, until try returns false.
func (r *Recording) drops(g *Graph, seed uint64, n int, try func(State) bool) {
	rng := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	total := len(g.Persists)
	k := min(n, total)
	order := coarseToFine(k)
	fences := g.durableFences()
	for i, j := 0, 0; ; i++ {
		if i%4 != 3 && j < len(order) {
			s, err := g.singleDrop(spread(order[j], k, total), fences)
			j++
			if err != nil {
				continue // a fence at the persist's own event forces it
			}
			if !try(s) {
				return
			}
			continue
		}
		if !try(g.Random(rng)) {
			return
		}
	}
}

func (r *Recording) random(g *Graph, seed uint64, try func(State) bool) {
	rng := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	for try(g.Random(rng)) {
	}
}

// shrink reduces v.Dropped to a minimal set whose loss still breaks
// recovery, then explains it.
func (r *Recording) shrink(w Workload, g *Graph, v *Violation) {
	fails := func(drop []int) (State, error, bool) {
		s, err := g.Dropped(v.State.Point, drop)
		if err != nil {
			return s, nil, false
		}
		img, err := g.Image(r.Base, s)
		if err != nil {
			return s, nil, false
		}
		oerr := r.oracle(w, img)
		if cancelled(oerr) {
			return s, nil, false // no verdict: keep what was shown
		}
		if oerr != nil {
			oerr = g.located(oerr, s, v.Seed)
		}
		return s, oerr, oerr != nil
	}
	drop := slices.Clone(v.Dropped)
	if s, err, bad := fails(drop); bad {
		v.State, v.Err = s, err
	} else {
		return // the closure of the drop set is a different state; keep the original
	}
	for i := 0; i < len(drop); {
		cand := slices.Delete(slices.Clone(drop), i, i+1)
		if s, err, bad := fails(cand); bad {
			drop, v.State, v.Err = cand, s, err
			continue
		}
		i++
	}
	v.Dropped = drop
	v.Explanation = r.explain(w, g, v, fails)
}

// explain names, for the first dropped persist, a kept persist that became
// durable without it and why nothing ordered them.
func (r *Recording) explain(w Workload, g *Graph, v *Violation, fails func([]int) (State, error, bool)) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s under %s: %v\n", w.Name(), g.Model, v.Err)
	if len(v.Dropped) == 0 {
		sb.WriteString("  the state drops no persist: recovery fails on the issued prefix alone\n")
		return sb.String()
	}
	d := v.Dropped[0]
	dn := &g.Nodes[g.Persists[d]]
	dev := &g.Events[dn.Event]
	fmt.Fprintf(&sb, "  lost:    persist %v (%d bytes) by %v at %s\n", dn.Persist.Addr, dn.Persist.Size, &dev.Agent, site(dev))
	// A kept persist issued after the lost one whose loss too makes
	// recovery pass is one that became durable without its predecessor.
	// Name first one of the lost persist's own thread, the earliest (the
	// missing ordering closest to the lost write, such as a missing OFence
	// between a node and its link), then those of other threads, latest
	// first (dropping it drops the fewest others with it); prefer one for
	// which a specific verb is to blame over the generic explanations.
	var order []int
	for i := d + 1; i < len(v.State.Kept); i++ {
		if v.State.Kept[i] && g.Events[g.Nodes[g.Persists[i]].Event].Agent == dev.Agent {
			order = append(order, i)
		}
	}
	for i := len(v.State.Kept) - 1; i > d; i-- {
		if v.State.Kept[i] && g.Events[g.Nodes[g.Persists[i]].Event].Agent != dev.Agent {
			order = append(order, i)
		}
	}
	first, firstWhy := -1, ""
	tries := 0
	for _, i := range order {
		if tries++; tries > 64 && first >= 0 {
			break
		}
		if _, _, bad := fails(append(slices.Clone(v.Dropped), i)); bad {
			continue
		}
		why := g.why(dn.Event, g.Nodes[g.Persists[i]].Event)
		if first < 0 {
			first, firstWhy = i, why
		}
		if !strings.HasPrefix(why, "no release by") && !strings.HasPrefix(why, "no ordering verb") {
			first, firstWhy = i, why
			break
		}
	}
	if first >= 0 {
		xn := &g.Nodes[g.Persists[first]]
		xev := &g.Events[xn.Event]
		fmt.Fprintf(&sb, "  durable: persist %v by %v at %s, issued after it but not ordered after it\n", xn.Persist.Addr, &xev.Agent, site(xev))
		sb.WriteString("  because: " + firstWhy + "\n")
		return sb.String()
	}
	// No single one: find a smallest set of later durable persists whose
	// loss too makes recovery pass (with the lost one gone, any of them
	// durable breaks it), and name each.
	if len(order) > 64 {
		order = order[:64]
	}
	set := slices.Clone(order)
	if len(set) > 0 {
		if _, _, bad := fails(append(slices.Clone(v.Dropped), set...)); !bad {
			for i := 0; i < len(set); {
				cand := slices.Delete(slices.Clone(set), i, i+1)
				if _, _, bad := fails(append(slices.Clone(v.Dropped), cand...)); !bad {
					set = cand
					continue
				}
				i++
			}
			slices.Sort(set)
			fmt.Fprintf(&sb, "  durable: any of %d persists, each issued after it but not ordered after it:\n", len(set))
			for _, i := range set {
				xn := &g.Nodes[g.Persists[i]]
				xev := &g.Events[xn.Event]
				fmt.Fprintf(&sb, "    persist %v by %v at %s\n", xn.Persist.Addr, &xev.Agent, site(xev))
				sb.WriteString("      because: " + g.why(dn.Event, xn.Event) + "\n")
			}
			return sb.String()
		}
	}
	sb.WriteString("  no set of later durable persists depends on it: recovery fails with it lost whatever else persisted\n")
	return sb.String()
}

func site(ev *record.Event) string {
	if ev.Site == "" {
		return "(no call site)"
	}
	return ev.Site
}

// why explains why event a (a persist) is not PMO-ordered before event x.
func (g *Graph) why(a, x int) string {
	ea, ex := &g.Events[a], &g.Events[x]
	if g.Model.WriteBack() {
		return g.wbWhy(a, x)
	}
	if ea.Agent.Kind == ex.Agent.Kind && ea.Agent.ID == ex.Agent.ID {
		if ea.Agent.Kind == pm.CPUTask && (g.Model == X86 || g.Model == COSPlay) {
			line := ea.Op.Addr &^ (lineSize - 1)
			flushed := false
			for i := a + 1; i < x; i++ {
				e := &g.Events[i]
				if e.Agent == ea.Agent && e.Op.Kind == pm.OpCLWB && e.Op.Addr&^(lineSize-1) == line {
					flushed = true
				}
				if e.Agent == ea.Agent && cpuFence(e.Op.Kind) && !flushed {
					return fmt.Sprintf("its line %v was not written back (no CLWB) before the %s at %s", line, e.Op.Kind, site(e))
				}
			}
		}
		cpu := ea.Agent.Kind == pm.CPUTask
		for i := a + 1; i < x; i++ {
			e := &g.Events[i]
			if e.Agent != ea.Agent || e.Group != nil || !isOrdering(e.Op.Kind) {
				continue
			}
			if !cpu {
				return fmt.Sprintf("the same thread's %s at %s does not order them under %s", e.Op.Kind, site(e), g.Model)
			}
			if e.Op.Kind == pm.OpCFence && g.Model.Contexts() {
				if ctx := g.contextAt(a); ctx != e.Op.Value {
					return fmt.Sprintf("the same task's CFence(%d) at %s fences context %d, not context %d of the lost persist (SetCtx before its store)",
						e.Op.Value, site(e), e.Op.Value, ctx)
				}
			}
			return fmt.Sprintf("the same task's %s at %s does not order them under %s", e.Op.Kind, site(e), g.Model)
		}
		if cpu {
			return fmt.Sprintf("no ordering verb (SFence, CFence, ...) between them in %v", &ea.Agent)
		}
		return fmt.Sprintf("no ordering verb (OFence, DFence, ...) between them in %v", &ea.Agent)
	}
	if ea.Agent.Kind == pm.CPUTask && ex.Agent.Kind == pm.CPUTask {
		return fmt.Sprintf("a task's fences order only its own persists: nothing orders %v's persist before %v's", &ea.Agent, &ex.Agent)
	}
	// Look for a release by a's agent after a that x's agent acquired
	// before x.
	for i := a + 1; i < x; i++ {
		e := &g.Events[i]
		if e.Group != nil || e.Agent != ex.Agent || e.Op.Kind != pm.OpPAcq {
			continue
		}
		from, ok := g.ReadsFrom[i]
		if !ok || from <= a || g.Events[from].Agent != ea.Agent || g.Events[from].Op.Kind != pm.OpPRel {
			continue
		}
		rel := &g.Events[from]
		need := narrowestCovering(&ea.Agent, &ex.Agent)
		switch {
		case !rel.Op.Scope.Covers(&ea.Agent, &ex.Agent) && !e.Op.Scope.Covers(&ea.Agent, &ex.Agent):
			return fmt.Sprintf("PRel.%s at %s is too narrow, and so is PAcq.%s at %s: %v and %v need %s scope",
				rel.Op.Scope, site(rel), e.Op.Scope, site(e), &ea.Agent, &ex.Agent, need)
		case !rel.Op.Scope.Covers(&ea.Agent, &ex.Agent):
			return fmt.Sprintf("PRel.%s at %s is too narrow: %v and %v need %s scope (PAcq.%s at %s)",
				rel.Op.Scope, site(rel), &ea.Agent, &ex.Agent, need, e.Op.Scope, site(e))
		case !e.Op.Scope.Covers(&ea.Agent, &ex.Agent):
			return fmt.Sprintf("PAcq.%s at %s is too narrow: %v and %v need %s scope (PRel.%s at %s)",
				e.Op.Scope, site(e), &ea.Agent, &ex.Agent, need, rel.Op.Scope, site(rel))
		}
	}
	// The first persist barrier of a's thread after its persist, if its
	// scope does not reach x's thread (with a narrow barrier, x's thread
	// need not wait for it, so it may come after x).
	for i := a + 1; i < len(g.Events); i++ {
		e := &g.Events[i]
		if e.Group != nil || e.Agent != ea.Agent || e.Op.Kind != pm.OpPBarrier {
			continue
		}
		if !e.Op.Scope.Covers(&ea.Agent, &ex.Agent) {
			return fmt.Sprintf("PBarrier.%s at %s is too narrow: %v and %v need %s scope",
				e.Op.Scope, site(e), &ea.Agent, &ex.Agent, narrowestCovering(&ea.Agent, &ex.Agent))
		}
		break
	}
	why := fmt.Sprintf("no release by %v after its persist is acquired by %v before its persist", &ea.Agent, &ex.Agent)
	// Name the verb between them that a reader may have taken for an
	// ordering one (a block barrier, a fence of the wrong kind).
	for i := a + 1; i < x; i++ {
		e := &g.Events[i]
		if e.Group == nil && e.Agent == ea.Agent && (isOrdering(e.Op.Kind) || e.Op.Kind == pm.OpSyncThreads || e.Op.Kind == pm.OpSyncWarp) {
			return fmt.Sprintf("%s; the %s at %s between them does not order them under %s", why, e.Op.Kind, site(e), g.Model)
		}
	}
	return why
}

// contextAt returns the persist context (SetCtx) event a's agent was in
// when it issued a: 0 before any SetCtx.
func (g *Graph) contextAt(a int) uint64 {
	for i := a - 1; i >= 0; i-- {
		e := &g.Events[i]
		if e.Agent == g.Events[a].Agent && e.Group == nil && e.Op.Kind == pm.OpSetCtx {
			return e.Op.Value
		}
	}
	return 0
}

func isOrdering(k pm.OpKind) bool {
	switch k {
	case pm.OpOFence, pm.OpDFence, pm.OpPRel, pm.OpPAcq, pm.OpPBarrier, pm.OpEpochBarrier:
		return true
	}
	return cpuFence(k)
}

// cpuFence reports whether k is a CPU task's persist fence.
func cpuFence(k pm.OpKind) bool {
	switch k {
	case pm.OpSFence, pm.OpCFence, pm.OpPersistBarrier, pm.OpJoinStrand:
		return true
	}
	return false
}

// narrowestCovering returns the narrowest persistency scope (thread, block,
// device, system: the papers have no warp-scope persistency verbs) that
// covers both agents.
func narrowestCovering(a, b *pm.Agent) pm.Scope {
	for _, s := range []pm.Scope{pm.Thread, pm.Block, pm.Device} {
		if s.Covers(a, b) {
			return s
		}
	}
	return pm.System
}

// Mutant is a change to the persistency verbs at one call site.
type Mutant struct {
	Site  string
	Kind  pm.OpKind // the verb at the site
	From  pm.Scope
	To    pm.Scope // narrower scope; ignored when Drop
	Drop  bool     // remove the verb (an OFence, a CPU fence or CLWB)
	Valid bool
}

// String describes the mutant.
func (m Mutant) String() string {
	if m.Drop {
		return fmt.Sprintf("drop %s at %s", m.Kind, m.Site)
	}
	return fmt.Sprintf("%s at %s: %s -> %s", m.Kind, m.Site, m.From, m.To)
}

// Apply returns events with the mutant applied.
func (m Mutant) Apply(events []record.Event) []record.Event {
	out := make([]record.Event, 0, len(events))
	for _, e := range events {
		if e.Group == nil && e.Site == m.Site && e.Op.Kind == m.Kind {
			if m.Drop {
				continue
			}
			e.Op.Scope = m.To
		}
		out = append(out, e)
	}
	return out
}

// Mutants lists, for every call site of a scoped verb (PRel, PAcq,
// PBarrier) each narrower scope, and for every site of an OFence or of a
// CPU task's fence or CLWB (SFence, CFence, PersistBarrier, JoinStrand,
// CLWB) its removal, in order of first appearance.
func Mutants(events []record.Event) []Mutant {
	var out []Mutant
	seen := map[string]bool{}
	for _, e := range events {
		if e.Group != nil || e.Site == "" {
			continue
		}
		key := e.Site + "/" + e.Op.Kind.String()
		if seen[key] {
			continue
		}
		switch e.Op.Kind {
		case pm.OpPRel, pm.OpPAcq, pm.OpPBarrier:
			seen[key] = true
			for s := e.Op.Scope; s > pm.Thread; {
				s--
				if s == pm.Warp {
					continue // warp scope is not a persistency scope in the papers
				}
				out = append(out, Mutant{Site: e.Site, Kind: e.Op.Kind, From: e.Op.Scope, To: s})
			}
		case pm.OpOFence, pm.OpSFence, pm.OpCFence, pm.OpPersistBarrier, pm.OpJoinStrand, pm.OpCLWB:
			seen[key] = true
			out = append(out, Mutant{Site: e.Site, Kind: e.Op.Kind, Drop: true})
		}
	}
	return out
}

// MutationResult says whether exploration killed a mutant.
type MutationResult struct {
	Mutant  Mutant
	Killed  bool
	Checked int
	Example string // the first violation's explanation
}

// Mutate explores each mutant of r under cfg and reports which are killed
// (a violation found).
func (r *Recording) Mutate(w Workload, cfg Config) ([]MutationResult, error) {
	if err := validModel(cfg.Model); err != nil {
		return nil, err
	}
	var out []MutationResult
	for _, m := range Mutants(r.Events) {
		g := Build(m.Apply(r.Events), cfg.Model)
		rep, err := r.Explore(w, g, cfg)
		if err != nil {
			return out, err
		}
		res := MutationResult{Mutant: m, Killed: len(rep.Violations) > 0, Checked: rep.Checked}
		if rep.Stopped && !res.Killed {
			return out, fmt.Errorf("%w: %d of %d mutants explored: %w", ErrStopped, len(out), len(Mutants(r.Events)), cfg.Context.Err())
		}
		if res.Killed {
			res.Example = rep.Violations[0].Explanation
			if res.Example == "" {
				res.Example = rep.Violations[0].Err.Error()
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// Advice is the scope advisor's verdict on one call site.
type Advice struct {
	Site    string
	Kind    pm.OpKind
	Current pm.Scope
	// Floor is the narrowest scope that still covers every pair of threads
	// that synchronised through this site in the recording: narrower would
	// break visibility (the acquire could read a stale flag on hardware),
	// whatever persistence needs. The advisor never goes below it.
	Floor pm.Scope
	// Narrowest is the narrowest scope under which every explored crash
	// state still recovers: when the current scopes pass, the narrowest at
	// or below Current (Current if none narrower does), the other sites
	// unchanged; when they fail (Fails), the narrowest at or above Floor,
	// the other scoped sites at the scopes that made the program pass
	// (possibly wider than Current: the advice then widens). If no scope
	// makes it pass (the bug is not a scope, such as a missing OFence),
	// Narrowest is Current.
	Narrowest pm.Scope
	// Fails reports that the program as recorded (every site at its
	// current scope) has a crash state that does not recover.
	Fails   bool
	Checked int
	// Speedup is the simulated speedup of adopting the recommended scope at
	// this site (set by Speedups; 1 when nothing changes).
	Speedup float64
}

// Recommended is the scope to use: what persistence needs, but never below
// what visibility needs. It is wider than Current where Current fails.
func (a Advice) Recommended() pm.Scope { return max(a.Narrowest, a.Floor) }

// siteKey names a verb's call site: "site/kind".
func siteKey(site string, kind pm.OpKind) string { return site + "/" + kind.String() }

// withScopes returns events with the scoped verbs at the sites in scopes
// (keyed by siteKey) set to those scopes.
func withScopes(events []record.Event, scopes map[string]pm.Scope) []record.Event {
	out := slices.Clone(events)
	for i := range out {
		e := &out[i]
		if e.Group != nil || e.Site == "" {
			continue
		}
		if s, ok := scopes[siteKey(e.Site, e.Op.Kind)]; ok {
			e.Op.Scope = s
		}
	}
	return out
}

// persistScopes are the scopes the advisor tries, narrowest first: the
// papers have no warp-scope persistency verbs.
var persistScopes = []pm.Scope{pm.Thread, pm.Block, pm.Device, pm.System}

// Advise finds, for each scoped call site (PRel, PAcq, PBarrier), the
// narrowest scope under which every explored crash state recovers, and the
// narrowest that visibility allows (see Advice.Recommended).
//
// If the program passes as recorded, each site with a narrower scope is
// narrowed while it holds, the other sites unchanged. If it fails, every
// scoped site (thread scope included) is first raised to its visibility
// floor, then, while the program still fails, to device and to system
// scope; from the first of these that passes, each site's scope is the
// narrowest, from its floor up, that passes with the other sites at theirs:
// a too-narrow site is advised wider, in agreement with the violation
// report (Check), and a site both ends of a pair need is advised wide at
// both ends.
func (r *Recording) Advise(w Workload, cfg Config) ([]Advice, error) {
	if err := validModel(cfg.Model); err != nil {
		return nil, err
	}
	floors := syncFloors(r.Events)
	explore := func(events []record.Event) (bool, int, error) {
		rep, err := r.Explore(w, Build(events, cfg.Model), cfg)
		if err != nil {
			return false, 0, err
		}
		if rep.Stopped && len(rep.Violations) == 0 {
			return false, rep.Checked, fmt.Errorf("%w: advice unfinished: %w", ErrStopped, cfg.Context.Err())
		}
		return len(rep.Violations) == 0, rep.Checked, nil
	}
	ok, checked, err := explore(r.Events)
	if err != nil {
		return nil, err
	}
	if !ok {
		return r.adviseFailing(floors, checked, explore)
	}
	var out []Advice
	groups := map[string]int{} // site/kind -> index in out
	var muts [][]Mutant
	for _, m := range Mutants(r.Events) {
		if m.Drop {
			continue
		}
		key := siteKey(m.Site, m.Kind)
		i, ok := groups[key]
		if !ok {
			i = len(out)
			groups[key] = i
			out = append(out, Advice{Site: m.Site, Kind: m.Kind, Current: m.From, Narrowest: m.From, Floor: floors[key]})
			muts = append(muts, nil)
		}
		muts[i] = append(muts[i], m)
	}
	for i := range out {
		// Mutants of a site come widest first: narrow while it holds.
		passed := map[pm.Scope]bool{out[i].Current: true}
		for _, m := range muts[i] {
			ok, n, err := explore(m.Apply(r.Events))
			if err != nil {
				return nil, err
			}
			out[i].Checked += n
			if !ok {
				break
			}
			out[i].Narrowest = m.To
			passed[m.To] = true
		}
		// Report only a scope that was checked: the recommendation (raised
		// to the visibility floor) is explored too if it was not.
		if rec := out[i].Recommended(); !passed[rec] {
			m := Mutant{Site: out[i].Site, Kind: out[i].Kind, From: out[i].Current, To: rec, Valid: true}
			ok, n, err := explore(m.Apply(r.Events))
			if err != nil {
				return nil, err
			}
			out[i].Checked += n
			if !ok {
				out[i].Narrowest, out[i].Floor = out[i].Current, out[i].Current
			}
		}
	}
	return out, nil
}

// adviseFailing is Advise for a recording whose current scopes fail (see
// Advise); checked counts the states that showed it.
func (r *Recording) adviseFailing(floors map[string]pm.Scope, checked int, explore func([]record.Event) (bool, int, error)) ([]Advice, error) {
	var out []Advice
	seen := map[string]bool{}
	for _, e := range r.Events {
		if e.Group != nil || e.Site == "" {
			continue
		}
		switch e.Op.Kind {
		case pm.OpPRel, pm.OpPAcq, pm.OpPBarrier:
		default:
			continue
		}
		key := siteKey(e.Site, e.Op.Kind)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, Advice{Site: e.Site, Kind: e.Op.Kind, Current: e.Op.Scope, Narrowest: e.Op.Scope,
			Floor: floors[key], Fails: true})
	}
	if len(out) == 0 {
		return out, nil
	}
	out[0].Checked += checked
	// Find scopes for every site under which the program passes: the
	// floors, then everything at least device, then system scope.
	var fixed map[string]pm.Scope
	for _, least := range []pm.Scope{pm.Thread, pm.Device, pm.System} {
		try := map[string]pm.Scope{}
		for _, a := range out {
			try[siteKey(a.Site, a.Kind)] = max(a.Current, a.Floor, least)
		}
		ok, n, err := explore(withScopes(r.Events, try))
		if err != nil {
			return nil, err
		}
		out[0].Checked += n
		if ok {
			fixed = try
			break
		}
	}
	if fixed == nil {
		return out, nil // no scope fixes it: the report names what does
	}
	// Each site: the narrowest from its floor up that passes with the
	// others at their fixed scopes (the fixed scope itself passes).
	for i := range out {
		key := siteKey(out[i].Site, out[i].Kind)
		for _, s := range persistScopes {
			if s < out[i].Floor || s > fixed[key] {
				continue
			}
			if s == fixed[key] {
				out[i].Narrowest = s
				break
			}
			try := maps.Clone(fixed)
			try[key] = s
			ok, n, err := explore(withScopes(r.Events, try))
			if err != nil {
				return nil, err
			}
			out[i].Checked += n
			if ok {
				out[i].Narrowest = s
				break
			}
		}
	}
	return out, nil
}

// syncFloors returns, per "site/kind" of PRel and PAcq, the narrowest scope
// covering every (releaser, acquirer) pair of different threads that
// synchronised through it: each acquire reads the last write to its flag.
func syncFloors(events []record.Event) map[string]pm.Scope {
	type rel struct {
		site  string
		agent pm.Agent
		ok    bool
	}
	last := map[pm.Addr]rel{}
	floors := map[string]pm.Scope{}
	raise := func(key string, s pm.Scope) { floors[key] = max(floors[key], s) }
	for _, e := range events {
		if e.Group != nil {
			continue
		}
		switch e.Op.Kind {
		case pm.OpPRel:
			last[e.Op.Addr] = rel{e.Site, e.Agent, true}
		case pm.OpStore, pm.OpAtomic:
			for a := e.Op.Addr &^ 3; a < e.Op.Addr+pm.Addr(e.Op.Size); a += 4 {
				if _, ok := last[a]; ok && (e.Op.Kind == pm.OpStore || e.Op.Wrote) {
					last[a] = rel{}
				}
			}
		case pm.OpPAcq:
			r := last[e.Op.Addr]
			if !r.ok || r.agent == e.Agent {
				continue
			}
			s := narrowestCovering(&r.agent, &e.Agent)
			raise(siteKey(r.site, pm.OpPRel), s)
			raise(siteKey(e.Site, pm.OpPAcq), s)
		}
	}
	return floors
}
