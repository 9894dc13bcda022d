package crash

import (
	"fmt"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/pm/record"
)

// gpuLine is the line a GPU CLWB writes back (the L2 line of the re-study's
// Volta configuration). A kernel that writes back 128-byte lines is correct
// on any machine with lines at least that long.
const gpuLine = 128

// writeBackState is the PMO builder's state for the write-back models
// (persistency.WriteBackADR and WriteBackPCT).
//
// Each persist starts "dirty" (in the agent's unflushed lines and in dirty,
// the order every agent's dirty persists were made); a write-through store,
// a CLWB of its line or an L2WB moves it to the flushing agent's flushed
// list. Under ADR a MemBar orders the agent's flushed persists, durably,
// before its later ones. Under a volatile WPQ a MemBar only moves them into
// wpq (acknowledged by a write-pending queue), a PCommit moves everything in
// wpq to the agent's committed list, and the next MemBar orders those.
//
// An L2WB or a PCommit covers only what happened before it: the issuer's
// own persists, those of earlier launches, and those its block made before
// a block barrier the issuer passed. A concurrent block's persist recorded
// earlier may reach the L2 (or its WPQ) only after the L2WB (or PCommit)
// in time, so it is not covered (the timing model shows exactly that).
type writeBackState struct {
	dirty []hbPersist // persists not written back by an L2WB, in order
	wpq   []hbPersist // WriteBackPCT: acknowledged by a WPQ, not yet committed
	// launch counts the runs begun; cutD and cutW are len(dirty) and
	// len(wpq) when the current one began.
	launch     int
	cutD, cutW int
	// blocks holds, per block of the current launch, len(dirty) and
	// len(wpq) at its latest block-wide barrier.
	blocks map[int]blockCut
}

// hbPersist is a persist (or an acknowledged write-back) with who made it,
// for deciding what happened before an L2WB or PCommit.
type hbPersist struct {
	node  int32
	agent agentKey
	block int
	done  bool // covered by an earlier L2WB or PCommit
}

type blockCut struct {
	launch, d, w int
}

// wbLaunch notes that a new run begins at the current event.
func (b *builder) wbLaunch() {
	r := &b.rs
	r.launch++
	r.cutD, r.cutW = len(r.dirty), len(r.wpq)
}

// wbBarrier notes a barrier of group: a block all of whose live
// threads it holds has its block cut moved here. (Groups are whole blocks
// or warps or grids; a warp barrier moves nothing, which is conservative.)
func (b *builder) wbBarrier(group []pm.Agent) {
	r := &b.rs
	if r.blocks == nil {
		r.blocks = map[int]blockCut{}
	}
	scopeOf := b.agent(&group[0]).arrivalScope
	if scopeOf < pm.Block {
		return
	}
	for k := range group {
		r.blocks[group[k].Block] = blockCut{r.launch, len(r.dirty), len(r.wpq)}
	}
}

// before reports whether entry i of a list (dirty or wpq, by cut) happened
// before the current verb of agent a.
func (r *writeBackState) before(list []hbPersist, i int, a *pm.Agent, wpq bool) bool {
	e := &list[i]
	cut := r.cutD
	if wpq {
		cut = r.cutW
	}
	if i < cut || e.agent == (agentKey{a.Kind, a.ID}) {
		return true
	}
	bc, ok := r.blocks[a.Block]
	if !ok || bc.launch != r.launch || e.block != a.Block {
		return false
	}
	if wpq {
		return i < bc.w
	}
	return i < bc.d
}

// cover moves the entries of list that happened before agent a's verb,
// and are not covered yet, to out.
func (r *writeBackState) cover(list []hbPersist, a *pm.Agent, wpq bool, out []int32) []int32 {
	for i := range list {
		if !list[i].done && r.before(list, i, a, wpq) {
			list[i].done = true
			out = append(out, list[i].node)
		}
	}
	return out
}

