package btree

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The insertion kernel, written once for both algorithms.
//
// Phase A: every thread finds the leaf of each of its keys, recording the
// node it passes at every depth (path, in device memory). Keys are sorted,
// so the keys under one node form a run; the first key of a run owns the
// node.
//
// Phase B (Algorithm 2): each workgroup, for the levels of its subtree
// from the leaves up to depth d, lets every owner merge its run into a
// copy of its node (leaves merge keys; internal nodes replace each touched
// child by the pieces that child became), split the result evenly into
// pieces of at most Order entries, write the pieces to fresh nodes, and
// record them (first key, node id) in a piece buffer for the parent level.
// Then a barrier and a persist barrier of LevelScope, then the workgroup's
// epoch status mark (levels done).
//
// Phase C: a kernel-wide persist barrier, then the levels above d (all
// levels for Algorithm 1), each ending with a TopScope persist barrier and
// the top lane's mark. The root's owner grows the tree when the root
// splits and writes the batch's result (new root, height). Last, the leaf
// chain: each leaf owner links its last piece to the next leaf (or its
// replacement) and points the untouched leaf before it, if any, at its
// first piece; a final barrier and mark say the batch is done.
type kern struct {
	g                    geometry
	base                 pm.Addr
	seq                  uint64
	n, h, d, order       int
	root                 uint32
	lanes                []laneInfo
	laneDone             []int
	topDone              int
	starts               [][]uint64 // per lane (then the top), per level: the free-list slice starts
	alg                  Alg
	levelScope, topScope pm.Scope

	// The region's areas, from g and base (areas): the kernels compute
	// addresses in them for every access.
	nodesAt, keysAt, valsAt, marksAt, freeAt pm.Addr
	bufAt                                    [pieceBufs]pm.Addr

	path, offs, errw, bar pm.Addr // device memory
	total                 uint64  // threads in the grid
	result                scope.Result
	// writes[lane][level]: PM words written in each epoch (level 0 the
	// leaves, k.h the leaf chain; lane len(lanes) the device-scope part).
	// Instrumentation only: the engine runs one thread at a time.
	writes [][]uint64
	// allocErr describes the first allocation that did not fit.
	allocErr string

	// mem is the machine's memory: verify reads a node's bytes from it
	// directly, untimed (see verify).
	mem *pm.Memory
	// badMu guards bad, the first node a thread found corrupt (its error
	// names the node); the insert kernel also sets errNode in the error
	// word, the lookups return bad after their launch.
	badMu sync.Mutex
	bad   error
	// failed is set with the error word (fail): from then on threads
	// write nothing, no node, piece or mark, only keep to the barriers, so
	// the batch stays as a crash at that point would leave it and Recover
	// can redo it once the damage is repaired. Go-side and untimed: a run
	// that does not fail is timed as before.
	failed atomic.Bool
}

// corrupt records err, a node that does not decode, if it is the first.
func (k *kern) corrupt(err error) {
	k.badMu.Lock()
	defer k.badMu.Unlock()
	if k.bad == nil {
		k.bad = err
	}
}

