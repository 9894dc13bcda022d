package workloads

import (
	"errors"
	"fmt"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("reduction", "persistent reduction (SBRP Fig. 3, the artifact's shape): grid-stride input loads, a tree by halves over PM ints per block ordered by block-scope release/acquire, block sums released at device scope to the last block, which reduces them",
		func(s Size) crash.Workload { return newReductionOfSize(s, pm.Device) })
	register("reduction-wide", "the reduction with device scope inside blocks too: correct, but wider than needed (for the scope advisor)",
		func(s Size) crash.Workload {
			r := newReductionOfSize(s, pm.Device).(*Reduction)
			r.InnerScope = pm.Device
			return r
		})
	register("reduction-narrow", "the reduction with its cross-block release narrowed to block scope: a scoped persistency bug (SBRP §5.3)",
		func(s Size) crash.Workload { return newReductionOfSize(s, pm.Block) })
	registerScaled("reduction", func(s Size, f float64) (crash.Workload, error) { return scaledReduction(s, f, pm.Block, pm.Device) })
	registerScaled("reduction-wide", func(s Size, f float64) (crash.Workload, error) { return scaledReduction(s, f, pm.Device, pm.Device) })
	registerScaled("reduction-narrow", func(s Size, f float64) (crash.Workload, error) { return scaledReduction(s, f, pm.Block, pm.Block) })
}

// reductionShape returns the grid, the ints per launch and the launches
// for a size.
func reductionShape(s Size) (g scope.Grid, n, launches int) {
	switch s {
	case Tiny:
		return scope.Grid{Blocks: 3, Threads: 4}, 3 * 4 * 2, 2
	case Quick:
		return scope.Grid{Blocks: 8, Threads: 64}, 8 * 64 * 8, 2
	}
	// The SBRP artifact (benchmarks/Red): 60 blocks of 512 threads, 16
	// launches of 262,144 ints each (4 M ints in all).
	return scope.Grid{Blocks: 60, Threads: 512}, 262144, 16
}

// scaledReduction is the reduction of size s with factor times the blocks
// and the ints per launch (the same ints per thread), the same launches.
func scaledReduction(s Size, factor float64, inner, cross pm.Scope) (crash.Workload, error) {
	g, n, l := reductionShape(s)
	var err1, err2 error
	g.Blocks, err1 = scaleCount("blocks", g.Blocks, factor)
	n, err2 = scaleCount("ints", n, factor)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	if g.Blocks > g.Threads {
		return nil, fmt.Errorf("%w: reduction of %d blocks of %d threads: at most as many blocks as threads per block", ErrConfig, g.Blocks, g.Threads)
	}
	r := newReduction(g, n, l, cross)
	r.InnerScope = inner
	return r, nil
}

// tagBit marks a PM slot as written; values are sums modulo 2^31.
const tagBit = 1 << 31

// Reduction is a persistent sum in the shape of the SBRP artifact's
// reduction (Figure 3 of the SBRP paper). Each of Launches launches sums N
// ints of volatile input (the host keeps the input, so recovery can read it
// again). Per launch:
//
//   - each thread sums its inputs with coalesced grid-stride loads (input
//     i, i+Threads, then i plus twice the grid's threads, ...);
//   - each block reduces its threads' sums as a tree by halves over 4-byte
//     PM slots: the upper half persists its sums and releases them, and the
//     block meets at SyncThreads; then at each level h the threads below h
//     add the slot of thread tid+h (acquired at InnerScope, block scope),
//     and those in [h/2, h) persist their sum and release it; thread 0
//     persists the block's sum; the first 32 threads end the tree with a
//     DFence (the artifact's fence.acq_rel.sys, a deep flush in its
//     simulator);
//   - thread 0 persists the block sum in the PM array of block sums; every
//     thread reads it and releases at CrossScope (the artifact's
//     st.relaxed.gpu by every thread), thread 0 the block sum's flag;
//     thread 0 takes a ticket; the block with the last ticket acquires
//     every block sum at device scope and reduces them with the same tree
//     in its own slots, persists the total, orders it with OFence and
//     persists the launch's done flag.
//
// Every slot is written once with its final value (tagged with tagBit), so
// recovery is native: the launch runs again and each thread whose slot is
// durable skips its work (the first run, as the artifact's, reads no slot
// back). Before that, recovery checks that a durable total agrees with
// durable block sums: with CrossScope narrowed to Block the last block's
// acquires do not order the block sums before the total, and a crash can
// leave a total whose block sums are lost.
type Reduction struct {
	Grid     scope.Grid
	N        int // ints per launch
	Launches int
	// InnerScope is the scope of the releases and acquires inside a block
	// (Block; Device is correct but wider than needed), CrossScope that of
	// the release of each block's sum (Device; Block is a bug).
	InnerScope pm.Scope
	CrossScope pm.Scope
	in         []uint32
}

