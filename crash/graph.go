// Package crash is scopedpm's crash-consistency checker. From a recording of
// a run (package record) it builds the persist memory order (PMO) that a
// persistency model guarantees, generates the crash states that order allows
// (growing prefixes, each persist lost alone, random PMO-closed subsets,
// exhaustive enumeration within a budget), runs a workload's recovery and invariant check on each, shrinks
// a failing state to a minimal set of dropped persists, and explains it: the
// persist that became durable without its predecessor, both threads, and the
// verb whose scope was too narrow or that was missing.
//
// The checker reasons about one recorded execution: the visible behaviour of
// a kernel (what its loads and acquires return) does not depend on the scopes
// of its persistency verbs, so the same recording serves every model and
// every mutation of those verbs.
package crash

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/pm/record"
)

// Sentinel errors of package crash.
var (
	// ErrModel: an unknown persistency model name.
	ErrModel = errors.New("crash: unknown model")
	// ErrState: a crash state that the model does not allow.
	ErrState = errors.New("crash: invalid crash state")
	// ErrWorkload: the workload failed outside a crash (setup or the
	// recorded run itself).
	ErrWorkload = errors.New("crash: workload failed")
	// ErrPanic: a workload's function (Setup, Run, Recover, Check)
	// panicked; the checker reports it as a failure of the state it ran
	// on instead of letting it end the process.
	ErrPanic = errors.New("crash: workload panicked")
)

// Model is a persistency model; the rules of each are defined once in
// package persistency.
type Model = persistency.Model

// The models (see package persistency).
const (
	Strict        = persistency.Strict
	Epoch         = persistency.Epoch
	GPM           = persistency.GPM
	SBRP          = persistency.SBRP
	ScopedBarrier = persistency.ScopedBarrier
	X86           = persistency.X86
	COSPlay       = persistency.COSPlay
	None          = persistency.None
	WriteBackADR  = persistency.WriteBackADR
	WriteBackPCT  = persistency.WriteBackPCT
)

// ParseModel returns the model named name (persistency.Parse); the error
// wraps ErrModel.
func ParseModel(name string) (Model, error) {
	m, err := persistency.Parse(name)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrModel, err)
	}
	return m, nil
}

// Models returns every model.
func Models() []Model { return persistency.Models() }

// NodeKind is the kind of a PMO graph node.
type NodeKind uint8

// Node kinds.
const (
	NPersist NodeKind = iota // a persist record: kept or dropped by a crash
	NOrder                   // an ordering point: passed once all its predecessors are durable
)

// Node is a node of the PMO graph. A persist may be durable only if every
// predecessor is (a persist durable, an ordering point passed).
type Node struct {
	Kind  NodeKind
	Event int     // index of the event that made it
	Preds []int32 // predecessors, all earlier in the graph
	// Durable marks a DFence, EpochBarrier or SFence: once the crash point
	// is past its event, its predecessors are durable.
	Durable bool
	Persist pm.Persist // NPersist only
}

// Graph is the PMO of one recording under one model. Nodes are in the order
// their events took effect, which is a topological order of the graph.
type Graph struct {
	Model  Model
	Events []record.Event
	Nodes  []Node
	// Persists lists the persist nodes in order; a State's Kept is indexed
	// like it.
	Persists []int32
	// ReadsFrom maps the event index of each PAcq to the event index of the
	// write it read (-1 for none), whatever the scopes.
	ReadsFrom map[int]int
}

type agentKey struct {
	kind pm.AgentKind
	id   int
}

type ctxState struct {
	after   []int32 // ordering points later persists follow
	flushed []int32 // CPU: persists written back by CLWB, not yet fenced
}

type agentState struct {
	ctxState
	pending   []int32             // GPU: persists since the last full fence
	unflushed map[pm.Addr][]int32 // CPU and write-back GPU: persists by cache line, not written back
	ctx       uint64              // COSPlay: current persist context
	committed []int32             // WriteBackPCT: persists a PCommit of the agent covered
	ctxs      map[uint64]*ctxState
	arrival   int32 // node of the agent's last barrier arrival, or -1
	// arrivalScope is the scope of that arrival's verb.
	arrivalScope pm.Scope
}

type relInfo struct {
	node  int32 // the release's node, or -1 if the last write was not a release
	event int
	scope pm.Scope
	agent pm.Agent
}

