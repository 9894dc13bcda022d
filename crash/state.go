package crash

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// State is a crash state: the crash happened just before event Point, and
// of the persists issued before it, exactly those with Kept set became
// durable. Kept is indexed like Graph.Persists.
type State struct {
	Point int
	Kept  []bool
}

// describe names state s: its crash point and the issued persists it
// loses.
func (g *Graph) describe(s State) string {
	issued := g.issued(s.Point)
	var lost []int
	for i, k := range s.Kept[:issued] {
		if !k {
			lost = append(lost, i)
		}
	}
	const most = 16
	more, n := "", len(lost)
	if n > most {
		more = fmt.Sprintf(" and %d more", len(lost)-most)
		lost = lost[:most]
	}
	return fmt.Sprintf("the crash state before event %d of %d: %d of %d issued persists lost %v%s",
		s.Point, len(g.Events), n, issued, lost, more)
}

// issued returns how many persists were issued before point.
func (g *Graph) issued(point int) int {
	return sortSearch(len(g.Persists), func(i int) bool { return g.Nodes[g.Persists[i]].Event >= point })
}

func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// forced returns, per node, whether a durability fence completed before
// point forces it durable.
func (g *Graph) forced(point int) []bool {
	f := make([]bool, len(g.Nodes))
	for n := len(g.Nodes) - 1; n >= 0; n-- {
		nd := &g.Nodes[n]
		if nd.Event >= point {
			continue
		}
		if nd.Durable {
			for _, p := range nd.Preds {
				f[p] = true
			}
		}
		if f[n] {
			for _, p := range nd.Preds {
				f[p] = true
			}
		}
	}
	return f
}

// passes computes, for every node, whether it is durable (a persist) or
// passed (an ordering point) in the state where keep decides each persist
// whose predecessors are all durable. It returns the per-node result.
func (g *Graph) passes(point int, keep func(ordinal int, node int32) bool) []bool {
	ok := make([]bool, len(g.Nodes))
	ord := 0
	for n := range g.Nodes {
		nd := &g.Nodes[n]
		if nd.Event >= point {
			break
		}
		all := true
		for _, p := range nd.Preds {
			if !ok[p] {
				all = false
				break
			}
		}
		if nd.Kind == NPersist {
			ok[n] = all && keep(ord, int32(n))
			ord++
		} else {
			ok[n] = all
		}
	}
	return ok
}

// Valid reports whether s is a crash state the model allows: every kept
// persist's predecessors are durable and every persist a completed
// durability fence covers is kept.
func (g *Graph) Valid(s State) error {
	if s.Point < 0 || s.Point > len(g.Events) || len(s.Kept) != len(g.Persists) {
		return fmt.Errorf("%w: point %d of %d events, %d flags for %d persists", ErrState, s.Point, len(g.Events), len(s.Kept), len(g.Persists))
	}
	issued := g.issued(s.Point)
	for i := issued; i < len(s.Kept); i++ {
		if s.Kept[i] {
			return fmt.Errorf("%w: persist %d kept but issued after the crash", ErrState, i)
		}
	}
	ok := g.passes(s.Point, func(i int, _ int32) bool { return s.Kept[i] })
	for i := range issued {
		if s.Kept[i] && !ok[g.Persists[i]] {
			return fmt.Errorf("%w: persist %d kept without a predecessor", ErrState, i)
		}
	}
	for n, f := range g.forced(s.Point) {
		if f && !ok[n] {
			return fmt.Errorf("%w: node %d forced durable by a completed fence", ErrState, n)
		}
	}
	return nil
}

// Image returns base with the kept persists of s applied in order.
func (g *Graph) Image(base *pm.Image, s State) (*pm.Image, error) {
	img := base.Clone()
	for i, k := range s.Kept {
		if k {
			if err := img.Apply(&g.Nodes[g.Persists[i]].Persist); err != nil {
				return nil, err
			}
		}
	}
	return img, nil
}

// Prefix returns the state in which exactly the first k persists are durable,
// crashing just after the k-th was issued. Any prefix is PMO-closed, since the
// graph's order is topological.
func (g *Graph) Prefix(k int) State {
	s := State{Point: len(g.Events), Kept: make([]bool, len(g.Persists))}
	if k < len(g.Persists) {
		s.Point = g.Nodes[g.Persists[k]].Event
	}
	for i := range k {
		s.Kept[i] = true
	}
	return s
}

// Random returns a random PMO-closed state. Half the time it drops one to
// three random issued persists, and everything PMO-ordered after them, and
// keeps the rest (the shape of a minimal counterexample: one predecessor
// lost); otherwise it keeps each issued persist with probability q if its
// predecessors are durable. The crash point is the end or a random event;
// a persist a completed fence forces is always kept.
func (g *Graph) Random(rng *rand.Rand) State {
	point := len(g.Events)
	if rng.IntN(4) != 0 && len(g.Events) > 0 {
		point = rng.IntN(len(g.Events) + 1)
	}
	if issued := g.issued(point); issued > 0 && rng.IntN(2) == 0 {
		drop := make([]int, 1+rng.IntN(3))
		for i := range drop {
			drop[i] = rng.IntN(issued)
		}
		if s, err := g.Dropped(point, drop); err == nil {
			return s
		}
	}
	q := []float64{0.1, 0.5, 0.9}[rng.IntN(3)]
	forced := g.forced(point)
	s := State{Point: point, Kept: make([]bool, len(g.Persists))}
	g.passes(point, func(i int, n int32) bool {
		s.Kept[i] = forced[n] || rng.Float64() < q
		return s.Kept[i]
	})
	// A persist drawn as kept whose predecessor was dropped is not durable.
	ok := g.passes(point, func(i int, _ int32) bool { return s.Kept[i] })
	for i := range s.Kept {
		s.Kept[i] = s.Kept[i] && ok[g.Persists[i]]
	}
	return s
}

