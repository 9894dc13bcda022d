package workloads

import (
	"fmt"
	"math/rand/v2"

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
	switch s {
	case Tiny:
		return BFSShape{Nodes: 12, Degree: 2, Threads: 4}
	case Quick:
		return BFSShape{Nodes: 4096, Degree: 3, Threads: 256}
	}
	// Parboil's BFS_in_GPU_kernel runs one block of 512 threads.
	return BFSShape{Nodes: 1 << 16, Degree: 4, Threads: 512}
}

// bfsInf is the cost of a node not reached yet.
const bfsInf = 0xFFFFFFFF

// BFS is the re-study's long-running BFS (Parboil's BFS_in_GPU_kernel)
// written afresh: one block expands the frontier level by level; a thread
// that claims an unvisited neighbour (an atomic on a volatile visited
// flag) stores its cost, the level, to bfs.cost in PM and appends it to
// the next frontier in device memory. The kernel is not idempotent: a
// level half done leaves nodes marked that a re-run would skip. Its loop
// epochs make it restartable instead: bfs.loops holds the last level
// whose costs are durable, and a (re)start first clears every cost above
// that level and rebuilds the frontier from the costs equal to it.
type BFS struct {
	Shape   BFSShape
	rs      rsState
	row     []uint32 // CSR offsets, Nodes+1
	col     []uint32 // CSR targets
	want    []uint32
	graph   pm.Addr // bfs.graph: row then col
	cost    pm.Addr // bfs.cost
	visited pm.Addr // device memory: a flag per node
	front   pm.Addr // device memory: two frontiers of Nodes entries
	count   pm.Addr // device memory: their lengths
}

// NewBFS returns the BFS of a random graph drawn from seed under scheme s.
func NewBFS(sh BFSShape, s persistency.Scheme, seed uint64) (*BFS, error) {
	if sh.Nodes <= 0 || sh.Degree <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: bfs %+v", ErrConfig, sh)
	}
	if !s.Valid() {
		return nil, fmt.Errorf("%w: scheme %+v", ErrConfig, s)
	}
	b := &BFS{Shape: sh}
	rng := rand.New(rand.NewPCG(seed, 0xbf5))
	b.row = append(b.row, 0)
	for v := range sh.Nodes {
		for range sh.Degree {
			// Mostly near neighbours, sometimes far ones: a graph of
			// moderate depth.
			w := (v + 1 + rng.IntN(8)) % sh.Nodes
			if rng.IntN(4) == 0 {
				w = rng.IntN(sh.Nodes)
			}
			b.col = append(b.col, uint32(w))
		}
		b.row = append(b.row, uint32(len(b.col)))
	}
	b.want = make([]uint32, sh.Nodes)
	for i := range b.want {
		b.want[i] = bfsInf
	}
	b.want[0] = 0
	for front, level := []uint32{0}, uint32(0); len(front) > 0; level++ {
		var next []uint32
		for _, v := range front {
			for _, w := range b.col[b.row[v]:b.row[v+1]] {
				if b.want[w] == bfsInf {
					b.want[w] = level + 1
					next = append(next, w)
				}
			}
		}
		front = next
	}
	b.rs = rsState{scheme: s, prefix: "bfs", undoWords: sh.Nodes}
	// Not idempotent: a level cut short leaves nodes marked that a re-run
	// would skip (the restart's repair, or an undo log, fixes that).
	b.rs.kernels = []rsKernel{{name: "levels", grid: scope.Grid{Blocks: 1, Threads: sh.Threads}, body: b.kernel}}
	return b, nil
}

// Levels returns the number of levels the search expands.
func (b *BFS) Levels() int {
	most := 0
	for _, c := range b.want {
		if c != bfsInf {
			most = max(most, int(c))
		}
	}
	return most + 1
}