// NewReduction returns a one-launch reduction over grid of perThread
// inputs per thread (3i+1 for input i); grid.Threads must be a power of
// two.
func NewReduction(grid scope.Grid, perThread int, cross pm.Scope) *Reduction {
	return newReduction(grid, grid.Total()*perThread, 1, cross)
}

func newReduction(grid scope.Grid, n, launches int, cross pm.Scope) *Reduction {
	r := &Reduction{Grid: grid, N: n, Launches: launches, InnerScope: pm.Block, CrossScope: cross}
	r.in = make([]uint32, n*launches)
	for i := range r.in {
		r.in[i] = uint32(3*i + 1)
	}
	return r
}

func newReductionOfSize(s Size, cross pm.Scope) crash.Workload {
	g, n, l := reductionShape(s)
	return newReduction(g, n, l, cross)
}

// Name returns "reduction", or "reduction(<inner>,<cross>)" for other scopes.
func (r *Reduction) Name() string {
	if r.CrossScope == pm.Device && r.InnerScope == pm.Block {
		return "reduction"
	}
	return fmt.Sprintf("reduction(%s,%s)", r.InnerScope, r.CrossScope)
}

// slots per launch: the blocks' trees, the last block's tree, the block
// sums, the total and the done flag.
func (r *Reduction) perLaunch() int {
	return (r.Grid.Blocks+1)*r.Grid.Threads + r.Grid.Blocks + 2
}

// Setup creates the zero-filled PM region red.
func (r *Reduction) Setup(m *pm.Machine) error {
	if bs := r.Grid.Threads; bs < 2 || bs&(bs-1) != 0 || r.Grid.Blocks > bs {
		return fmt.Errorf("workloads: reduction needs a power-of-two block of at least 2 and at most as many blocks as threads per block, got %+v", r.Grid)
	}
	_, err := m.CreateRegion("red", uint64(4*r.perLaunch()*r.Launches))
	return err
}

// layout names the PM slots of launch l.
type redLayout struct{ tree, lastTree, sums, total, done pm.Addr }

func (r *Reduction) layout(base pm.Addr, l int) redLayout {
	bs, blocks := r.Grid.Threads, r.Grid.Blocks
	a := base.Add(uint64(4 * r.perLaunch() * l))
	return redLayout{
		tree:     a,
		lastTree: a.Add(uint64(4 * blocks * bs)),
		sums:     a.Add(uint64(4 * (blocks + 1) * bs)),
		total:    a.Add(uint64(4 * ((blocks+1)*bs + blocks))),
		done:     a.Add(uint64(4 * ((blocks+1)*bs + blocks + 1))),
	}
}

// Kernel uploads launch l's input to fresh device memory and returns the
// launch's kernel for its first run, which reads nothing back from PM.
func (r *Reduction) Kernel(m *pm.Machine, l int) (scope.Kernel, error) {
	return r.kernel(m, l, false)
}