// Dropped returns the state at point in which the persists in drop, and
// every persist ordered after one of them, are lost and all other issued
// persists are durable. It fails if a completed fence forces a lost one.
func (g *Graph) Dropped(point int, drop []int) (State, error) {
	s := State{Point: point, Kept: make([]bool, len(g.Persists))}
	issued := g.issued(point)
	for i := range issued {
		s.Kept[i] = true
	}
	for _, d := range drop {
		s.Kept[d] = false
	}
	ok := g.passes(point, func(i int, _ int32) bool { return s.Kept[i] })
	for i := range issued {
		s.Kept[i] = ok[g.Persists[i]]
	}
	return s, g.Valid(s)
}

// SingleDrops calls f with, for each issued persist p in order, the state
// that loses p alone (with everything PMO-ordered after it) as late as p
// can be lost: just before the first durability fence after p, or at the
// end, with every other persist issued by then durable. With more persists
// than n it takes n of them, spread evenly. A recovery that relies on a
// persist its program never ordered before what it reads fails in one of
// these states even when that persist is one of thousands, which random
// states rarely drop. It stops when f returns false and reports whether it
// ran to the end.
func (g *Graph) SingleDrops(n int, f func(State) bool) bool {
	total := len(g.Persists)
	if n <= 0 || total == 0 {
		return true
	}
	fences := g.durableFences()
	k := min(n, total)
	for j := range k {
		s, err := g.singleDrop(spread(j, k, total), fences)
		if err != nil {
			continue // a fence at p's own event forces it: no such state
		}
		if !f(s) {
			return false
		}
	}
	return true
}

// spread returns the j-th of k indices spread evenly over 0..total-1 (j
// itself when k == total).
func spread(j, k, total int) int {
	if k < total {
		return j * (total - 1) / max(k-1, 1)
	}
	return j
}

// durableFences returns the events of the durability fences, in order.
func (g *Graph) durableFences() []int {
	var fences []int
	for i := range g.Nodes {
		if g.Nodes[i].Durable {
			fences = append(fences, g.Nodes[i].Event)
		}
	}
	slices.Sort(fences)
	return fences
}

// singleDrop returns the state that loses persist p alone (with what is
// PMO-ordered after it) as late as it can (see SingleDrops).
func (g *Graph) singleDrop(p int, fences []int) (State, error) {
	e := g.Nodes[g.Persists[p]].Event
	point := len(g.Events)
	if i, _ := slices.BinarySearch(fences, e+1); i < len(fences) {
		point = fences[i]
	}
	return g.Dropped(point, []int{p})
}

// coarseToFine returns 0..k-1 in bit-reversed order (0, k/2, k/4, 3k/4,
// ...): every prefix of it is spread over the whole range, so a budget
// cut short still samples all of it.
func coarseToFine(k int) []int {
	bits := 0
	for 1<<bits < k {
		bits++
	}
	out := make([]int, 0, k)
	for i := range 1 << bits {
		r := 0
		for b := range bits {
			if i&(1<<b) != 0 {
				r |= 1 << (bits - 1 - b)
			}
		}
		if r < k {
			out = append(out, r)
		}
	}
	return out
}

// Enumerate calls f with every crash state the model allows, crash points
// taken just before each durability fence and at the end, until f returns
// false or budget states were produced. It reports whether it produced all.
// States allowed at several points are produced once.
func (g *Graph) Enumerate(budget int, f func(State) bool) (complete bool) {
	points := []int{}
	for n := range g.Nodes {
		if g.Nodes[n].Durable {
			points = append(points, g.Nodes[n].Event)
		}
	}
	points = append(points, len(g.Events))
	slices.Sort(points)
	points = slices.Compact(points)
	seen := map[string]bool{}
	count := 0
	for _, point := range points {
		forced := g.forced(point)
		issued := g.issued(point)
		kept := make([]bool, len(g.Persists))
		ok := make([]bool, len(g.Nodes))
		stop := false
		var rec func(n int, ord int)
		rec = func(n, ord int) {
			if stop {
				return
			}
			if n == len(g.Nodes) || g.Nodes[n].Event >= point {
				for m := range forced {
					if forced[m] && !ok[m] {
						return
					}
				}
				key := keyOf(kept[:issued])
				if seen[key] {
					return
				}
				seen[key] = true
				count++
				s := State{Point: point, Kept: slices.Clone(kept)}
				if !f(s) || count >= budget {
					stop = true
				}
				return
			}
			nd := &g.Nodes[n]
			all := true
			for _, p := range nd.Preds {
				all = all && ok[p]
			}
			if nd.Kind != NPersist {
				ok[n] = all
				rec(n+1, ord)
				return
			}
			if all {
				ok[n], kept[ord] = true, true
				rec(n+1, ord+1)
			}
			if !forced[n] {
				ok[n], kept[ord] = false, false
				rec(n+1, ord+1)
			}
			ok[n], kept[ord] = false, false
		}
		rec(0, 0)
		if stop {
			return false
		}
	}
	return true
}

func keyOf(kept []bool) string {
	b := make([]byte, (len(kept)+7)/8)
	for i, k := range kept {
		if k {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return string(b)
}
