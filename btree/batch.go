package btree

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/scopedpm/scopedpm/internal/radix"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// Alg selects the parallel insertion algorithm of the scoped persist
// barrier paper (§5.1).
type Alg uint8

// Algorithms.
const (
	// Alg2 (the default): keys go to workgroups that own disjoint subtrees
	// rooted at depth d, the shallowest depth with at least as many nodes
	// as the batch needs workgroups; each workgroup inserts level by level
	// up to d with a block-scope persist barrier per level, and the levels
	// above d use device-scope barriers.
	Alg2 Alg = iota
	// Alg1: one thread per key; every level ends with a device-scope
	// persist barrier (a kernel-wide barrier).
	Alg1
)

// String returns "alg1" or "alg2".
func (a Alg) String() string {
	if a == Alg1 {
		return "alg1"
	}
	return "alg2"
}

// BatchOptions configure a batch insertion.
type BatchOptions struct {
	// Alg is the algorithm.
	Alg Alg
	// BlockThreads is the workgroup size (0: 64, one wavefront of the gope
	// preset, the machine of the scoped persist barrier paper by Gope et
	// al.).
	BlockThreads int
	// Scopes overrides the scopes of the persist barriers; nil means the
	// paper's (Block per level inside a subtree, Device above d and for
	// every level of Algorithm 1). Narrower ones are bugs, kept for the
	// crash checker.
	Scopes *Scopes
	// Launch options passed to scope.Launch (e.g. scope.WithName).
	Launch []scope.Option
}

func (o BatchOptions) withDefaults() BatchOptions {
	if o.BlockThreads == 0 {
		o.BlockThreads = 64
	}
	if o.Scopes == nil {
		o.Scopes = &Scopes{Level: pm.Block, Top: pm.Device}
	}
	return o
}

// Scopes are the scopes of a batch's persist barriers.
type Scopes struct {
	// Level is the scope of Algorithm 2's persist barrier after each level
	// of a workgroup's subtree (pm.Block).
	Level pm.Scope
	// Top is the scope of the persist barriers above depth d and of every
	// level of Algorithm 1 (pm.Device).
	Top pm.Scope
}

// BatchResult reports what a batch did.
type BatchResult struct {
	Keys   int  // distinct keys of the batch
	Lanes  int  // workgroups (Algorithm 2) or blocks (Algorithm 1)
	Depth  int  // d: depth of the subtree roots (the old height for Algorithm 1)
	Levels int  // levels of the old tree
	Ran    bool // a kernel ran (false when recovery found the batch done)
	// LaneLevels are the levels each workgroup had completed before the
	// launch (recovery resumes after them), TopLevels those of the device-
	// scope part (levels above d, then the leaf chain).
	LaneLevels []int
	TopLevels  int
	Launch     scope.Result
	// Writes[lane][level] counts the PM words each epoch of the launch
	// wrote (the NV writes a crash in it would make the lane write again):
	// lanes are the workgroups then, last, the device-scope part; levels
	// count from the leaves (0), and level Levels is the leaf chain.
	Writes [][]uint64
}

type laneInfo struct{ ks, ke, as, ae uint64 }