type builder struct {
	g        *Graph
	agents   map[agentKey]*agentState
	lastWord map[pm.Addr]*[pm.WordSize]int32 // per 8-byte word, the last persist node of each byte (-1: none)
	lastRel  map[pm.Addr]relInfo
	rs       writeBackState
}

const lineSize = 64 // CPU cache line for CLWB

// Build returns the PMO graph of events under model m.
func Build(events []record.Event, m Model) *Graph {
	b := &builder{
		g:        &Graph{Model: m, Events: events, ReadsFrom: map[int]int{}},
		agents:   map[agentKey]*agentState{},
		lastWord: map[pm.Addr]*[pm.WordSize]int32{},
		lastRel:  map[pm.Addr]relInfo{},
	}
	for i := range events {
		b.event(i)
	}
	return b.g
}

func (b *builder) agent(a *pm.Agent) *agentState {
	k := agentKey{a.Kind, a.ID}
	if b.cpu(a) {
		// The coroutine tasks of one core share its fences, its context
		// register and its contexts' trackers: an SFence orders every
		// written-back persist of the core (SBatch relies on it).
		k.id = a.Unit
	}
	s := b.agents[k]
	if s == nil {
		s = &agentState{unflushed: map[pm.Addr][]int32{}, ctxs: map[uint64]*ctxState{}, arrival: -1}
		b.agents[k] = s
	}
	return s
}

func (b *builder) add(n Node) int32 {
	b.g.Nodes = append(b.g.Nodes, n)
	return int32(len(b.g.Nodes) - 1)
}

// fence adds an ordering point after everything the agent did so far and
// makes its later persists follow it.
func (b *builder) fence(i int, s *agentState, durable bool, extra ...int32) int32 {
	preds := append(append(append([]int32(nil), s.after...), s.pending...), extra...)
	f := b.add(Node{Kind: NOrder, Event: i, Preds: preds, Durable: durable})
	s.after, s.pending = []int32{f}, nil
	return f
}

// cpu reports whether the model orders this agent's persists with
// CLWB/SFence rather than GPU verbs.
func (b *builder) cpu(a *pm.Agent) bool {
	return a.Kind == pm.CPUTask && (b.g.Model == X86 || b.g.Model == COSPlay)
}

func (b *builder) event(i int) {
	ev := &b.g.Events[i]
	m := b.g.Model
	if ev.Launch && m.WriteBack() {
		b.wbLaunch()
	}
	if ev.Group != nil {
		if m.WriteBack() && len(ev.Group) > 0 {
			b.wbBarrier(ev.Group)
		}
		b.barrier(i, ev.Group)
		return
	}
	s := b.agent(&ev.Agent)
	op := &ev.Op
	atomic := int32(-1)
	if m.AtomicsSync() && op.Kind == pm.OpAtomic {
		atomic = b.atomicSync(i, ev, s)
	}
	b.trackWrites(i, ev)
	if atomic >= 0 && op.Wrote {
		b.lastRel[op.Addr] = relInfo{node: atomic, event: i, scope: op.Scope, agent: ev.Agent}
	}
	// A release's own write (a PM flag) persists after what the release
	// orders; every other write persists before the verb's ordering.
	relFlag := op.Kind == pm.OpPRel && op.Persists()
	if op.Persists() && !relFlag {
		b.persists(i, ev, s)
	}
	if m.Unordered() {
		if relFlag {
			b.persists(i, ev, s)
		}
		if op.Kind == pm.OpPAcq {
			b.readsFrom(i, ev)
		}
		return
	}
	if m.WriteBack() && b.wbVerb(i, ev, s) {
		return
	}
	if b.cpu(&ev.Agent) {
		if relFlag {
			b.persists(i, ev, s)
		}
		b.cpuVerb(i, ev, s)
		return
	}
	eff := m.Verb(op.Kind, op.Scope)
	if eff == 0 {
		if relFlag {
			b.persists(i, ev, s)
		}
		return
	}
	var acq []int32
	if eff.Has(persistency.Acquires) {
		if rel, ok := b.readsFrom(i, ev); ok && rel.node >= 0 {
			if !m.Scoped() || (rel.scope.Covers(&rel.agent, &ev.Agent) && op.Scope.Covers(&rel.agent, &ev.Agent)) {
				acq = []int32{rel.node}
			}
		}
	}
	var n int32
	switch {
	case eff.Has(persistency.Orders):
		n = b.fence(i, s, eff.Has(persistency.Durable), acq...)
	case eff.Has(persistency.Releases):
		// A release alone orders the thread's earlier persists before it,
		// not its later ones.
		n = b.add(Node{Kind: NOrder, Event: i, Preds: append(append([]int32(nil), s.after...), s.pending...)})
	case eff.Has(persistency.Acquires):
		// An acquire alone orders the release's persists before the
		// thread's later ones, not its earlier ones.
		n = b.add(Node{Kind: NOrder, Event: i, Preds: acq})
		s.after = append(slices.Clip(s.after), n)
	}
	if relFlag {
		if eff.Has(persistency.Orders) {
			b.persists(i, ev, s) // after the fence, like every later persist
		} else {
			b.persists(i, ev, s, n)
		}
	}
	if eff.Has(persistency.Releases) {
		b.lastRel[op.Addr] = relInfo{node: n, event: i, scope: op.Scope, agent: ev.Agent}
	}
	if eff.Has(persistency.Joins) {
		s.arrival, s.arrivalScope = n, op.Scope
	}
}

