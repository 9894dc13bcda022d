package crash

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/record"
)

// ErrRefinement: a timing backend made a persist durable before a persist
// the model orders before it (a crash image the model does not allow).
var ErrRefinement = errors.New("crash: timed image not allowed by the model")

// DurabilityBackend is a timed backend that can say when each persist of its
// last launch became durable (hwmodel).
type DurabilityBackend interface {
	TimedBackend
	// Durability calls fn for each persist of the current or last launch,
	// in the order the verbs were reported, split at lines, with the cycle
	// it became durable (math.MaxUint64 if never).
	Durability(fn func(a pm.Addr, size int, ack uint64))
}

// VerbTimer is a timed backend that can say when each verb of its last
// launch returned (hwmodel), once asked to note it.
type VerbTimer interface {
	// SetVerbTimes turns the noting on or off from the next launch.
	SetVerbTimes(on bool)
	// VerbTimes calls fn for each verb of the current or last launch, in
	// the order the verbs were reported to Op, with the cycle at which it
	// returned (math.MaxUint64 if not known).
	VerbTimes(fn func(seq int, done uint64))
}

// Refines checks that the durable cycles acks[i] of the persists of g (in
// g.Persists order) respect g's persist memory order: whenever a persist is
// in a crash image, everything the model orders before it is too, unless a
// later durable write to the same bytes hides it. It returns nil or an
// error wrapping ErrRefinement that names the persist that got ahead, the
// one it overtook, the verb that orders them and the cycle.
//
// This is the refinement relation between a timing model and its
// persistency model: every image CrashAt(c) of the timing model is the image
// of the PMO-closed set of persists durable by c (with hidden persists
// added), a crash state the checker accepts. Durability fences bind at the
// launch's end (everything durable once the launch has drained), which the
// caller checks; mid-launch, crash points are cuts of the PMO, not of the
// order the verbs happened to be recorded in.
func Refines(g *Graph, acks []uint64) error {
	if len(acks) != len(g.Persists) {
		return fmt.Errorf("%w: %d durable cycles for %d persists", ErrState, len(acks), len(g.Persists))
	}
	eff, ordinal, need, from := g.needs(acks)
	for n := range g.Nodes {
		if g.Nodes[n].Kind != NPersist || from[n] < 0 {
			continue
		}
		if i := ordinal[int32(n)]; eff[i] < need[n] {
			return g.refinementError(int32(n), from[n], eff[i], need[n])
		}
	}
	return nil
}

// DurableReturns checks that each durable verb of g (a node marked Durable:
// a DFence, an Epoch barrier, a durable release, a MemBar, an SFence, ...)
// returned only once every persist the model orders before it was durable
// (or hidden by later durable writes to its bytes), given the persists'
// durable cycles acks (in g.Persists order) and each event's return cycle
// done (indexed like g.Events; math.MaxUint64 where unknown). Refines
// checks that crash images are cuts of the PMO; this checks the promise a
// durable verb makes to the code after it, which mid-launch images alone do
// not show.
//
// The persists a durable verb must wait for are its node's predecessors,
// and theirs, as Build made them: the same set a crash state past the verb
// must hold (Graph.Valid). Under a model with volatile write-pending queues
// (Model.VolatileWPQ: WriteBackPCT) that is the coverage rule of the
// volatile WPQ: a MemBar's node names only the persists that the PCommits
// before it committed (its agent's own, and those a PCommit of its agent
// covered: its block's before a block barrier it passed, and earlier
// launches'), not the write-backs it merely saw acknowledged by a WPQ, so
// a MemBar with no PCommit before it waits for nothing, and one after a
// PCommit waits for exactly what that PCommit committed (plus what the
// durable verbs before it, of its own agent or across a barrier, already
// waited for). A legacy durable verb (DFence, ...) under it writes back
// and commits the agent's own persists and waits for those. Under ADR
// (WriteBackADR) a MemBar waits for the write-backs before it.
func DurableReturns(g *Graph, acks, done []uint64) error {
	if len(acks) != len(g.Persists) || len(done) != len(g.Events) {
		return fmt.Errorf("%w: %d durable cycles for %d persists, %d return cycles for %d events", ErrState, len(acks), len(g.Persists), len(done), len(g.Events))
	}
	eff, ordinal, need, from := g.needs(acks)
	for n := range g.Nodes {
		node := &g.Nodes[n]
		if !node.Durable || from[n] < 0 || g.Events[node.Event].Group != nil {
			continue
		}
		if ret := done[node.Event]; ret != math.MaxUint64 && need[n] > ret {
			e, l := &g.Events[node.Event], &g.Events[g.Nodes[from[n]].Event]
			how := "the verb orders it directly"
			switch {
			case !slices.Contains(node.Preds, from[n]):
				how = g.path(from[n], int32(n))
			case g.Model.VolatileWPQ() && e.Op.Kind == pm.OpMemBar:
				how = "a PCommit before the MemBar committed it"
			}
			return fmt.Errorf("%w under %v: %v #%d %v%s returned at cycle %d, but %v #%d %v%s, ordered before it, is durable only at cycle %d (%s)",
				ErrRefinement, g.Model, &e.Agent, e.Seq, &e.Op, atSite(e), ret,
				&l.Agent, l.Seq, &l.Op, atSite(l), eff[ordinal[from[n]]], how)
		}
	}
	return nil
}