// kernel is Kernel; resume makes it the recovery's: each thread first reads
// its durable slots and skips the work they hold, as the artifact's
// kernel does only when recovering (its reads are behind a recover flag).
func (r *Reduction) kernel(m *pm.Machine, l int, resume bool) (scope.Kernel, error) {
	red, err := m.OpenRegion("red")
	if err != nil {
		return nil, err
	}
	bs, blocks, n := r.Grid.Threads, r.Grid.Blocks, r.N
	in, err := m.Alloc(pm.DeviceMem, uint64(4*n))
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 4*n)
	for i, v := range r.in[l*n : (l+1)*n] {
		pm.PutLE(buf[4*i:4*i+4], uint64(v))
	}
	if err := m.CopyIn(in, buf); err != nil {
		return nil, err
	}
	// Volatile: per-slot release flags of the trees, per-block flags of
	// the block sums, the ticket counter.
	flags, err := m.Alloc(pm.DeviceMem, uint64(4*((blocks+1)*bs+blocks+1)))
	if err != nil {
		return nil, err
	}
	lay := r.layout(red.Base, l)
	sumFlag := func(b int) pm.Addr { return flags.Add(uint64(4 * ((blocks+1)*bs + b))) }
	ticket := flags.Add(uint64(4 * ((blocks+1)*bs + blocks)))
	inner, cross := r.InnerScope, r.CrossScope
	// tree reduces the threads' sums (compute) of one block by halves in
	// the slots at slots (flags at fl) and returns, in thread 0, the
	// block's sum. A thread whose slot is durable skips its work.
	tree := func(t *scope.Thread, slots, fl pm.Addr, compute func() uint32) uint32 {
		tid := t.TID()
		var mySum uint32
		slot := func(k int) pm.Addr { return slots.Add(uint64(4 * k)) }
		var w uint32
		if resume {
			w = t.Load32(slot(tid))
		}
		done := w&tagBit != 0
		if done {
			mySum = w &^ tagBit
		} else {
			mySum = compute()
		}
		if tid >= bs/2 {
			if !done {
				t.Store32(slot(tid), mySum%tagBit|tagBit)
			}
			t.PRel(fl.Add(uint64(4*tid)), 1, inner)
		}
		// The artifact meets here; the release/acquire of the first level
		// is what orders its persists under scoped models, where a block
		// barrier orders none.
		t.SyncThreads()
		for h := bs / 2; h >= 1 && tid < h; h /= 2 {
			for t.PAcq(fl.Add(uint64(4*(tid+h))), inner) == 0 {
			}
			if !done {
				mySum += t.Load32(slot(tid+h)) &^ tagBit
			}
			if tid >= h/2 { // this thread's level: persist and release
				if !done {
					t.Store32(slot(tid), mySum%tagBit|tagBit)
				}
				if h >= 2 {
					t.PRel(fl.Add(uint64(4*tid)), 1, inner)
				}
				break
			}
		}
		if tid < 32 {
			// The artifact's first warp ends reduceBlock with
			// fence.acq_rel.sys, which its simulator runs as a DFence.
			t.DFence()
		}
		return mySum % tagBit
	}
	return func(t *scope.Thread) {
		b, tid := t.Block(), t.TID()
		sum := tree(t, lay.tree.Add(uint64(4*b*bs)), flags.Add(uint64(4*b*bs)), func() uint32 {
			var s uint32
			var v [2]uint32
			for i := b*2*bs + tid; i < n; i += 2 * bs * blocks {
				if i+bs < n {
					// The iteration's two loads are independent: the
					// warp waits for both at once.
					t.Gather32(v[:], in.Add(uint64(4*i)), in.Add(uint64(4*(i+bs))))
					s += v[0] + v[1]
				} else {
					s += t.Load32(in.Add(uint64(4 * i)))
				}
			}
			return s
		})
		// The block's sum: persisted, released, then a ticket.
		last := t.Shared()
		if tid == 0 && (!resume || t.Load32(lay.sums.Add(uint64(4*b)))&tagBit == 0) {
			t.Store32(lay.sums.Add(uint64(4*b)), sum|tagBit)
		}
		// Every thread of the artifact reads the block sum and releases
		// it at device scope, one instruction. Thread 0's release, after
		// its store, is the one the last block acquires; the others
		// release their own tree flag, set already, so that no flag is up
		// before the sum is. One call site, as in the artifact: narrowing
		// it narrows thread 0's release too (the checker's mutations and
		// the scope advisor work per site).
		t.Load32(lay.sums.Add(uint64(4 * b)))
		rel := flags.Add(uint64(4 * (b*bs + tid)))
		if tid == 0 {
			rel = sumFlag(b)
		}
		t.PRel(rel, 1, cross)
		if tid == 0 {
			tk := t.AtomicAdd32(ticket, 1, pm.Device)
			t.Store32(last, 0)
			if tk == uint32(blocks-1) {
				t.Store32(last, 1)
			}
		}
		t.SyncThreads()
		if t.Load32(last) == 0 {
			return
		}
		// The last block reduces the block sums with the same tree.
		total := tree(t, lay.lastTree, flags.Add(uint64(4*blocks*bs)), func() uint32 {
			var s uint32
			for i := tid; i < blocks; i += bs {
				for t.PAcq(sumFlag(i), pm.Device) == 0 {
				}
				s += t.Load32(lay.sums.Add(uint64(4*i))) &^ tagBit
			}
			return s
		})
		if tid == 0 && (!resume || t.Load32(lay.done) == 0) {
			t.Store32(lay.total, total|tagBit)
			t.OFence()
			t.Store32(lay.done, 1)
		}
	}, nil
}