// atomicSync makes an atomic, under a model where atomics synchronize
// (Strict), an acquire of the last release or atomic write of its address
// and returns the ordering point that releases the thread's persists so far.
func (b *builder) atomicSync(i int, ev *record.Event, s *agentState) int32 {
	op := &ev.Op
	var preds []int32
	if rel, ok := b.lastRel[op.Addr]; ok && rel.node >= 0 && rel.agent != ev.Agent {
		preds = append(preds, rel.node)
	}
	return b.fence(i, s, false, preds...)
}

// readsFrom records which write the PAcq at event i read.
func (b *builder) readsFrom(i int, ev *record.Event) (relInfo, bool) {
	rel, ok := b.lastRel[ev.Op.Addr]
	if ok {
		b.g.ReadsFrom[i] = rel.event
	} else {
		b.g.ReadsFrom[i] = -1
	}
	return rel, ok
}

// trackWrites keeps lastRel current: any write to a flag's bytes other than
// a release replaces the release as what an acquire would read.
func (b *builder) trackWrites(i int, ev *record.Event) {
	op := &ev.Op
	switch op.Kind {
	case pm.OpStore, pm.OpAtomic:
		if op.Kind == pm.OpAtomic && !op.Wrote || len(b.lastRel) == 0 {
			return
		}
		for a := op.Addr &^ 3; a < op.Addr+pm.Addr(op.Size); a += 4 {
			if _, ok := b.lastRel[a]; ok {
				b.lastRel[a] = relInfo{node: -1, event: i}
			}
		}
	}
}

// persists adds the persist nodes of event i, each after the agent's
// ordering points and after extra.
func (b *builder) persists(i int, ev *record.Event, s *agentState, extra ...int32) {
	m := b.g.Model
	ev.Op.Split(func(p *pm.Persist) {
		p.Agent, p.Seq = ev.Agent, ev.Seq
		word := p.Addr &^ (pm.WordSize - 1)
		last := b.lastWord[word]
		if last == nil {
			last = &[pm.WordSize]int32{-1, -1, -1, -1, -1, -1, -1, -1}
			b.lastWord[word] = last
		}
		var preds []int32
		lo := int(p.Addr - word)
		for k := lo; k < lo+int(p.Size); k++ {
			// Writes to the same bytes persist in the order they took
			// effect; other bytes of the word are independent.
			if l := last[k]; l >= 0 && !slices.Contains(preds, l) {
				preds = append(preds, l)
			}
		}
		switch {
		case m == None:
		case b.cpu(&ev.Agent):
			preds = append(preds, b.cpuCtx(s, s.ctx).after...)
		default:
			preds = append(preds, s.after...)
		}
		preds = append(preds, extra...)
		n := b.add(Node{Kind: NPersist, Event: i, Preds: preds, Persist: *p})
		b.g.Persists = append(b.g.Persists, n)
		for k := lo; k < lo+int(p.Size); k++ {
			last[k] = n
		}
		if m.ProgramOrder() {
			s.after, s.pending = []int32{n}, nil
			return
		}
		if b.cpu(&ev.Agent) {
			line := p.Addr &^ (lineSize - 1)
			s.unflushed[line] = append(s.unflushed[line], n)
		} else if m.WriteBack() {
			b.wbPersist(ev, s, p, n)
		} else {
			s.pending = append(s.pending, n)
		}
	})
}