// sortBatch returns the keys sorted ascending with their values, the last
// value of a repeated key winning.
func sortBatch(keys, vals []uint64) ([]uint64, []uint64) {
	// Where every key and index fit one word together, sort the packed
	// words (key above index): several times faster than sorting pairs.
	shift := uint(bits.Len(uint(len(keys))))
	var most uint64
	for _, k := range keys {
		most |= k
	}
	if bits.Len64(most)+int(shift) <= 64 {
		ps, scratch := make([]uint64, len(keys)), make([]uint64, len(keys))
		for i, k := range keys {
			ps[i] = k<<shift | uint64(i)
		}
		// The indices ascend already: sort by the key bits only.
		ps = radix.SortFrom(ps, scratch, shift, uint(bits.Len64(most))+shift)
		ks, vs := make([]uint64, 0, len(keys)), make([]uint64, 0, len(keys))
		for _, p := range ps {
			k, i := p>>shift, p&(1<<shift-1)
			if len(ks) > 0 && ks[len(ks)-1] == k {
				vs[len(vs)-1] = vals[i]
				continue
			}
			ks, vs = append(ks, k), append(vs, vals[i])
		}
		return ks, vs
	}
	// Sort (key, index) pairs: the index breaks ties, so the order is the
	// stable one without a stable sort's extra passes.
	type kv struct {
		k uint64
		i int
	}
	ps := make([]kv, len(keys))
	for i, k := range keys {
		ps[i] = kv{k, i}
	}
	slices.SortFunc(ps, func(a, b kv) int {
		if c := cmp.Compare(a.k, b.k); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	ks, vs := make([]uint64, 0, len(keys)), make([]uint64, 0, len(keys))
	for _, p := range ps {
		if len(ks) > 0 && ks[len(ks)-1] == p.k {
			vs[len(vs)-1] = vals[p.i]
			continue
		}
		ks, vs = append(ks, p.k), append(vs, vals[p.i])
	}
	return ks, vs
}

// pending returns the batch record if a batch was started but not
// committed.
func (t *Tree) pending() (record, bool, error) {
	b := make([]byte, line)
	if err := t.read(t.r.Base.Add(recordOff), b); err != nil {
		return record{}, false, err
	}
	rec, err := decodeRecord(b, t.g)
	if err != nil || rec.seq != t.cur.seq+1 {
		// A record that does not decode was being written when the
		// machine crashed: its batch never started.
		return record{}, false, nil
	}
	return rec, true, nil
}

// Stage writes a batch durably (its keys, values, free nodes and record)
// without running it: from then on the batch will happen, and Recover (or
// Open) runs it. The staged batch is durable (it will happen) but not
// visible when Stage returns nil, and the tree refuses other writes with
// ErrRecovery until Recover commits it. InsertBatch is Stage then Recover.
// Crash-checking
// harnesses stage in their setup so that a crash image never holds a
// batch's kernel writes without the host writes before them.
func (t *Tree) Stage(keys, vals []uint64, o BatchOptions) error {
	_, _, _, _, err := t.stageBatch(keys, vals, o)
	return err
}

func (t *Tree) stageBatch(keys, vals []uint64, o BatchOptions) (record, []laneInfo, [][]uint64, []uint32, error) {
	s, err := t.stageFull(keys, vals, o)
	if s == nil {
		return record{}, nil, nil, nil, err
	}
	return s.rec, s.lanes, s.starts, s.offs, err
}

// staged is a batch stageFull planned and staged: its record and plan,
// the paths its keys take down the committed tree (path[depth][i]), the
// committed nodes the plan read, its sorted keys and values and its free
// list.
type staged struct {
	rec    record
	lanes  []laneInfo
	starts [][]uint64
	offs   []uint32
	path   [][]uint32
	nodes  *nodeIndex
	ks, vs []uint64
	ids    []uint32
}

// stageFull is stageBatch returning all it computed; a nil result comes
// with an error before the plan, a non-nil one with a failed stage.
func (t *Tree) stageFull(keys, vals []uint64, o BatchOptions) (*staged, error) {
	s, err := t.planFull(keys, vals, o)
	if err != nil {
		return nil, err
	}
	s.ids, err = t.stage(s.rec, s.lanes, s.ks, s.vs)
	return s, err
}

// planFull plans a batch as stageFull does, writing nothing.
func (t *Tree) planFull(keys, vals []uint64, o BatchOptions) (*staged, error) {
	if len(keys) != len(vals) || len(keys) == 0 {
		return nil, fmt.Errorf("%w: %d keys and %d values", ErrBadArg, len(keys), len(vals))
	}
	o = o.withDefaults()
	if o.BlockThreads < 1 || o.Alg > Alg1 {
		return nil, fmt.Errorf("%w: batch options %+v", ErrBadArg, o)
	}
	if _, ok, err := t.pending(); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return nil, ErrRecovery
	}
	ks, vs := sortBatch(keys, vals)
	if uint64(len(ks)) > t.g.maxBatch {
		return nil, fmt.Errorf("%w: batch of %d keys, the tree takes %d", ErrBadArg, len(ks), t.g.maxBatch)
	}
	s := &staged{ks: ks, vs: vs}
	var err error
	s.rec, s.lanes, s.starts, s.offs, s.path, s.nodes, err = t.planPaths(ks, o)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// InsertBatch inserts keys with their values (a key already present gets
// the new value; of keys repeated in the batch the last wins) with one
// kernel launch on the tree's machine, and commits the batch. The keys are
// sorted on the host, as in the paper. The batch is atomic and durable when
// InsertBatch returns nil; after an error it may still roll forward at the
// next Open or Recover (see Tree, Durability).
func (t *Tree) InsertBatch(keys, vals []uint64, o BatchOptions) (BatchResult, error) {
	if len(keys) != len(vals) {
		return BatchResult{}, fmt.Errorf("%w: %d keys and %d values", ErrBadArg, len(keys), len(vals))
	}
	if len(keys) == 0 {
		return BatchResult{}, nil
	}
	rec, lanes, starts, offs, err := t.stageBatch(keys, vals, o)
	if err != nil {
		return BatchResult{}, err
	}
	return t.finish(rec, lanes, starts, offs, o.withDefaults(), true)
}

// Recover finishes a batch a crash interrupted, if any: it relaunches the
// batch's kernel, in which each workgroup (and the device-scope part)
// resumes after the last level its epoch status mark says is durable, and
// commits. Workgroups whose subtrees persisted do no work again. Recovery
// rolls forward: the batch's keys were durable before it started. The
// batch is committed and durable when Recover returns nil; with no batch
// to finish it writes nothing.
func (t *Tree) Recover(o BatchOptions) (BatchResult, error) {
	res, err := t.resume(o, true)
	return res, err
}

// Resume runs the kernel of a staged (or interrupted) batch, resuming
// after the levels its marks say are durable, but does not commit: the
// batch is complete in PM and the next Open or Recover commits it (a host
// step that reads the result and publishes the meta line and bitmap).
// Harnesses that crash a timing backend during the kernel use it, so that
// no host write follows the launch. The kernel's writes are durable at its
// persist barriers when Resume returns, but the batch is not committed:
// reads still see the tree before it.
func (t *Tree) Resume(o BatchOptions) (BatchResult, error) {
	return t.resume(o, false)
}

func (t *Tree) resume(o BatchOptions, commit bool) (BatchResult, error) {
	rec, ok, err := t.pending()
	if err != nil || !ok {
		return BatchResult{}, err
	}
	o = o.withDefaults()
	if rec.del == 1 {
		// A host delete: redo it (it commits).
		return BatchResult{}, t.redoDelete(rec)
	}
	// The plan is a function of the committed tree (unchanged: the batch
	// wrote only fresh nodes and leaf next pointers) and the batch's keys
	// (durable): compute it again, and check it matches the record.
	kb := make([]byte, 8*rec.n)
	if err := t.read(t.r.Base.Add(t.g.keysOff()), kb); err != nil {
		return BatchResult{}, err
	}
	ks := make([]uint64, rec.n)
	for i := range ks {
		ks[i] = binary.LittleEndian.Uint64(kb[8*i:])
		if i > 0 && ks[i] <= ks[i-1] {
			return BatchResult{}, fmt.Errorf("%w: batch keys out of order at %d", ErrCorrupt, i)
		}
	}
	po := o
	po.Alg, po.BlockThreads = Alg(rec.alg), int(rec.block)
	again, lanes, starts, offs, err := t.plan(ks, po)
	if err != nil {
		return BatchResult{}, err
	}
	again.seq = rec.seq
	if again != rec {
		return BatchResult{}, fmt.Errorf("%w: batch record %+v, its plan gives %+v", ErrCorrupt, rec, again)
	}
	return t.finish(rec, lanes, starts, offs, o, commit)
}

// plan decides the lanes, the depth d and each lane's share of free nodes.
// It walks the old tree on the host to bound the nodes each lane may
// allocate (the kernel finds the leaves itself).
//
// starts[lane][lv] is where level lv (0: the leaves) of lane (the last
// being the device-scope part) allocates in the free list; the level ends
// where the next slice starts.
//
// offs[depth*n+i] is where the owner of the run starting at key i writes its
// pieces at depth: node ids do not depend on the order threads run in.
func (t *Tree) plan(ks []uint64, o BatchOptions) (record, []laneInfo, [][]uint64, []uint32, error) {
	rec, lanes, starts, offs, _, _, err := t.planPaths(ks, o)
	return rec, lanes, starts, offs, err
}

// reuse returns s resliced to n elements, all zero, reusing its array
// when it is large enough.
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// planPaths is plan, also returning the paths of the keys (path[depth][i],
// the node at depth on key i's way down) and the committed nodes it read,
// by id (every node on the paths).
func (t *Tree) planPaths(ks []uint64, o BatchOptions) (record, []laneInfo, [][]uint64, []uint32, [][]uint32, *nodeIndex, error) {
	n, h, order := len(ks), int(t.cur.height), t.g.order
	// The index is the tree's, reused batch after batch: a batch's nodes
	// live until the next batch's plan.
	cache := &t.planNodes
	cache.reset(t.g.capacity)
	nb := make([]byte, t.g.nodeBytes)
	// Nodes and their keys and values come from slabs: three allocations
	// a chunk of nodes instead of three a node.
	chunk := min(128, max(8, h*n))
	var slab []node
	var arena []uint64
	nc := t.cached()
	get := func(id uint32) (*node, error) {
		if nd, ok := cache.get(id); ok {
			return nd, nil
		}
		if nc != nil {
			nd, ok := nc.get(id)
			if !ok {
				var err error
				if nd, err = nc.read(t, id, nb); err != nil {
					return nil, err
				}
			}
			cache.put(id, nd)
			return nd, nil
		}
		if len(slab) == 0 {
			slab, arena = make([]node, chunk), make([]uint64, 2*order*chunk)
		}
		nd := &slab[0]
		nd.keys, nd.vals = arena[:0:order], arena[order:order:2*order]
		slab, arena = slab[1:], arena[2*order:]
		if err := t.readNodeInto(id, nb, nd); err != nil {
			return nil, err
		}
		cache.put(id, nd)
		return nd, nil
	}
	// path[depth][i]: the node at depth on key i's way down. The arrays
	// here are the tree's scratch (planScratch): like the nodes, a plan's
	// live until the next plan.
	ps := &t.planScratch
	ps.path = reuse(ps.path, h*n)
	path := make([][]uint32, h)
	for d := range path {
		path[d] = ps.path[d*n : (d+1)*n : (d+1)*n]
	}
	// Each key's descent starts where its path leaves the previous key's:
	// at the shallowest node whose route for it differs (sorted keys share
	// most of their paths). on[d] and via[d] are the internal node at depth
	// d on the previous key's path and the child it took there.
	ps.on = reuse(ps.on, h)
	ps.via = reuse(ps.via, h)
	on, via := ps.on, ps.via
	for i, k := range ks {
		id, from := t.cur.root, 0
		if i > 0 {
			for from < h-1 && routes(on[from], via[from], k) {
				from++
			}
			for d := 0; d <= from; d++ {
				path[d][i] = path[d][i-1]
			}
			id = path[from][i]
		}
		for d := from; d < h; d++ {
			path[d][i] = id
			if d == h-1 {
				break
			}
			nd, err := get(id)
			if err != nil {
				return record{}, nil, nil, nil, nil, nil, err
			}
			if nd.leaf {
				return record{}, nil, nil, nil, nil, nil, fmt.Errorf("%w: leaf at depth %d of %d", ErrCorrupt, d, h)
			}
			c := route(nd, k)
			on[d], via[d] = nd, c
			id = uint32(nd.vals[c])
		}
	}
	// d: the shallowest depth with as many nodes as workgroups needed.
	var d int
	var lanes []laneInfo
	if o.Alg == Alg1 {
		d = h
		for s := 0; s < n; s += o.BlockThreads {
			lanes = append(lanes, laneInfo{ks: uint64(s), ke: uint64(min(s+o.BlockThreads, n))})
		}
	} else {
		want := (n + o.BlockThreads - 1) / o.BlockThreads
		d = h - 1
		level := []uint32{t.cur.root}
		for depth := 0; depth < h; depth++ {
			if len(level) >= want {
				d = depth
				break
			}
			if depth == h-1 {
				break
			}
			var nextLevel []uint32
			for _, id := range level {
				nd, err := get(id)
				if err != nil {
					return record{}, nil, nil, nil, nil, nil, err
				}
				for _, c := range nd.vals {
					nextLevel = append(nextLevel, uint32(c))
				}
			}
			level = nextLevel
		}
		for i := 0; i < n; {
			j := i + 1
			for j < n && path[d][j] == path[d][i] {
				j++
			}
			lanes = append(lanes, laneInfo{ks: uint64(i), ke: uint64(j)})
			i = j
		}
	}
	if uint64(len(lanes)) > t.g.maxLanes {
		return record{}, nil, nil, nil, nil, nil, fmt.Errorf("%w: %d lanes, the tree takes %d (raise MaxLanes or BlockThreads)", ErrBadArg, len(lanes), t.g.maxLanes)
	}
	// Bound the pieces every run of keys under one node can produce, level
	// by level from the leaves, and charge them to the lane that writes
	// them (the top lane above d).
	ps.laneOf = reuse(ps.laneOf, n)
	laneOf := ps.laneOf
	for l, ln := range lanes {
		for i := ln.ks; i < ln.ke; i++ {
			laneOf[i] = l
		}
	}
	need := make([][]uint64, len(lanes)+1)
	for l := range need {
		need[l] = make([]uint64, h)
	}
	ps.ownerP = reuse(ps.ownerP, h*n+2*n)
	ownerP := ps.ownerP[:h*n]       // pieces (with root growth) owner i may write at depth
	bound := ps.ownerP[h*n : h*n+n] // pieces bound of the run owned by key i at the level below
	prev := ps.ownerP[h*n+n:]
	for depth := h - 1; depth >= 0; depth-- {
		for i := 0; i < n; {
			j := i + 1
			for j < n && path[depth][j] == path[depth][i] {
				j++
			}
			var entries uint64
			if depth == h-1 {
				nd, err := get(path[depth][i])
				if err != nil {
					return record{}, nil, nil, nil, nil, nil, err
				}
				entries = uint64(len(nd.vals) + j - i)
			} else {
				nd, err := get(path[depth][i])
				if err != nil {
					return record{}, nil, nil, nil, nil, nil, err
				}
				entries = uint64(len(nd.vals))
				for c := i; c < j; c++ {
					if c == i || path[depth+1][c] != path[depth+1][c-1] {
						entries += prev[c] - 1
					}
				}
			}
			p := (entries + uint64(order) - 1) / uint64(order)
			bound[i] = p
			if depth == 0 {
				for q := p; q > 1; {
					q = (q + uint64(order) - 1) / uint64(order)
					p += q
				}
			}
			ownerP[depth*n+i] = p
			if depth >= d {
				need[laneOf[i]][h-1-depth] += p
			} else {
				need[len(lanes)][h-1-depth] += p
			}
			i = j
		}
		prev, bound = bound, prev
	}
	var total uint64
	starts := make([][]uint64, len(lanes)+1)
	for l := range starts {
		if l < len(lanes) {
			lanes[l].as = total
		}
		starts[l] = make([]uint64, h+1)
		for lv := range h {
			starts[l][lv] = total
			total += need[l][lv]
		}
		starts[l][h] = total
		if l < len(lanes) {
			lanes[l].ae = total
		}
	}
	top := starts[len(lanes)]
	// Each owner's slice, in key order within its lane's slice of a level.
	ps.offs = reuse(ps.offs, h*n)
	offs := ps.offs
	for depth := range h {
		lv := h - 1 - depth
		cur := make([]uint64, len(lanes)+1)
		for l := range cur {
			cur[l] = starts[l][lv]
		}
		for i := range n {
			if p := ownerP[depth*n+i]; p > 0 {
				l := len(lanes)
				if depth >= d {
					l = laneOf[i]
				}
				offs[depth*n+i] = uint32(cur[l])
				cur[l] += p
			}
		}
	}
	rec := record{seq: t.cur.seq + 1, n: uint64(n), lanes: uint64(len(lanes)), d: uint32(d), oldRoot: t.cur.root,
		oldHeight: uint32(h), alg: uint32(o.Alg), free: total, topStart: top[0], topEnd: top[h], block: uint32(o.BlockThreads)}
	return rec, lanes, starts, offs, path, cache, nil
}

// nodeIndex maps node ids to the committed nodes a batch read: an
// open-addressing table (linear probing, at most half full) over the ids a
// batch reads, a few thousand, sized by them and not by the pool. A slice
// over the pool (8 bytes a node) held a megabyte at 131,072 nodes, live
// between batches and doubling the Go heap's goal by it; a map's lookups
// were a tenth of the host time of a batch of 1,000 (pprof).
type nodeIndex struct {
	capacity uint64   // the pool's nodes: ids at or above it are not recorded
	keys     []uint32 // 1 + the node's id; 0 when the slot is empty
	nds      []*node
	n        int  // ids held
	shift    uint // 32 - log2(len(keys)): a slot is the top bits of a hash
}

// reset empties x for a pool of capacity nodes.
func (x *nodeIndex) reset(capacity uint64) {
	if x.n > 0 {
		clear(x.keys)
		clear(x.nds) // let the collector have the nodes
		x.n = 0
	}
	x.capacity = capacity
}

// slot returns where id is in x, or the empty slot where it goes.
func (x *nodeIndex) slot(id uint32) int {
	mask := len(x.keys) - 1
	i := int((id * 0x9e3779b1) >> x.shift) // Fibonacci hashing
	for x.keys[i] != 0 && x.keys[i] != id+1 {
		i = (i + 1) & mask
	}
	return i
}

// get returns node id, if x holds it.
func (x *nodeIndex) get(id uint32) (*node, bool) {
	if x.n == 0 {
		return nil, false
	}
	i := x.slot(id)
	return x.nds[i], x.keys[i] != 0
}

// put records nd as node id (an id outside the pool is not recorded).
func (x *nodeIndex) put(id uint32, nd *node) {
	if uint64(id) >= x.capacity || id+1 == 0 {
		return
	}
	if 2*(x.n+1) > len(x.keys) {
		x.rehash(max(64, 4*(x.n+1)))
	}
	i := x.slot(id)
	if x.keys[i] == 0 {
		x.keys[i] = id + 1
		x.n++
	}
	x.nds[i] = nd
}

// rehash makes the table at least n slots (a power of two) and enters the
// ids again.
func (x *nodeIndex) rehash(n int) {
	size, bits := 64, uint(6)
	for size < n {
		size, bits = 2*size, bits+1
	}
	x.shift = 32 - bits
	keys, nds := x.keys, x.nds
	x.keys, x.nds = make([]uint32, size), make([]*node, size)
	for j, k := range keys {
		if k != 0 {
			i := x.slot(k - 1)
			x.keys[i], x.nds[i] = k, nds[j]
		}
	}
}

// freeIDs returns the first n free node ids of the committed bitmap that
// are not kept for a view (see keepFreed), in ascending order. The search
// starts at t.hint (every node below it is in use) and skips whole words
// in use, so it does not rescan the tree's nodes.
func (t *Tree) freeIDs(n uint64) ([]uint32, error) {
	bm := t.bm[t.cur.seq&1]
	out := make([]uint32, 0, n)
	for id := max(t.hint, 1); id < t.g.capacity && uint64(len(out)) < n; {
		used := bm[id/64]
		if t.keep != nil {
			used |= t.keep[id/64] // freed, but a view may still read it
		}
		free := ^used &^ (1<<(id%64) - 1) // free ids of the word from id on
		if free == 0 {
			id = (id/64 + 1) * 64
			continue
		}
		id = id/64*64 + uint64(bits.TrailingZeros64(free))
		if id >= t.g.capacity {
			break
		}
		out = append(out, uint32(id))
		id++
	}
	if len(out) > 0 {
		t.hint = uint64(out[0])
	} else {
		t.hint = t.g.capacity
	}
	if uint64(len(out)) < n {
		return nil, fmt.Errorf("%w: a batch may need %d free nodes, the pool has %d", ErrFull, n, len(out))
	}
	return out, nil
}

// stage writes the batch's keys, values, free list and lanes, then its
// record: once the record is durable the batch will happen (recovery
// finishes it). It returns the free list (the node ids the batch may
// write).
func (t *Tree) stage(rec record, lanes []laneInfo, ks, vs []uint64) ([]uint32, error) {
	ids, err := t.freeIDs(rec.free)
	if err != nil {
		return nil, err
	}
	// The bytes of each write, in a buffer of the tree's (a host write
	// copies them).
	put := func(off uint64, words []uint64, size int) error {
		t.stageBuf = reuse(t.stageBuf, size*len(words))
		b := t.stageBuf
		for i, w := range words {
			pm.PutLE(b[size*i:size*(i+1)], w)
		}
		return t.write(t.r.Base.Add(off), b)
	}
	t.stageFree = reuse(t.stageFree, len(ids))
	fr := t.stageFree
	for i, id := range ids {
		fr[i] = uint64(id)
	}
	lw := make([]uint64, 0, 4*len(lanes))
	for _, l := range lanes {
		lw = append(lw, l.ks, l.ke, l.as, l.ae)
	}
	for _, a := range []struct {
		off   uint64
		words []uint64
		size  int
	}{{t.g.keysOff(), ks, 8}, {t.g.valsOff(), vs, 8}, {t.g.freeOff(), fr, 4}, {t.g.lanesOff(), lw, 8}} {
		if len(a.words) == 0 {
			continue
		}
		if err := put(a.off, a.words, a.size); err != nil {
			return nil, err
		}
	}
	return ids, t.write(t.r.Base.Add(recordOff), rec.encode())
}

// finish runs (or resumes) the batch's kernel and commits it.
func (t *Tree) finish(rec record, lanes []laneInfo, starts [][]uint64, offs []uint32, o BatchOptions, commit bool) (BatchResult, error) {
	res := BatchResult{Keys: int(rec.n), Lanes: len(lanes), Depth: int(rec.d), Levels: int(rec.oldHeight)}
	// The epoch status marks say where each lane resumes.
	mb := make([]byte, 8*(len(lanes)+1))
	if err := t.read(t.r.Base.Add(t.g.marksOff()), mb); err != nil {
		return res, err
	}
	k := &kern{g: t.g, base: t.r.Base, mem: t.m.Memory(), seq: rec.seq, n: int(rec.n), h: int(rec.oldHeight), d: int(rec.d),
		order: t.g.order, root: rec.oldRoot, lanes: lanes, starts: starts, alg: Alg(rec.alg), levelScope: o.Scopes.Level, topScope: o.Scopes.Top}
	k.areas()
	k.laneDone = make([]int, len(lanes))
	for l := range lanes {
		k.laneDone[l], _ = markDone(binary.LittleEndian.Uint64(mb[8*l:]), rec.seq, 0)
	}
	k.topDone, _ = markDone(binary.LittleEndian.Uint64(mb[8*len(lanes):]), rec.seq, 0)
	res.LaneLevels, res.TopLevels = k.laneDone, k.topDone
	if k.topDone <= k.d {
		if err := k.launch(t.m, offs, o); err != nil {
			return res, err
		}
		res.Ran = true
		res.Launch = k.result
		res.Writes = k.writes
	}
	if !commit {
		return res, nil
	}
	return res, t.commit(rec)
}

// commit reads the batch's result (new root and height), finds what the
// batch changed (changes), and publishes it.
func (t *Tree) commit(rec record) error {
	b := make([]byte, 24)
	if err := t.read(t.r.Base.Add(resultOff), b); err != nil {
		return err
	}
	seq, root, height := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	if seq != rec.seq || root == 0 || root >= t.g.capacity || height < 1 || height > 64 {
		return fmt.Errorf("%w: batch %d result: batch %d root %d height %d", ErrCorrupt, rec.seq, seq, root, height)
	}
	made, freed, count, err := t.changes(uint32(root), uint32(height))
	if err != nil {
		return err
	}
	return t.publish(meta{seq: rec.seq, root: uint32(root), height: uint32(height), count: count}, made, freed)
}

// changes compares the tree of root and height that a batch wrote with the
// committed tree, reading only the nodes the batch wrote and those it
// replaced: it returns the new nodes (made), the committed nodes the new
// tree no longer reaches (freed), and the new tree's key count.
//
// Copy-on-write makes this exact: a batch writes only nodes that are free
// in the committed bitmap, and never changes a committed node's children,
// so a committed node the new tree reaches brings its whole subtree along
// unchanged. The walk of the new tree descends through the new nodes and
// stops at committed ones (kept); the walk of the committed tree descends
// through the nodes not kept, which are the freed ones. The count is the
// committed count plus the keys of the new leaves less those of the freed
// leaves.
func (t *Tree) changes(root, height uint32) (made, freed []uint32, count uint64, err error) {
	bm := t.bm[t.cur.seq&1]
	used := func(id uint32) bool { return bm[id/64]&(1<<(id%64)) != 0 }
	if t.reach == nil {
		t.reach = make([]uint64, len(bm))
	}
	// The walk's slices are the tree's scratch, kept between commits
	// (their contents are dead once publish returns; markKept copies
	// freed).
	cs := &t.chScratch
	reached := cs.reached[:0] // the bits set in t.reach, cleared on return
	made, freed = cs.made[:0], cs.freed[:0]
	level, next := cs.level[:0], cs.next[:0]
	defer func() {
		for _, id := range reached {
			t.reach[id/64] = 0
		}
		cs.reached, cs.made, cs.freed, cs.level, cs.next = reached[:0], made[:0], freed[:0], level[:0], next[:0]
	}()
	in := func(id uint32) bool { return t.reach[id/64]&(1<<(id%64)) != 0 }
	nd, buf := &node{}, make([]byte, t.g.nodeBytes)
	nc := t.cached()
	var added, removed uint64
	level = append(level, root)
	for depth := uint32(0); depth < height && len(level) > 0; depth++ {
		next = next[:0]
		for _, id := range level {
			if id == 0 || uint64(id) >= t.g.capacity || in(id) {
				return nil, nil, 0, fmt.Errorf("%w: node %d bad or reached twice", ErrCorrupt, id)
			}
			t.reach[id/64] |= 1 << (id % 64)
			reached = append(reached, id)
			if used(id) {
				continue // kept, with its subtree
			}
			made = append(made, id)
			nd := nd
			if cn, ok := nc.get(id); ok {
				nd = cn // made by the running host insert (nodeCache.fill)
			} else if nc != nil {
				if nd, err = nc.read(t, id, buf); err != nil {
					return nil, nil, 0, err
				}
			} else if err := t.readNodeInto(id, buf, nd); err != nil {
				return nil, nil, 0, err
			}
			if nd.leaf != (depth == height-1) {
				return nil, nil, 0, fmt.Errorf("%w: node %d at depth %d of %d is leaf=%v", ErrCorrupt, id, depth, height, nd.leaf)
			}
			if nd.leaf {
				added += uint64(len(nd.vals))
				continue
			}
			for _, c := range nd.vals {
				next = append(next, uint32(c))
			}
		}
		level, next = next, level
	}
	level = append(level[:0], t.cur.root)
	for depth := uint32(0); depth < t.cur.height && len(level) > 0; depth++ {
		next = next[:0]
		for _, id := range level {
			if id == 0 || uint64(id) >= t.g.capacity || !used(id) {
				return nil, nil, 0, fmt.Errorf("%w: committed tree reaches node %d, marked free", ErrCorrupt, id)
			}
			if in(id) {
				continue // kept: the new tree reached it
			}
			freed = append(freed, id)
			nd := nd
			if cn, ok := nc.get(id); ok {
				nd = cn
				nc.drop(id) // freed: its id will hold another node
			} else if err := t.readNodeInto(id, buf, nd); err != nil {
				return nil, nil, 0, err
			}
			if nd.leaf {
				removed += uint64(len(nd.vals))
				continue
			}
			for _, c := range nd.vals {
				next = append(next, uint32(c))
			}
		}
		level, next = next, level
	}
	if removed > t.cur.count+added {
		return nil, nil, 0, fmt.Errorf("%w: batch removes %d keys of %d", ErrCorrupt, removed, t.cur.count)
	}
	return made, freed, t.cur.count + added - removed, nil
}

// BatchProgress is how far an unfinished batch got, as its epoch status
// marks say.
type BatchProgress struct {
	Levels int   // levels of the tree the batch started from
	Depth  int   // d
	Lanes  []int // levels each workgroup has durably completed (of Levels-Depth)
	Top    int   // steps of the device-scope part durably completed (levels above d, then the leaf chain)
}

// Done reports whether level lv (0: the leaves) is durably complete in
// every workgroup and in the device-scope part.
func (p BatchProgress) Done(lv int) bool {
	own := p.Levels - p.Depth
	if lv < own {
		for _, l := range p.Lanes {
			if l <= lv {
				return false
			}
		}
		return true
	}
	return p.Top > lv-own
}

// Progress reads from a durable image how far the unfinished batch of the
// tree in region got. ok is false if the tree has no unfinished batch.
func Progress(img *pm.Image, region string) (p BatchProgress, ok bool, err error) {
	r, found := img.Region(region)
	if !found {
		return p, false, fmt.Errorf("btree: %w: %q", pm.ErrNoRegion, region)
	}
	data := r.Data
	if len(data) < fixedEnd {
		return p, false, fmt.Errorf("%w: region of %d bytes", ErrCorrupt, len(data))
	}
	g, err := decodeHeader(data[headerOff:])
	if err != nil {
		return p, false, err
	}
	if uint64(len(data)) < g.size() {
		return p, false, fmt.Errorf("%w: region of %d bytes, header needs %d", ErrCorrupt, len(data), g.size())
	}
	commit := binary.LittleEndian.Uint64(data[commitOff:])
	rec, err := decodeRecord(data[recordOff:], g)
	if err != nil || rec.seq != commit+1 || rec.del == 1 {
		return p, false, nil
	}
	p = BatchProgress{Levels: int(rec.oldHeight), Depth: int(rec.d), Lanes: make([]int, rec.lanes)}
	for l := range p.Lanes {
		p.Lanes[l], _ = markDone(binary.LittleEndian.Uint64(data[g.marksOff()+8*uint64(l):]), rec.seq, 0)
	}
	p.Top, _ = markDone(binary.LittleEndian.Uint64(data[g.marksOff()+8*rec.lanes:]), rec.seq, 0)
	return p, true, nil
}
