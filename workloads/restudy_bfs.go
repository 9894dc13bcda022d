package workloads

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// BFSShape sizes a BFS on a road-like graph: a W×H lattice whose nodes
// are numbered row by row, each lattice edge kept (in both directions)
// with probability Keep, searched from node (SrcX, SrcY) by one block of
// Threads threads that stops, as Parboil's BFS_in_GPU_kernel does, at the
// first frontier larger than the block.
type BFSShape struct {
	W, H       int
	Keep       float64
	SrcX, SrcY int
	Threads    int
}

// bfsShape is the BFS of size s.
//
// Paper size is the re-study's bfs (LL) run (its artifact,
// github.com/peiyi1/memory_persistency_model_for_GPU: parboil/result/bfs_lk/run
// and the log nvm_base beside it): one launch of BFS_in_GPU_kernel, one
// block of 512 threads (MAX_THREADS_PER_BLOCK in
// parboil/benchmarks/bfs/src/nvm_lk/config.h), on Parboil's NY graph, after
// which the host exits (main.cu of nvm_lk: exit(0) after the first
// launch). The kernel expands level after level while the frontier fits
// the block and returns at the first frontier of more than 512 nodes. The
// NY input file is not in the artifact's repository; its output
// (parboil/datasets/bfs/NY/output/bfs.out) gives 270,926 nodes, all
// reached, in 632 levels, the first frontier over 512 nodes at level 241
// after 50,427 nodes, and node numbers that are spatially local (a level's
// nodes come in runs of nearby numbers). We generate a road-like graph of
// those statistics: a 521×520 lattice (270,920 nodes) numbered row by row,
// each edge kept with probability 0.7, which gives 2.79 arcs per node (the
// DIMACS NY road graph Parboil's is derived from has 733,846 arcs on
// 264,346 nodes, 2.78). The source, half way along the lattice's width and
// 48 rows in, is chosen so that the first frontier over 512 nodes comes
// after about as many levels as in NY: here it is level 244 (516 nodes),
// after 70,224 nodes; the frontiers before it are larger on average than
// NY's, as a lattice widens faster than NY does near its source
// (TestBFSPaperShape).
//
// Like Parboil's kernel, ours gathers each level's new frontier in eight
// shared-memory queues (NUM_BIN) and keeps the current frontier in shared
// memory (next_wf); the visited flags (Parboil's g_color) are in device
// memory, the costs in PM.
func bfsShape(s Size) BFSShape {
	return bySize(s,
		BFSShape{W: 4, H: 3, Keep: 0.8, SrcX: 0, SrcY: 0, Threads: 4},
		BFSShape{W: 64, H: 64, Keep: 0.7, SrcX: 32, SrcY: 6, Threads: 128},
		BFSShape{W: 521, H: 520, Keep: 0.7, SrcX: 260, SrcY: 48, Threads: 512})
}

// bfsInf is the cost of a node not reached yet.
const bfsInf = 0xFFFFFFFF