// verify checks node id against its checksums, given the header word h
// the thread loaded: it returns the node's count, or -1 (and records the
// error) if h does not decode, is not the kind leaf asks for, or the
// node's checksum (nodeSum) does not match. A GPU thread would read the
// whole node and hash it; here the node's bytes are read from the memory
// image directly and hashed in Go, so the check is NOT timed: it adds no
// simulated memory traffic and no Work cycles, and the kernels' simulated
// timing is what it was before nodes had checksums.
func (k *kern) verify(id uint32, h uint64, leaf bool) int {
	cnt, err := checkHeader(id, h, k.order)
	if err == nil && (h>>8&0xff == kindLeaf) != leaf {
		err = fmt.Errorf("%w: node %d: header %#x, want leaf=%v", ErrCorrupt, id, h, leaf)
	}
	if err == nil {
		var b []byte
		if b, _, err = k.mem.Bytes(k.node(id), k.g.nodeBytes, 8); err != nil {
			err = fmt.Errorf("%w: node %d: %w", ErrCorrupt, id, err)
		} else if sum := nodeSum(id, b, k.order); uint32(h>>32) != sum {
			err = fmt.Errorf("%w: node %d: checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, id, uint32(h>>32), sum)
		}
	}
	if err != nil {
		k.corrupt(err)
		return -1
	}
	return cnt
}

// nextOf returns the next leaf in node id's next word w, the thread
// loaded; if the word's check fails it records the error and returns
// false. Untimed, like verify.
func (k *kern) nextOf(id uint32, w uint64) (uint32, bool) {
	next, ok := nextOf(id, w)
	if !ok {
		k.corrupt(fmt.Errorf("%w: node %d: next word %#x fails its check", ErrCorrupt, id, w))
	}
	return next, ok
}

func (k *kern) addWrites(lane, level int, w uint64) { k.writes[lane][level] += w }

// Error codes a kernel thread reports in the error word.
const (
	errNode  = 1 // a node that does not decode
	errAlloc = 2 // a lane ran out of its free nodes
	errPiece = 3 // a piece record that makes no sense
)

func (k *kern) launch(m *pm.Machine, offs []uint32, o BatchOptions) error {
	top := len(k.lanes)
	blocks := len(k.lanes)
	bs := o.BlockThreads
	k.total = uint64(blocks * bs)
	k.writes = make([][]uint64, top+1)
	for l := range k.writes {
		k.writes[l] = make([]uint64, k.h+1)
	}
	var err error
	alloc := func(n uint64) pm.Addr {
		if err != nil {
			return 0
		}
		var a pm.Addr
		a, err = m.Alloc(pm.DeviceMem, max(n, 8))
		return a
	}
	k.path = alloc(uint64(4 * k.h * k.n))
	k.offs = alloc(uint64(4 * len(offs)))
	k.errw = alloc(8)
	k.bar = alloc(8)
	if err != nil {
		return fmt.Errorf("btree: device memory: %w", err)
	}
	defer func() {
		for _, a := range []pm.Addr{k.path, k.offs, k.errw, k.bar} {
			_ = m.Free(a)
		}
	}()
	cb := make([]byte, 4*len(offs))
	for i, c := range offs {
		pm.PutLE(cb[4*i:4*i+4], uint64(c))
	}
	if err := m.CopyIn(k.offs, cb); err != nil {
		return err
	}
	opts := append([]scope.Option{scope.WithName("btree-" + k.alg.String())}, o.Launch...)
	k.result, err = scope.Launch(m, scope.Grid{Blocks: blocks, Threads: bs}, k.kernel, opts...)
	if err != nil {
		return fmt.Errorf("btree: insert kernel: %w", err)
	}
	code, err := m.Memory().Load(k.errw, 8)
	if err != nil {
		return err
	}
	if code != 0 {
		what := map[uint64]string{errNode: "a node that does not decode", errAlloc: "a lane out of free nodes", errPiece: "a bad piece record"}[code&0xff]
		if code&0xff == errNode && k.bad != nil {
			return fmt.Errorf("insert kernel found %s (thread %d): %w", what, code>>8, k.bad)
		}
		return fmt.Errorf("%w: insert kernel found %s (thread %d) %s", ErrCorrupt, what, code>>8, k.allocErr)
	}
	return nil
}

func (k *kern) fail(t *scope.Thread, code uint64) {
	k.failed.Store(true)
	t.AtomicCAS64(k.errw, 0, code|uint64(t.ID())<<8, pm.Device)
}

// areas sets the addresses of the region's areas; every kern is built with
// it.
func (k *kern) areas() *kern {
	k.nodesAt, k.keysAt, k.valsAt = k.base.Add(k.g.nodesOff()), k.base.Add(k.g.keysOff()), k.base.Add(k.g.valsOff())
	k.marksAt, k.freeAt = k.base.Add(k.g.marksOff()), k.base.Add(k.g.freeOff())
	for i := range k.bufAt {
		k.bufAt[i] = k.base.Add(k.g.bufOff(i))
	}
	return k
}

// Addresses.
func (k *kern) node(id uint32) pm.Addr         { return k.nodesAt.Add(uint64(id) * k.g.nodeBytes) }
func (k *kern) key(i int) pm.Addr              { return k.keysAt.Add(8 * uint64(i)) }
func (k *kern) val(i int) pm.Addr              { return k.valsAt.Add(8 * uint64(i)) }
func (k *kern) pathAt(depth, i int) pm.Addr    { return k.path.Add(4 * uint64(depth*k.n+i)) }
func (k *kern) mark(lane int) pm.Addr          { return k.marksAt.Add(8 * uint64(lane)) }
func (k *kern) offAt(depth, i int) pm.Addr     { return k.offs.Add(4 * uint64(depth*k.n+i)) }
func (k *kern) freeID(i uint64) pm.Addr        { return k.freeAt.Add(4 * i) }
func (k *kern) keyAt(id uint32, j int) pm.Addr { return k.node(id).Add(16 + 8*uint64(j)) }
func (k *kern) valAt(id uint32, j int) pm.Addr {
	return k.node(id).Add(16 + 8*uint64(k.order) + 8*uint64(j))
}

// buf returns the piece buffer of depth: the leaves have their own (the
// leaf chain reads it last); internal depths rotate over three. Two would
// not do: the level at depth x reads the pieces of depth x+1, and its redo
// after a crash needs them intact, but the writes of the level at depth
// x-1 share an epoch with x's mark (both come after x's persist barrier),
// so they may be durable while the mark is not. Three buffers keep x-1's
// pieces out of x+1's buffer; depth x-2, which reuses it, writes only
// after the next barrier, once x's mark is durable.
func (k *kern) buf(depth int) pm.Addr {
	if depth == k.h-1 {
		return k.bufAt[0]
	}
	return k.bufAt[1+depth%innerBufs]
}

// innerBufs is how many piece buffers the internal depths rotate over:
// pieceBufs-1. A test sets it to 2, the layout before the fix that kern.buf
// describes, to show that the crash checker finds that bug.
var innerBufs = pieceBufs - 1

func (k *kern) pieceAt(depth, i int) pm.Addr { return k.buf(depth).Add(16 * uint64(i)) }

func (k *kern) kernel(t *scope.Thread) {
	lane := t.Block()
	ln := k.lanes[lane]
	bs, tid := t.BlockDim(), t.TID()
	ks, ke := int(ln.ks), int(ln.ke)
	for i := ks + tid; i < ke; i += bs {
		k.findLeaf(t, i)
	}
	var arrivals uint64
	if k.alg == Alg2 {
		t.SyncThreads()
		for li := 0; li < k.h-k.d; li++ {
			if li < k.laneDone[lane] {
				continue
			}
			depth := k.h - 1 - li
			for i := ks + tid; i < ke; i += bs {
				if !k.failed.Load() && (i == ks || k.pathOf(t, depth, i-1) != k.pathOf(t, depth, i)) {
					k.process(t, depth, i, ke, lane)
				}
			}
			k.levelBarrier(t)
			if tid == 0 && !k.failed.Load() {
				k.setMark(t, lane, li+1)
			}
		}
	}
	k.topBarrier(t, &arrivals)
	top := len(k.lanes)
	for ti := 0; ti < k.d; ti++ {
		if ti < k.topDone {
			continue
		}
		depth := k.d - 1 - ti
		for i := ks + tid; i < ke; i += bs {
			if !k.failed.Load() && (i == 0 || k.pathOf(t, depth, i-1) != k.pathOf(t, depth, i)) {
				k.process(t, depth, i, k.n, top)
			}
		}
		k.topBarrier(t, &arrivals)
		if t.ID() == 0 && !k.failed.Load() {
			k.setMark(t, top, ti+1)
		}
	}
	if k.topDone <= k.d {
		for i := ks + tid; i < ke; i += bs {
			if !k.failed.Load() && (i == 0 || k.pathOf(t, k.h-1, i-1) != k.pathOf(t, k.h-1, i)) {
				k.chain(t, i)
			}
		}
		k.topBarrier(t, &arrivals)
		if t.ID() == 0 && !k.failed.Load() {
			k.setMark(t, top, k.d+1)
		}
	}
}

// levelBarrier ends a level of a workgroup's subtree: the workgroup
// waits for all its threads, and its persists so far are ordered before
// its later ones (PBarrier of LevelScope; a narrower scope than Block is
// preceded by an explicit block barrier so the kernel still runs right).
func (k *kern) levelBarrier(t *scope.Thread) {
	if k.levelScope == pm.Block {
		t.PBarrier(pm.Block) // btree: level barrier
		return
	}
	t.SyncThreads()
	t.PBarrier(k.levelScope)
}

// topBarrier is the kernel-wide barrier with a TopScope persist barrier.
// Device scope is both; a narrower scope (a bug, for the checker) needs a
// software grid barrier, which needs the whole grid resident.
func (k *kern) topBarrier(t *scope.Thread, arrivals *uint64) {
	if k.topScope >= pm.Device {
		t.PBarrier(k.topScope) // btree: top barrier
		return
	}
	*arrivals++
	t.AtomicAdd64(k.bar, 1, pm.Device)
	for t.Load64(k.bar) < *arrivals*k.total {
	}
	t.PBarrier(k.topScope)
}

func (k *kern) setMark(t *scope.Thread, lane, done int) {
	level := done - 1
	if lane == len(k.lanes) {
		level = k.h - k.d + done - 1
	}
	k.addWrites(lane, level, 1)
	t.Store64(k.mark(lane), markWord(k.seq, done, 0))
}

func (k *kern) pathOf(t *scope.Thread, depth, i int) uint32 { return t.Load32(k.pathAt(depth, i)) }

// header loads a node's header word and checks it and the node's
// checksum (verify); count -1 on failure.
func (k *kern) header(t *scope.Thread, id uint32, leaf bool) int {
	if id == 0 || uint64(id) >= k.g.capacity {
		k.corrupt(fmt.Errorf("%w: node id %d of %d", ErrCorrupt, id, k.g.capacity))
		k.fail(t, errNode)
		return -1
	}
	cnt := k.verify(id, t.Load64(k.node(id)), leaf)
	if cnt < 0 {
		k.fail(t, errNode)
	}
	return cnt
}

// findLeaf walks key i from the old root to its leaf, recording the path.
func (k *kern) findLeaf(t *scope.Thread, i int) {
	key := t.Load64(k.key(i))
	id := k.root
	for depth := range k.h {
		t.Store32(k.pathAt(depth, i), id)
		if depth == k.h-1 {
			return
		}
		cnt := k.header(t, id, false)
		if cnt < 0 {
			return
		}
		id = k.child(t, id, cnt, key)
	}
}

// child returns the child of inner node id (cnt entries) whose subtree
// holds key: the one after the separators <= key (a binary search).
func (k *kern) child(t *scope.Thread, id uint32, cnt int, key uint64) uint32 {
	lo, hi := 0, cnt-1
	for lo < hi {
		mid := (lo + hi) / 2
		if t.Load64(k.keyAt(id, mid)) <= key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return uint32(t.Load64(k.valAt(id, lo)))
}

// runEnd returns the end of the run of keys that start at owner i and
// share its node at depth (keys are sorted, so the run is contiguous).
func (k *kern) runEnd(t *scope.Thread, depth, i, hi int) int {
	p := k.pathOf(t, depth, i)
	lo := i + 1
	for lo < hi {
		mid := (lo + hi) / 2
		if k.pathOf(t, depth, mid) == p {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// lowerBound returns the first index in [lo, hi) whose key is >= key.
func (k *kern) lowerBound(t *scope.Thread, lo, hi int, key uint64) int {
	for lo < hi {
		mid := (lo + hi) / 2
		if t.Load64(k.key(mid)) < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// entry is a leaf entry (key, value) or an internal one (separator before
// the child, child id).
type entry struct{ key, val uint64 }

// process merges the run of owner i at depth into copies of its node,
// writes the pieces and records them. lane is the allocation lane, hi the
// end of the keys a run can span. The owner's pieces take the free-list
// slice the plan gave it, so node ids do not depend on thread order.
func (k *kern) process(t *scope.Thread, depth, i, hi, lane int) {
	j := k.runEnd(t, depth, i, hi)
	id := k.pathOf(t, depth, i)
	leaf := depth == k.h-1
	cnt := k.header(t, id, leaf)
	if cnt < 0 {
		return
	}
	var merged []entry
	if leaf {
		a := 0
		for b := i; a < cnt || b < j; {
			var ok, nk uint64
			if a < cnt {
				ok = t.Load64(k.keyAt(id, a))
			}
			if b < j {
				nk = t.Load64(k.key(b))
			}
			switch {
			case b >= j || (a < cnt && ok < nk):
				merged = append(merged, entry{ok, t.Load64(k.valAt(id, a))})
				a++
			case a >= cnt || nk < ok:
				merged = append(merged, entry{nk, t.Load64(k.val(b))})
				b++
			default: // the key is present: new value
				merged = append(merged, entry{nk, t.Load64(k.val(b))})
				a++
				b++
			}
		}
	} else {
		from := i
		for c := range cnt {
			var sep uint64
			if c > 0 {
				sep = t.Load64(k.keyAt(id, c-1))
			}
			child := t.Load64(k.valAt(id, c))
			x := from
			if c > 0 {
				x = k.lowerBound(t, from, j, sep)
			}
			from = x
			touched := x < j
			if touched && c < cnt-1 {
				touched = t.Load64(k.key(x)) < t.Load64(k.keyAt(id, c))
			}
			if !touched {
				merged = append(merged, entry{sep, child})
				continue
			}
			if uint64(k.pathOf(t, depth+1, x)) != child {
				k.fail(t, errPiece)
				return
			}
			for p := 0; ; p++ {
				if 2*x+p >= 2*k.n {
					k.fail(t, errPiece)
					return
				}
				pk := t.Load64(k.pieceAt(depth+1, 2*x+p))
				pv := t.Load64(k.pieceAt(depth+1, 2*x+p).Add(8))
				if p == 0 {
					pk = sep
				}
				merged = append(merged, entry{pk, pv &^ lastPiece})
				if pv&lastPiece != 0 {
					break
				}
			}
		}
	}
	var w uint64
	defer func() { k.addWrites(lane, k.h-1-depth, w) }()
	lv := k.h - 1 - depth
	cur := uint64(t.Load32(k.offAt(depth, i)))
	pieces := k.writePieces(t, merged, leaf, lane, lv, &cur, id, &w)
	if pieces == nil {
		return
	}
	for p, e := range pieces {
		v := e.val
		if p == len(pieces)-1 {
			v |= lastPiece
		}
		t.Store64(k.pieceAt(depth, 2*i+p), e.key)
		t.Store64(k.pieceAt(depth, 2*i+p).Add(8), v)
		w += 2
	}
	if depth == 0 {
		height := k.h
		for len(pieces) > 1 {
			pieces = k.writePieces(t, pieces, false, lane, lv, &cur, 0, &w)
			if pieces == nil {
				return
			}
			height++
		}
		res := k.base.Add(resultOff)
		t.Store64(res, k.seq)
		t.Store64(res.Add(8), pieces[0].val)
		t.Store64(res.Add(16), uint64(height))
		w += 3
	}
}

// writePieces splits entries evenly into nodes of at most Order entries,
// allocates and writes them, and returns (first key, id) per piece. The
// pieces of a leaf are chained; the last keeps the old leaf's next until
// the chain pass.
func (k *kern) writePieces(t *scope.Thread, es []entry, leaf bool, lane, lv int, cur *uint64, old uint32, w *uint64) []entry {
	p := (len(es) + k.order - 1) / k.order
	if p == 0 {
		p = 1
	}
	base := *cur
	*cur += uint64(p)
	end := k.starts[lane][lv+1]
	if base+uint64(p) > end {
		if k.allocErr == "" {
			k.allocErr = fmt.Sprintf("lane %d of %d: %d nodes at cursor %d, lane ends at %d", lane, len(k.lanes), p, base, end)
		}
		k.fail(t, errAlloc)
		return nil
	}
	ids := make([]uint32, p)
	for q := range ids {
		ids[q] = t.Load32(k.freeID(base + uint64(q)))
	}
	var oldNext uint32
	if leaf && old != 0 {
		var ok bool
		if oldNext, ok = k.nextOf(old, t.Load64(k.node(old).Add(8))); !ok {
			k.fail(t, errNode)
			return nil
		}
	}
	out := make([]entry, p)
	at := 0
	for q := range p {
		sz := len(es)/p + btoi(q < len(es)%p)
		part := es[at : at+sz]
		at += sz
		id := ids[q]
		out[q] = entry{part[0].key, uint64(id)}
		next := uint32(0)
		if leaf {
			next = oldNext
			if q < p-1 {
				next = ids[q+1]
			}
		}
		// The node's image, for its checksums: computed in Go, not timed
		// (no simulated traffic, no Work cycles; see verify). The thread
		// stores the same words it stored before nodes had checksums.
		img := encodeNode(nodeOf(part, leaf, next), k.order, id)
		t.Store64(k.node(id), pm.GetLE(img[0:8]))
		t.Store64(k.node(id).Add(8), pm.GetLE(img[8:16]))
		*w += 2 + uint64(len(part)) + uint64(len(part)) - uint64(btoi(!leaf))
		for e, en := range part {
			if leaf {
				t.Store64(k.keyAt(id, e), en.key)
			} else if e > 0 {
				t.Store64(k.keyAt(id, e-1), en.key)
			}
			t.Store64(k.valAt(id, e), en.val)
		}
	}
	return out
}

// nodeOf is the node that entries make (a leaf's entries, or an internal
// node's separator and child per entry, the first separator unused).
func nodeOf(es []entry, leaf bool, next uint32) *node {
	n := &node{leaf: leaf, next: next, vals: make([]uint64, len(es))}
	for i, e := range es {
		if leaf || i > 0 {
			n.keys = append(n.keys, e.key)
		}
		n.vals[i] = e.val
	}
	return n
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// chain links the leaf pieces of owner i into the leaf chain.
func (k *kern) chain(t *scope.Thread, i int) {
	leafDepth := k.h - 1
	c := k.pathOf(t, leafDepth, i)
	j := k.runEnd(t, leafDepth, i, k.n)
	first := uint32(t.Load64(k.pieceAt(leafDepth, 2*i).Add(8)) &^ lastPiece)
	last := first
	for p := 0; ; p++ {
		if 2*i+p >= 2*k.n {
			k.fail(t, errPiece)
			return
		}
		v := t.Load64(k.pieceAt(leafDepth, 2*i+p).Add(8))
		last = uint32(v &^ lastPiece)
		if v&lastPiece != 0 {
			break
		}
	}
	oldNext, ok := k.nextOf(c, t.Load64(k.node(c).Add(8)))
	if !ok {
		k.fail(t, errNode)
		return
	}
	next := oldNext
	if j < k.n && oldNext != 0 && k.pathOf(t, leafDepth, j) == oldNext {
		next = uint32(t.Load64(k.pieceAt(leafDepth, 2*j).Add(8)) &^ lastPiece)
	}
	if last == 0 || first == 0 || uint64(last) >= k.g.capacity || uint64(first) >= k.g.capacity {
		k.fail(t, errPiece)
		return
	}
	t.Store64(k.node(last).Add(8), nextWord(last, next))
	k.addWrites(len(k.lanes), k.h, 1)
	// The leaf before c in the old tree: up to the first ancestor where c's
	// branch is not the leftmost, one child left, then rightmost down.
	var pred uint32
	for depth := leafDepth - 1; depth >= 0 && pred == 0; depth-- {
		parent, child := k.pathOf(t, depth, i), k.pathOf(t, depth+1, i)
		cnt := k.header(t, parent, false)
		if cnt < 0 {
			return
		}
		for x := 1; x < cnt; x++ {
			if uint32(t.Load64(k.valAt(parent, x))) != child {
				continue
			}
			pred = uint32(t.Load64(k.valAt(parent, x-1)))
			for d := depth + 1; d < leafDepth; d++ {
				n := k.header(t, pred, false)
				if n < 0 {
					return
				}
				pred = uint32(t.Load64(k.valAt(pred, n-1)))
			}
			break
		}
	}
	if pred != 0 && (i == 0 || k.pathOf(t, leafDepth, i-1) != pred) {
		t.Store64(k.node(pred).Add(8), nextWord(pred, first)) // one aligned word: pointer and check
		k.addWrites(len(k.lanes), k.h, 1)
	}
}