func (b *BFS) kernel(t *scope.Thread, p *Persister) {
	n := b.Shape.Nodes
	T, tid := t.BlockDim(), t.TID()
	loop := b.rs.loopMark(0, 0)
	done := uint32(t.Load64(loop)) // levels whose costs are durable
	front := func(i uint32) pm.Addr { return b.front.Add(uint64(4 * n * int(i%2))) }
	count := func(i uint32) pm.Addr { return b.count.Add(uint64(4 * (i % 2))) }
	if tid == 0 {
		t.Store32(count(done), 0)
	}
	t.SyncThreads()
	// Restart: forget costs above the durable level, rebuild the visited
	// flags and the frontier of that level.
	for v := tid; v < n; v += T {
		c := t.Load32(b.cost.Add(uint64(4 * v)))
		if c != bfsInf && c > done {
			p.Store32(b.cost.Add(uint64(4*v)), bfsInf)
			c = bfsInf
		}
		vis := uint32(0)
		if c != bfsInf {
			vis = 1
		}
		t.Store32(b.visited.Add(uint64(4*v)), vis)
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
			lo, hi := t.Load32(b.graph.Add(uint64(4*v))), t.Load32(b.graph.Add(uint64(4*(v+1))))
			for e := lo; e < hi; e++ {
				w := t.Load32(b.graph.Add(uint64(4 * (n + 1 + int(e)))))
				if t.AtomicCAS32(b.visited.Add(uint64(4*w)), 0, 1, pm.Block) == 0 {
					p.Store32(b.cost.Add(uint64(4*w)), level+1)
					j := t.AtomicAdd32(count(level+1), 1, pm.Block)
					t.Store32(front(level+1).Add(uint64(4*j)), w)
				}
			}
		}
		p.EndEpoch(persistency.PerLoop, loop, uint64(level+1))
	}
}

// Name returns "bfs/<scheme>".
func (b *BFS) Name() string { return "bfs/" + b.rs.scheme.String() }

// Scheme returns the persistency scheme the kernel follows.
func (b *BFS) Scheme() persistency.Scheme { return b.rs.scheme }

// Setup creates bfs.graph (CSR, copied in by the host), bfs.cost (node 0
// at cost 0, the others unreached) and the markers.
func (b *BFS) Setup(m *pm.Machine) error {
	words := append(append([]uint32(nil), b.row...), b.col...)
	g, err := createFilled(m, "bfs.graph", 4*len(words), 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 4*len(words))
	for i, v := range words {
		pm.PutLE(buf[4*i:4*i+4], uint64(v))
	}
	if err := m.CopyIn(g, buf); err != nil {
		return err
	}
	c, err := createFilled(m, "bfs.cost", 4*b.Shape.Nodes, 0xFF)
	if err != nil {
		return err
	}
	if err := m.CopyIn(c, []byte{0, 0, 0, 0}); err != nil {
		return err
	}
	return b.rs.setup(m)
}

func (b *BFS) bind(m *pm.Machine) error {
	r, err := openRegions(m, "bfs.graph", "bfs.cost")
	if err != nil {
		return err
	}
	b.graph, b.cost = r[0], r[1]
	if err := b.rs.writable(rsRange{b.cost, b.Shape.Nodes}); err != nil {
		return err
	}
	return b.rs.open(m)
}

// Run searches the graph; its device-memory frontiers are allocated anew.
func (b *BFS) Run(m *pm.Machine) error {
	if err := b.bind(m); err != nil {
		return err
	}
	n := uint64(b.Shape.Nodes)
	var err error
	if b.visited, err = m.Alloc(pm.DeviceMem, 4*n); err != nil {
		return err
	}
	if b.front, err = m.Alloc(pm.DeviceMem, 8*n); err != nil {
		return err
	}
	if b.count, err = m.Alloc(pm.DeviceMem, 8); err != nil {
		return err
	}
	return b.rs.run(m)
}

// Recover restarts the search from the last durable level.
func (b *BFS) Recover(m *pm.Machine) error { return b.Run(m) }

// Check compares bfs.cost with the levels of a BFS in Go.
func (b *BFS) Check(m *pm.Machine) error {
	if err := b.bind(m); err != nil {
		return err
	}
	got, err := readU32s(m, b.cost, b.Shape.Nodes)
	if err != nil {
		return err
	}
	return compareU32("bfs.cost", got, b.want)
}
