package workloads

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// BFSShape sizes a BFS: Nodes nodes with Degree random out-edges each,
// searched from node 0 by one block of Threads threads.
type BFSShape struct {
	Nodes, Degree, Threads int
}

func bfsShape(s Size) BFSShape {
	return bySize(s, BFSShape{Nodes: 12, Degree: 2, Threads: 4}, BFSShape{Nodes: 4096, Degree: 3, Threads: 256},
		// Parboil's BFS_in_GPU_kernel runs one block of 512 threads.
		BFSShape{Nodes: 1 << 16, Degree: 4, Threads: 512})
}

// bfsInf is the cost of a node not reached yet.
const bfsInf = 0xFFFFFFFF

// NewBFS returns the re-study's long-running BFS (Parboil's
// BFS_in_GPU_kernel) written afresh, on a random graph drawn from seed:
// one block expands the frontier level by level; a thread that claims an
// unvisited neighbour (an atomic on a volatile visited flag) stores its
// cost, the level, to bfs.cost in PM and appends it to the next frontier
// in device memory. The graph (CSR offsets then targets) is in bfs.graph.
// The kernel is not idempotent: a level half done leaves nodes marked
// that a re-run would skip. Its loop epochs make it restartable instead:
// the block's loop count holds the last level whose costs are durable, and
// a (re)start first clears every cost above that level and rebuilds the
// frontier from the costs equal to it.
func NewBFS(sh BFSShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.Nodes <= 0 || sh.Degree <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: bfs %+v", ErrConfig, sh)
	}
	a, rng, err := newRSApp("bfs", s, seed, 0xbf5)
	if err != nil {
		return nil, err
	}
	row, col := []uint32{0}, []uint32(nil)
	for v := range sh.Nodes {
		for range sh.Degree {
			// Mostly near neighbours, sometimes far ones: a graph of
			// moderate depth.
			w := (v + 1 + rng.IntN(8)) % sh.Nodes
			if rng.IntN(4) == 0 {
				w = rng.IntN(sh.Nodes)
			}
			col = append(col, uint32(w))
		}
		row = append(row, uint32(len(col)))
	}
	want, cost := make([]uint32, sh.Nodes), make([]uint32, sh.Nodes)
	for i := range want {
		want[i], cost[i] = bfsInf, bfsInf
	}
	want[0], cost[0] = 0, 0
	for front, level := []uint32{0}, uint32(0); len(front) > 0; level++ {
		var next []uint32
		for _, v := range front {
			for _, w := range col[row[v]:row[v+1]] {
				if want[w] == bfsInf {
					want[w] = level + 1
					next = append(next, w)
				}
			}
		}
		front = next
	}
	a.arrays = []rsArray{{name: "graph", init: append(row, col...)}, {name: "cost", init: cost, want: want, rw: true}}
	// Device memory: a visited flag per node, two frontiers, their lengths.
	a.devs = []int{4 * sh.Nodes, 8 * sh.Nodes, 8}
	// Not idempotent: a level cut short leaves nodes marked that a re-run
	// would skip (the restart's repair, or an undo log, fixes that).
	a.rs.kernels = []rsKernel{{name: "levels", label: "bfs", grid: scope.Grid{Blocks: 1, Threads: sh.Threads},
		body: func(t *scope.Thread, p *Persister) { bfsKernel(t, p, a, sh.Nodes) }}}
	return a, nil
}

func bfsKernel(t *scope.Thread, p *Persister, a *rsApp, n int) {
	graph, costs := a.addr("graph"), a.addr("cost")
	visited, fronts, counts := a.dev[0], a.dev[1], a.dev[2]
	T, tid := t.BlockDim(), t.TID()
	loop := a.rs.loopMark(0, 0)
	done := uint32(t.Load64(loop)) // levels whose costs are durable
	front := func(i uint32) pm.Addr { return fronts.Add(uint64(4 * n * int(i%2))) }
	count := func(i uint32) pm.Addr { return counts.Add(uint64(4 * (i % 2))) }
	if tid == 0 {
		t.Store32(count(done), 0)
	}
	t.SyncThreads()
	// Restart: forget costs above the durable level, rebuild the visited
	// flags and the frontier of that level.
	for v := tid; v < n; v += T {
		c := t.Load32(word32(costs, v))
		if c != bfsInf && c > done {
			p.Store32(word32(costs, v), bfsInf)
			c = bfsInf
		}
		vis := uint32(0)
		if c != bfsInf {
			vis = 1
		}
		t.Store32(word32(visited, v), vis)
		if c == done {
			i := t.AtomicAdd32(count(done), 1, pm.Block)
			t.Store32(front(done).Add(uint64(4*i)), uint32(v))
		}
	}
	t.SyncThreads()
	for level := done; ; level++ {
		size := t.Load32(count(level))
		if size == 0 {
			break
		}
		if tid == 0 {
			t.Store32(count(level+1), 0)
		}
		t.SyncThreads()
		for i := uint32(tid); i < size; i += uint32(T) {
			v := t.Load32(front(level).Add(uint64(4 * i)))
			lo, hi := t.Load32(word32(graph, int(v))), t.Load32(word32(graph, int(v)+1))
			for e := lo; e < hi; e++ {
				w := t.Load32(word32(graph, n+1+int(e)))
				if t.AtomicCAS32(word32(visited, int(w)), 0, 1, pm.Block) == 0 {
					p.Store32(word32(costs, int(w)), level+1)
					j := t.AtomicAdd32(count(level+1), 1, pm.Block)
					t.Store32(front(level+1).Add(uint64(4*j)), w)
				}
			}
		}
		p.EndEpoch(persistency.PerLoop, loop, uint64(level+1))
	}
}