// needs returns, given the persists' durable cycles acks: eff, the cycle
// each persist is in the image or hidden by later durable writes to each of
// its bytes; ordinal, each persist node's index in g.Persists; and per
// node, need, the cycle by which every persist ordered before it is in the
// image, and from, the persist that sets it (-1 for none).
func (g *Graph) needs(acks []uint64) (eff []uint64, ordinal map[int32]int, need []uint64, from []int32) {
	// eff[i]: the first cycle persist i is in the image or hidden by later
	// durable writes to each of its bytes.
	eff = slices.Clone(acks)
	later := map[pm.Addr]uint64{} // per byte: least durable cycle of a later write
	for i := len(g.Persists) - 1; i >= 0; i-- {
		p := &g.Nodes[g.Persists[i]].Persist
		hidden := uint64(0)
		for k := range pm.Addr(p.Size) {
			l, ok := later[p.Addr+k]
			if !ok {
				hidden = math.MaxUint64
			} else {
				hidden = max(hidden, l)
			}
		}
		eff[i] = min(eff[i], hidden)
		for k := range pm.Addr(p.Size) {
			if l, ok := later[p.Addr+k]; !ok || acks[i] < l {
				later[p.Addr+k] = acks[i]
			}
		}
	}
	ordinal = make(map[int32]int, len(g.Persists))
	for i, n := range g.Persists {
		ordinal[n] = i
	}
	need = make([]uint64, len(g.Nodes))
	from = make([]int32, len(g.Nodes))
	for n := range g.Nodes {
		from[n] = -1
		for _, p := range g.Nodes[n].Preds {
			t, f := need[p], from[p]
			if g.Nodes[p].Kind == NPersist && eff[ordinal[p]] >= t {
				t, f = eff[ordinal[p]], p
			}
			if f >= 0 && (from[n] < 0 || t > need[n]) {
				need[n], from[n] = t, f
			}
		}
	}
	return eff, ordinal, need, from
}

// refinementError explains that persist node late (durable at lateAt) was
// ordered before node early, which was durable at earlyAt < lateAt.
func (g *Graph) refinementError(early, late int32, earlyAt, lateAt uint64) error {
	e, l := &g.Events[g.Nodes[early].Event], &g.Events[g.Nodes[late].Event]
	at := func(c uint64) string {
		if c == math.MaxUint64 {
			return "never"
		}
		return fmt.Sprintf("at cycle %d", c)
	}
	return fmt.Errorf("%w under %v: %v #%d %v%s is in the image %s (durable, or hidden by a later durable write to its bytes), but %v #%d %v%s, ordered before it, only %s (%s)",
		ErrRefinement, g.Model, &e.Agent, e.Seq, &e.Op, atSite(e), at(earlyAt),
		&l.Agent, l.Seq, &l.Op, atSite(l), at(lateAt), g.path(late, early))
}

// path describes the ordering verbs on a PMO path from node from to node to.
func (g *Graph) path(from, to int32) string {
	prev := map[int32]int32{to: -1}
	queue := []int32{to}
	for len(queue) > 0 && !hasKey(prev, from) {
		n := queue[0]
		queue = queue[1:]
		for _, p := range g.Nodes[n].Preds {
			if !hasKey(prev, p) && p >= from {
				prev[p] = n
				queue = append(queue, p)
			}
		}
	}
	if !hasKey(prev, from) {
		return "ordered, path not found"
	}
	var steps []string
	for n := prev[from]; n >= 0 && n != to; n = prev[n] {
		node := &g.Nodes[n]
		ev := &g.Events[node.Event]
		switch {
		case node.Kind == NPersist:
			steps = append(steps, fmt.Sprintf("persist %v by %v", node.Persist.Addr, &ev.Agent))
		case ev.Group != nil:
			steps = append(steps, fmt.Sprintf("barrier of %d", len(ev.Group)))
		default:
			steps = append(steps, fmt.Sprintf("%v by %v%s", &ev.Op, &ev.Agent, atSite(ev)))
		}
	}
	if len(steps) == 0 {
		return "same bytes, written in this order"
	}
	return "ordered by " + strings.Join(steps, " -> ")
}