// cpuCtx returns the state of persist context id (the agent's only context
// unless the model is COSPlay).
func (b *builder) cpuCtx(s *agentState, id uint64) *ctxState {
	if b.g.Model != COSPlay {
		return &s.ctxState
	}
	c := s.ctxs[id]
	if c == nil {
		c = &ctxState{}
		s.ctxs[id] = c
	}
	return c
}

// cpuVerb handles CLWB, SFence, SetCtx, CFence and the strand verbs for a
// CPU task.
func (b *builder) cpuVerb(i int, ev *record.Event, s *agentState) {
	op := &ev.Op
	switch op.Kind {
	case pm.OpCLWB:
		// The write-back belongs to the context the CLWB is issued in
		// (COSPlay §4.3: a clwb carries the context register's cid into
		// the SQ and the WBB, and cfence cid waits for that cid's), not
		// to the contexts its persists were stored in: a CFence of the
		// CLWB's context makes them durable, one of a store's only if the
		// CLWB was issued in that context too.
		line := op.Addr &^ (lineSize - 1)
		c := b.cpuCtx(s, s.ctx)
		c.flushed = append(c.flushed, s.unflushed[line]...)
		delete(s.unflushed, line)
	case pm.OpSFence, pm.OpDFence, pm.OpEpochBarrier, pm.OpJoinStrand:
		// Orders every context's written-back persists.
		ctxs := []*ctxState{&s.ctxState}
		for _, k := range sortedKeys(s.ctxs) {
			ctxs = append(ctxs, s.ctxs[k])
		}
		var preds []int32
		for _, c := range ctxs {
			preds = append(append(preds, c.after...), c.flushed...)
		}
		f := b.add(Node{Kind: NOrder, Event: i, Preds: preds, Durable: true})
		for _, c := range ctxs {
			c.after, c.flushed = []int32{f}, nil
		}
	case pm.OpSetCtx:
		s.ctx = op.Value
	case pm.OpNewStrand:
		// A strand orders like a context of its own (StrandWeaver).
		s.ctx = strandCtx | op.Value
	case pm.OpCFence:
		b.ctxFence(i, b.cpuCtx(s, op.Value), true)
	case pm.OpPersistBarrier:
		b.ctxFence(i, b.cpuCtx(s, s.ctx), false)
	}
}

// strandCtx sets the persist context ids of StrandWeaver's strands apart
// from COSPlay's SetCtx ids.
const strandCtx = 1 << 63

// ctxFence orders context c's written-back persists before its later ones.
func (b *builder) ctxFence(i int, c *ctxState, durable bool) {
	f := b.add(Node{Kind: NOrder, Event: i, Preds: append(append([]int32(nil), c.after...), c.flushed...), Durable: durable})
	c.after, c.flushed = []int32{f}, nil
}

func sortedKeys(m map[uint64]*ctxState) []uint64 { return slices.Sorted(maps.Keys(m)) }

// barrier joins the arrivals of a barrier group that opened at event i.
// The group is who waited together; the scope of the members' verbs says
// whose persists are ordered: a barrier whose scope a mutation (or a site
// override) narrowed below its group joins each block (or warp) apart.
func (b *builder) barrier(i int, group []pm.Agent) {
	sc := pm.System
	for k := range group {
		s := b.agent(&group[k])
		if s.arrival < 0 {
			return // a barrier this model does not order persists by
		}
		sc = min(sc, s.arrivalScope)
	}
	unit := func(a *pm.Agent) int {
		switch sc {
		case pm.Thread:
			return a.ID
		case pm.Warp:
			return a.Warp
		case pm.Block:
			return a.Block
		}
		return 0
	}
	joins := map[int]int32{}
	for k := range group {
		u := unit(&group[k])
		if _, ok := joins[u]; ok {
			continue
		}
		var preds []int32
		for j := k; j < len(group); j++ {
			if unit(&group[j]) == u {
				preds = append(preds, b.agent(&group[j]).arrival)
			}
		}
		joins[u] = b.add(Node{Kind: NOrder, Event: i, Preds: preds})
	}
	for k := range group {
		s := b.agent(&group[k])
		s.after, s.pending, s.arrival = []int32{joins[unit(&group[k])]}, nil, -1
	}
}