// NewBFS returns the re-study's long-running BFS (Parboil's
// BFS_in_GPU_kernel) written afresh, on a road-like graph drawn from seed
// (BFSShape): one block expands the frontier level by level; a thread that
// claims an unvisited neighbour (an atomic on a volatile visited flag)
// stores its cost, the level, to bfs.cost in PM and appends it to the next
// frontier in device memory. Like Parboil's kernel it stops at the first
// frontier larger than the block (or an empty one). The graph (CSR offsets
// then targets) is in bfs.graph. The kernel is not idempotent: a level half
// done leaves nodes marked that a re-run would skip. Its loop epochs make
// it restartable instead: the block's loop count holds the last level
// whose costs are durable; Recover first clears every cost above that
// level (on the host), and a restart rebuilds the visited flags and the
// frontier from the costs.
func NewBFS(sh BFSShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.W <= 0 || sh.H <= 0 || sh.Keep <= 0 || sh.Keep > 1 || sh.Threads <= 0 ||
		sh.SrcX < 0 || sh.SrcX >= sh.W || sh.SrcY < 0 || sh.SrcY >= sh.H {
		return nil, fmt.Errorf("%w: bfs %+v", ErrConfig, sh)
	}
	a, rng, err := newRSApp("bfs", s, seed, 0xbf5)
	if err != nil {
		return nil, err
	}
	n, src := sh.W*sh.H, sh.SrcY*sh.W+sh.SrcX
	adj := make([][]uint32, n)
	for y := range sh.H {
		for x := range sh.W {
			v := y*sh.W + x
			if x+1 < sh.W && rng.Float64() < sh.Keep {
				adj[v] = append(adj[v], uint32(v+1))
				adj[v+1] = append(adj[v+1], uint32(v))
			}
			if y+1 < sh.H && rng.Float64() < sh.Keep {
				adj[v] = append(adj[v], uint32(v+sh.W))
				adj[v+sh.W] = append(adj[v+sh.W], uint32(v))
			}
		}
	}
	row, col := make([]uint32, 1, n+1), []uint32(nil)
	for _, ws := range adj {
		col = append(col, ws...)
		row = append(row, uint32(len(col)))
	}
	want, cost := make([]uint32, n), make([]uint32, n)
	for i := range want {
		want[i], cost[i] = bfsInf, bfsInf
	}
	want[src], cost[src] = 0, 0
	for front, level := []uint32{uint32(src)}, uint32(0); len(front) > 0 && len(front) <= sh.Threads; level++ {
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
	// Device memory: a visited flag per node (Parboil's g_color).
	a.devs = []int{4 * n}
	maxDeg := 0
	for v := range n {
		maxDeg = max(maxDeg, int(row[v+1]-row[v]))
	}
	q := newBFSQueues(sh.Threads, maxDeg)
	// Recovery: unless the kernel (or its block) is durably done, costs
	// above the last durable level go (the restart redoes those levels).
	a.rs.repair = func(m *pm.Machine) error {
		for _, mark := range []pm.Addr{a.rs.kernelMark(0), a.rs.blockMark(0, 0)} {
			if v, err := m.Memory().Load(mark, 8); err != nil || v != 0 {
				return err
			}
		}
		done, err := m.Memory().Load(a.rs.loopMark(0, 0), 8)
		if err != nil {
			return err
		}
		got, err := readU32s(m, a.addr("cost"), n)
		if err != nil {
			return err
		}
		for v, c := range got {
			if c != bfsInf && uint64(c) > done {
				var b [4]byte
				pm.PutLE(b[:], bfsInf)
				if err := m.CopyIn(word32(a.addr("cost"), v), b[:]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// Not idempotent: a level cut short leaves nodes marked that a re-run
	// would skip (the restart's repair, or an undo log, fixes that).
	a.rs.kernels = []rsKernel{{name: "levels", label: "bfs", grid: scope.Grid{Blocks: 1, Threads: sh.Threads}, shared: q.bytes(),
		body: func(t *scope.Thread, p *Persister) { bfsKernel(t, p, a, q, n, src) }}}
	return a, nil
}

// bfsBins is the number of local queues a level's new frontier is
// gathered in (Parboil's NUM_BIN): thread i appends to queue i mod 8, so
// that fewer threads contend for each queue's tail.
const bfsBins = 8

// bfsQueues lays out the kernel's shared memory, in 4-byte words, as
// Parboil's BFS_in_GPU_kernel does (its LocalQueues, prefix_q, tot_sum and
// next_wf): the queues' tails, their prefix sums, the new frontier's size,
// the current frontier (at most a block's worth) and the queues' elements.
type bfsQueues struct{ threads, cap int }

// newBFSQueues sizes the queues for a block of threads threads on a graph
// of out-degree at most maxDeg: a queue takes the new neighbours of its
// threads' nodes, and also, on a restart, up to a block's worth of nodes.
func newBFSQueues(threads, maxDeg int) bfsQueues {
	return bfsQueues{threads, max((threads+bfsBins-1)/bfsBins*maxDeg, threads)}
}

func (q bfsQueues) bytes() int { return 4 * (2*bfsBins + 1 + q.threads + bfsBins*q.cap) }

func (q bfsQueues) tail(t *scope.Thread, b int) pm.Addr   { return word32(t.Shared(), b) }
func (q bfsQueues) prefix(t *scope.Thread, b int) pm.Addr { return word32(t.Shared(), bfsBins+b) }
func (q bfsQueues) size(t *scope.Thread) pm.Addr          { return word32(t.Shared(), 2*bfsBins) }
func (q bfsQueues) front(t *scope.Thread, i int) pm.Addr  { return word32(t.Shared(), 2*bfsBins+1+i) }
func (q bfsQueues) elem(t *scope.Thread, b, i int) pm.Addr {
	return word32(t.Shared(), 2*bfsBins+1+q.threads+b*q.cap+i)
}

// append adds node v to the thread's queue (LocalQueues::append); a queue
// full on a restart counts the node without storing it (the frontier is
// then larger than the block, and the search stops).
func (q bfsQueues) append(t *scope.Thread, v uint32) {
	b := t.TID() % bfsBins
	if i := int(t.AtomicAdd32(q.tail(t, b), 1, pm.Block)); i < q.cap {
		t.Store32(q.elem(t, b, i), v)
	}
}

// gather sums the queues into the new frontier's size (thread 0, after a
// barrier: size_prefix_sum) and, when it fits the block, every thread
// copies its share of the queues into the current frontier (concatenate).
// It returns the size.
func (q bfsQueues) gather(t *scope.Thread) uint32 {
	tid := t.TID()
	if tid == 0 {
		sum := uint32(0)
		for b := range bfsBins {
			t.Store32(q.prefix(t, b), sum)
			sum += t.Load32(q.tail(t, b))
		}
		t.Store32(q.size(t), sum)
	}
	t.SyncThreads()
	size := t.Load32(q.size(t))
	if size > 0 && size <= uint32(q.threads) {
		b := tid % bfsBins
		at, n := t.Load32(q.prefix(t, b)), int(t.Load32(q.tail(t, b)))
		for i := tid / bfsBins; i < n; i += (q.threads + bfsBins - 1 - b) / bfsBins {
			t.Store32(q.front(t, int(at)+i), t.Load32(q.elem(t, b, i)))
		}
	}
	t.SyncThreads()
	return size
}

// reset empties the queues (LocalQueues::reset); a barrier must follow.
func (q bfsQueues) reset(t *scope.Thread) {
	if tid := t.TID(); tid < bfsBins {
		t.Store32(q.tail(t, tid), 0)
	}
}

// bfsKernel is BFS_in_GPU_kernel: level after level, each thread expands
// at most one node of the current frontier (in shared memory), appends the
// neighbours it claims to its local queue, and the queues become the next
// frontier, until a frontier is empty or larger than the block.
func bfsKernel(t *scope.Thread, p *Persister, a *rsApp, q bfsQueues, n, src int) {
	graph, costs, visited := a.addr("graph"), a.addr("cost"), a.dev[0]
	T, tid := t.BlockDim(), t.TID()
	loop := a.rs.loopMark(0, 0)
	done := uint32(t.Load64(loop)) // levels whose costs are durable
	var size uint32
	if done == 0 {
		// The start: only the source is reached (a recovery's repair has
		// cleared every other cost).
		if tid == 0 {
			t.Store32(word32(visited, src), 1)
			t.Store32(q.front(t, 0), uint32(src))
			t.Store32(q.size(t), 1)
		}
		t.SyncThreads()
		size = t.Load32(q.size(t))
	} else {
		// A restart: rebuild the visited flags and the frontier of the
		// last durable level from the costs.
		q.reset(t)
		t.SyncThreads()
		for v := tid; v < n; v += T {
			c := t.Load32(word32(costs, v))
			vis := uint32(0)
			if c != bfsInf {
				vis = 1
			}
			t.Store32(word32(visited, v), vis)
			if c == done {
				q.append(t, uint32(v))
			}
		}
		t.SyncThreads()
		size = q.gather(t)
	}
	// An empty frontier ends the search; one larger than the block ends
	// the kernel (BFS_in_GPU_kernel's one-block limit).
	for level := done; size > 0 && size <= uint32(T); level++ {
		q.reset(t)
		t.SyncThreads()
		if tid < int(size) {
			v := t.Load32(q.front(t, tid))
			lo, hi := t.Load32(word32(graph, int(v))), t.Load32(word32(graph, int(v)+1))
			for e := lo; e < hi; e++ {
				w := t.Load32(word32(graph, n+1+int(e)))
				if t.AtomicCAS32(word32(visited, int(w)), 0, 1, pm.Block) == 0 {
					p.Store32(word32(costs, int(w)), level+1)
					q.append(t, w)
				}
			}
		}
		t.SyncThreads()
		size = q.gather(t)
		p.EndEpoch(PerLoop, loop, uint64(level+1))
	}
}