func hasKey(m map[int32]int32, k int32) bool { _, ok := m[k]; return ok }

func atSite(ev *record.Event) string {
	if ev.Site == "" {
		return ""
	}
	return " @" + ev.Site
}

// Refiner is a backend wrapper that checks, at the end of every launch, that
// the timed backend it wraps only produces crash images the persistency
// model allows (Refines), that its durable verbs returned only once what
// they order was durable (DurableReturns, when the backend is a VerbTimer),
// and that a sample of its CrashAt images equals the image built from the
// persists it reports durable. It records every verb (package record) to
// build the PMO graph of a window of launches: the launch alone when every
// earlier persist was durable at its start, else every launch since the
// first that began with one not durable (under a write-back model a dirty
// cache line outlives its launch, and a persist of one launch may become
// durable, in its PMO order, in a later one). The inner backend's
// Durability reports the same window. Under a CPU model (X86, COSPlay) it
// checks the CPU runs (package coro) and leaves GPU launches alone; under
// the others, the reverse. Err returns the first failure; a run goes on
// after one.
type Refiner struct {
	*record.Recorder
	inner      DurabilityBackend
	timer      VerbTimer // inner's, if it has one: durable verbs' returns are checked too
	model      Model
	base       *pm.Image
	from       int  // first event of the window
	launchFrom int  // first event of the current launch
	pfrom      int  // first persist of the window
	skip       bool // the launch is not of the model's kind (CPU or GPU)
	launches   int
	images     int
	// returnsChecked counts the launches whose durable verbs' return
	// cycles were checked (DurableReturns).
	returnsChecked int
	err            error
}

// NewRefiner wraps inner; model is the persistency model inner claims to
// implement.
func NewRefiner(inner DurabilityBackend, model Model) *Refiner {
	r := &Refiner{Recorder: record.New(inner, true), inner: inner, model: model}
	if vt, ok := inner.(VerbTimer); ok {
		vt.SetVerbTimes(true)
		r.timer = vt
	}
	return r
}

// Name returns "refine(<inner>)".
func (r *Refiner) Name() string { return "refine(" + r.inner.Name() + ")" }

// Unwrap returns the recorder it wraps.
func (r *Refiner) Unwrap() pm.Backend { return r.Recorder }

// Err returns the first refinement failure, or nil.
func (r *Refiner) Err() error { return r.err }

// Launches returns the number of launches (or CPU runs) checked.
func (r *Refiner) Launches() int { return r.launches }

// ReturnsChecked returns the number of launches whose durable verbs'
// return cycles were checked (DurableReturns): those of a backend that is
// a VerbTimer.
func (r *Refiner) ReturnsChecked() int { return r.returnsChecked }

// Images returns the number of CrashAt images compared.
func (r *Refiner) Images() int { return r.images }

// Begin opens a new window at this launch, with the durable image it
// starts from, if every persist the inner backend reports is durable;
// otherwise (only under a write-back model) the launch joins the current
// window (see Refiner). A host event between launches that makes every
// persist durable (hwmodel's write-back models flush the GPU's caches at
// one that touches PM) thus opens a new window too.
func (r *Refiner) Begin(l pm.Launch) error {
	r.skip = (l.Blocks == 0) != r.model.CPU()
	carried := false
	if r.base != nil && !r.skip && r.model.WriteBack() {
		r.inner.Durability(func(_ pm.Addr, _ int, ack uint64) { carried = carried || ack == math.MaxUint64 })
	}
	r.launchFrom = len(r.Events())
	if !carried {
		r.from, r.pfrom = len(r.Events()), len(r.Persists())
	}
	if err := r.Recorder.Begin(l); err != nil || r.skip || r.err != nil {
		return err
	}
	if carried {
		return nil
	}
	img, err := r.inner.CrashAt(r.inner.Now())
	if err != nil {
		return err
	}
	r.base = img
	return nil
}

// End ends the launch and checks it.
func (r *Refiner) End() (pm.Stats, error) {
	st, err := r.Recorder.End()
	if err != nil || r.skip || r.err != nil {
		return st, err
	}
	r.launches++
	if cerr := r.check(); cerr != nil {
		r.err = fmt.Errorf("launch %d: %w", r.launches, cerr)
	}
	return st, nil
}

