// Package record wraps any pm.Backend with a recorder: every verb each agent
// issues, in the order the verbs took effect, with the agent, its program-order
// index and, on request, the call site. The crash checker builds PMO graphs
// from it; tests compare the recordings of two runs for determinism.
package record

import (
	"bytes"
	"fmt"

	"github.com/scopedpm/scopedpm/internal/callsite"
	"github.com/scopedpm/scopedpm/pm"
)

// Event is one recorded verb, or the opening of a barrier.
type Event struct {
	Agent pm.Agent
	Seq   uint64 // program-order index among the agent's verbs in this run
	Op    pm.Op  // Data is a private copy
	Site  string // "file.go:123" of the kernel's call, if call sites are on
	// Group is set, and Op is zero, for a barrier that opened: the agents
	// that passed it together (Backend.Sync). Agent is the group's last member.
	Group []pm.Agent
	// Launch marks the first event of a run (a kernel launch or CPU run):
	// everything recorded before it happened before everything after.
	Launch bool
}

// String formats the event as one trace line.
func (e *Event) String() string {
	if e.Group != nil {
		return fmt.Sprintf("barrier of %d opened by %v", len(e.Group), &e.Agent)
	}
	s := fmt.Sprintf("%v #%d %v", &e.Agent, e.Seq, &e.Op)
	if e.Site != "" {
		s += " @" + e.Site
	}
	return s
}

// Recorder is a pm.Backend that records every verb and passes every call on
// to the backend it wraps. It asks for every verb (Caps.Ops) whatever the
// inner backend asks.
type Recorder struct {
	inner    pm.Backend
	sites    bool
	events   []Event
	persists []pm.Persist
	seq      map[agentKey]uint64
	begun    bool // a run began and has recorded no event yet
}

type agentKey struct {
	kind pm.AgentKind
	id   int
}

// New returns a recorder around inner. With sites set, each event carries
// the file and line of the kernel code that issued it (slower).
func New(inner pm.Backend, sites bool) *Recorder {
	return &Recorder{inner: inner, sites: sites, seq: map[agentKey]uint64{}}
}

// Events returns the recorded events, in the order the verbs took effect.
func (r *Recorder) Events() []Event { return r.events }

// Persists returns the persist records of the recorded verbs, in the order
// the verbs took effect (each word of a multi-word store is its own record).
func (r *Recorder) Persists() []pm.Persist { return r.persists }

// Reset forgets everything recorded so far.
func (r *Recorder) Reset() {
	r.events, r.persists = nil, nil
	clear(r.seq)
	r.begun = false
}

// Name returns "record(<inner>)".
func (r *Recorder) Name() string { return "record(" + r.inner.Name() + ")" }

// Attach attaches the inner backend and asks for every verb.
func (r *Recorder) Attach(mem *pm.Memory) (pm.Caps, error) {
	caps, err := r.inner.Attach(mem)
	caps.Ops = true
	return caps, err
}

// Unwrap returns the backend the recorder wraps (pm.Wrapper).
func (r *Recorder) Unwrap() pm.Backend { return r.inner }

// Host passes the event on.
func (r *Recorder) Host(ev pm.HostEvent) { r.inner.Host(ev) }

// Begin passes the launch on; the run's first event will be marked Launch.
func (r *Recorder) Begin(l pm.Launch) error {
	r.begun = true
	return r.inner.Begin(l)
}

// push appends ev, marking the first event of a run.
func (r *Recorder) push(ev Event) {
	ev.Launch, r.begun = r.begun, false
	r.events = append(r.events, ev)
}

// Op records the verb and passes it on.
func (r *Recorder) Op(a *pm.Agent, op *pm.Op) {
	k := agentKey{a.Kind, a.ID}
	ev := Event{Agent: *a, Seq: r.seq[k], Op: *op}
	r.seq[k]++
	if op.Data != nil {
		ev.Op.Data = bytes.Clone(op.Data)
	}
	if r.sites {
		ev.Site = callSite()
	}
	r.push(ev)
	op.Split(func(p *pm.Persist) {
		p.Agent, p.Seq = *a, ev.Seq
		r.persists = append(r.persists, *p)
	})
	r.inner.Op(a, op)
}

// Sync records the barrier's opening as an event and passes it on.
func (r *Recorder) Sync(group []*pm.Agent) {
	g := make([]pm.Agent, len(group))
	for i, a := range group {
		g[i] = *a
	}
	r.push(Event{Agent: g[len(g)-1], Group: g})
	r.inner.Sync(group)
}

// Step passes the call on.
func (r *Recorder) Step(w int) uint64 { return r.inner.Step(w) }

// End passes the call on.
func (r *Recorder) End() (pm.Stats, error) { return r.inner.End() }

// Crash passes the call on.
func (r *Recorder) Crash() (*pm.Image, error) { return r.inner.Crash() }

// callSite returns the site of the verb being recorded: the first frame
// outside scopedpm's library (internal/callsite), the same name scope's
// per-site overrides are keyed by.
func callSite() string { return callsite.Site(1) }

// Image returns base with the persists applied in order: the durable image
// of a crash at which exactly those persists had become durable.
func Image(base *pm.Image, persists []pm.Persist) (*pm.Image, error) {
	img := base.Clone()
	for i := range persists {
		if err := img.Apply(&persists[i]); err != nil {
			return nil, fmt.Errorf("record: persist %d: %w", i, err)
		}
	}
	return img, nil
}