// wbPersist files persist node n of event ev under a write-back model.
func (b *builder) wbPersist(ev *record.Event, s *agentState, p *pm.Persist, n int32) {
	if ev.Op.WT {
		s.flushed = append(s.flushed, n)
		return
	}
	line := p.Addr &^ (gpuLine - 1)
	s.unflushed[line] = append(s.unflushed[line], n)
	b.rs.dirty = append(b.rs.dirty, hbPersist{node: n, agent: agentKey{ev.Agent.Kind, ev.Agent.ID}, block: ev.Agent.Block})
}

// wbVerb applies verb event i of agent s under a write-back model. It
// reports whether it handled the verb; if not, the generic rules of the
// model's verb table apply, after this call has written back and committed
// the agent's own persists when the verb's effect says so.
func (b *builder) wbVerb(i int, ev *record.Event, s *agentState) bool {
	op := &ev.Op
	pct := b.g.Model.VolatileWPQ()
	switch op.Kind {
	case pm.OpCLWB:
		line := op.Addr &^ (gpuLine - 1)
		s.flushed = append(s.flushed, s.unflushed[line]...)
		delete(s.unflushed, line)
		return true
	case pm.OpL2WB:
		s.flushed = b.rs.cover(b.rs.dirty, &ev.Agent, false, s.flushed)
		return true
	case pm.OpPCommit:
		if pct {
			s.committed = b.rs.cover(b.rs.wpq, &ev.Agent, true, s.committed)
		}
		return true
	case pm.OpMemBar:
		preds := slices.Clone(s.after)
		if pct {
			for _, n := range s.flushed {
				b.rs.wpq = append(b.rs.wpq, hbPersist{node: n, agent: agentKey{ev.Agent.Kind, ev.Agent.ID}, block: ev.Agent.Block})
			}
			preds = append(preds, s.committed...)
			s.committed = nil
		} else {
			preds = append(preds, s.flushed...)
		}
		s.flushed = nil
		preds = append(preds, s.pending...)
		f := b.add(Node{Kind: NOrder, Event: i, Preds: preds, Durable: true})
		s.after, s.pending = []int32{f}, nil
		return true
	}
	if b.g.Model.Verb(op.Kind, op.Scope).Has(persistency.WritesBack) {
		// A verb of another model: the agent's own persists are written
		// back and committed, then the generic fence orders them.
		var own []int32
		for _, us := range s.unflushed {
			own = append(own, us...)
		}
		clear(s.unflushed)
		own = append(append(own, s.flushed...), s.committed...)
		slices.Sort(own)
		s.pending = append(s.pending, slices.Compact(own)...)
		s.flushed, s.committed = nil, nil
	}
	return false
}

// wbWhy explains, under a write-back model, why persist event a is
// not PMO-ordered before event x: which of write-back, MemBar and (with a
// volatile WPQ) PCommit the program left out between them.
func (g *Graph) wbWhy(a, x int) string {
	ea := &g.Events[a]
	line := ea.Op.Addr &^ (gpuLine - 1)
	flushed, by := ea.Op.WT, ea.Agent
	fenced, committed := false, false
	for i := a + 1; i < x; i++ {
		e := &g.Events[i]
		if e.Group != nil {
			continue
		}
		switch {
		case !flushed && e.Op.Kind == pm.OpCLWB && e.Agent == ea.Agent && e.Op.Addr&^(gpuLine-1) == line,
			!flushed && e.Op.Kind == pm.OpL2WB:
			flushed, by = true, e.Agent
		case flushed && !fenced && e.Op.Kind == pm.OpMemBar && e.Agent == by:
			fenced = true
		case fenced && e.Op.Kind == pm.OpPCommit:
			committed = true
		}
	}
	switch {
	case !flushed:
		return fmt.Sprintf("its line %v stayed dirty in the L2: no write-through store, CLWB of the line by %v, or L2WB before it", line, &ea.Agent)
	case !fenced:
		return fmt.Sprintf("its write-back by %v was not followed by a MemBar of that thread", &by)
	case g.Model.VolatileWPQ() && !committed:
		return "its write-back was acknowledged by a volatile write-pending queue, and no PCommit (followed by a MemBar) drained it"
	}
	return fmt.Sprintf("no barrier joins %v's MemBar to %v before its persist", &by, &g.Events[x].Agent)
}