func (r *Refiner) check() error {
	events := r.Events()[r.from:]
	persists := r.Persists()[r.pfrom:]
	acks, err := r.acks(persists)
	if err != nil {
		return err
	}
	end := r.inner.Now()
	g := Build(events, r.model)
	// Under a write-back model a persist nothing wrote back may stay in the
	// cache past the launch (and the window); only what a completed
	// durability fence covers must be durable by its end.
	var forced []bool
	if r.model.WriteBack() {
		forced = g.forced(len(g.Events))
	}
	for i, a := range acks {
		if a > end && (forced == nil || forced[g.Persists[i]]) {
			return fmt.Errorf("%w: persist %d (%v) durable at %d, after the launch drained at %d", ErrRefinement, i, persists[i].Addr, a, end)
		}
	}
	if err := Refines(g, acks); err != nil {
		return err
	}
	// Under a volatile WPQ (WriteBackPCT) a MemBar's node names what the
	// PCommits before it committed (see DurableReturns); under a CPU model
	// an SFence's every context's written-back persists, a CFence's its
	// context's.
	if r.timer != nil {
		done, err := r.returns(events, r.launchFrom-r.from)
		if err != nil {
			return err
		}
		if err := DurableReturns(g, acks, done); err != nil {
			return err
		}
		r.returnsChecked++
	}
	// The images: CrashAt must equal the base plus the persists durable by
	// the cycle, at every cycle where the image changes (a sample of them
	// if there are many).
	cycles := slices.Clone(acks)
	slices.Sort(cycles)
	cycles = slices.Compact(cycles)
	// A persist a write-back model never made durable in the launch has
	// no cycle at which the image changes.
	cycles = slices.DeleteFunc(cycles, func(c uint64) bool { return c == math.MaxUint64 })
	const most = 48
	var pick []uint64
	for k := range min(len(cycles), most) {
		c := cycles[k*len(cycles)/min(len(cycles), most)]
		pick = append(pick, c-1, c)
	}
	for _, c := range pick {
		if c < r.inner.LastStart() {
			continue
		}
		got, err := r.inner.CrashAt(c)
		if err != nil {
			return err
		}
		var kept []pm.Persist
		for i, a := range acks {
			if a <= c {
				kept = append(kept, persists[i])
			}
		}
		want, err := record.Image(r.base, kept)
		if err != nil {
			return err
		}
		r.images++
		if !want.Equal(got) {
			return fmt.Errorf("%w: CrashAt(%d) differs from the persists it reports durable by then", ErrRefinement, c)
		}
	}
	return nil
}

// returns maps the inner backend's per-verb return cycles of the current
// launch, whose events start at first, to the window's events: the verbs in
// order; earlier launches' verbs and barrier events (which are not verbs)
// unknown.
func (r *Refiner) returns(events []record.Event, first int) ([]uint64, error) {
	var verbs []uint64
	r.timer.VerbTimes(func(_ int, d uint64) { verbs = append(verbs, d) })
	done := make([]uint64, len(events))
	j := 0
	for i := range events {
		done[i] = math.MaxUint64
		if i < first || events[i].Group != nil {
			continue
		}
		if j == len(verbs) {
			return nil, fmt.Errorf("%w: %s reports %d verb return cycles, the launch recorded more verbs", ErrState, r.inner.Name(), len(verbs))
		}
		done[i] = verbs[j]
		j++
	}
	if j != len(verbs) {
		return nil, fmt.Errorf("%w: %s reports %d verb return cycles for %d verbs", ErrState, r.inner.Name(), len(verbs), j)
	}
	return done, nil
}

// acks maps the inner backend's per-line durability to the recorder's
// per-word persists: both come in the order the verbs were reported, and
// each word lies in one line.
func (r *Refiner) acks(persists []pm.Persist) ([]uint64, error) {
	type span struct {
		a    pm.Addr
		size int
		ack  uint64
	}
	var spans []span
	r.inner.Durability(func(a pm.Addr, size int, ack uint64) { spans = append(spans, span{a, size, ack}) })
	acks := make([]uint64, len(persists))
	j := 0
	var pos pm.Addr
	if len(spans) > 0 {
		pos = spans[0].a
	}
	for i := range persists {
		p := &persists[i]
		if j == len(spans) || p.Addr != pos {
			return nil, fmt.Errorf("%w: %s reports no durability for persist %d at %v (is PM timed as DRAM?)", ErrState, r.inner.Name(), i, p.Addr)
		}
		acks[i] = spans[j].ack
		pos += pm.Addr(p.Size)
		if pos == spans[j].a+pm.Addr(spans[j].size) {
			if j++; j < len(spans) {
				pos = spans[j].a
			}
		}
	}
	if j != len(spans) {
		return nil, fmt.Errorf("%w: %s reports %d persist spans, the recording has fewer", ErrState, r.inner.Name(), len(spans))
	}
	return acks, nil
}