func (r *Reduction) launch(m *pm.Machine, l int, resume bool) error {
	k, err := r.kernel(m, l, resume)
	if err != nil {
		return err
	}
	_, err = scope.Launch(m, r.Grid, k, scope.WithName("reduction"), scope.WithShared(4))
	return err
}

// Run launches the reduction of each chunk in turn.
func (r *Reduction) Run(m *pm.Machine) error {
	for l := range r.Launches {
		if err := r.launch(m, l, false); err != nil {
			return err
		}
	}
	return nil
}

// CommitPoint returns the last launch's done flag (crash.CommitPointer).
func (r *Reduction) CommitPoint(m *pm.Machine) (pm.Addr, error) {
	red, err := m.OpenRegion("red")
	if err != nil {
		return 0, err
	}
	return r.layout(red.Base, r.Launches-1).done, nil
}

// Recover validates the durable state of every launch and runs again each
// launch that is not done.
func (r *Reduction) Recover(m *pm.Machine) error {
	red, err := m.OpenRegion("red")
	if err != nil {
		return err
	}
	mem := m.Memory()
	for l := range r.Launches {
		lay := r.layout(red.Base, l)
		if done, _ := mem.Load(lay.done, 4); done == 1 {
			total, _ := mem.Load(lay.total, 4)
			var sum uint32
			for b := range r.Grid.Blocks {
				w, _ := mem.Load(lay.sums.Add(uint64(4*b)), 4)
				if w&tagBit == 0 {
					return fmt.Errorf("%w: launch %d: total %d durable but the sum of block %d is not", ErrInconsistent, l, total&^tagBit, b)
				}
				sum += uint32(w &^ tagBit)
			}
			if sum%tagBit != uint32(total&^tagBit) {
				return fmt.Errorf("%w: launch %d: total %d, block sums add to %d", ErrInconsistent, l, total&^tagBit, sum%tagBit)
			}
			continue
		}
		if err := r.launch(m, l, true); err != nil {
			return err
		}
	}
	return nil
}

// Want returns the correct total of launch l (modulo 2^31).
func (r *Reduction) Want(l int) uint32 {
	var want uint32
	for _, v := range r.in[l*r.N : (l+1)*r.N] {
		want += v
	}
	return want % tagBit
}

// Check requires every launch's done flag and right total.
func (r *Reduction) Check(m *pm.Machine) error {
	red, err := m.OpenRegion("red")
	if err != nil {
		return err
	}
	for l := range r.Launches {
		lay := r.layout(red.Base, l)
		total, _ := m.Memory().Load(lay.total, 4)
		done, _ := m.Memory().Load(lay.done, 4)
		if done != 1 || uint32(total) != r.Want(l)|tagBit {
			return fmt.Errorf("launch %d: total %d done %d, want %d done 1", l, total&^tagBit, done, r.Want(l))
		}
	}
	return nil
}
