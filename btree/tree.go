package btree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"sync"

	"github.com/scopedpm/scopedpm/pm"
)

// Options size a new tree.
type Options struct {
	// Order is the most entries of a leaf and the most children of an
	// internal node (MinOrder..MaxOrder); 0 means DefaultOrder.
	Order int
	// Capacity is the size of the node pool, in nodes. A batch needs free
	// nodes for every node it copies or splits, so leave room: about
	// twice the live nodes plus the batch's keys. 0 means 1024.
	Capacity int
	// MaxBatch is the largest batch of keys (0 means 4096); MaxLanes the
	// most workgroups of Algorithm 2 or blocks of Algorithm 1 (0 means
	// MaxBatch).
	MaxBatch, MaxLanes int
}

// DefaultOrder is the order of a tree created with Options.Order 0: 15
// entries make a node of 256 bytes, four 64-byte lines of the gope preset (the machine
// of the scoped persist barrier paper, Gope et al.).
const DefaultOrder = 15

func (o Options) geometry() (geometry, error) {
	if o.Order == 0 {
		o.Order = DefaultOrder
	}
	if o.Capacity == 0 {
		o.Capacity = 1024
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 4096
	}
	if o.MaxLanes == 0 {
		o.MaxLanes = o.MaxBatch
	}
	if o.Order < MinOrder || o.Order > MaxOrder || o.Capacity < 2 || o.Capacity >= MaxCapacity ||
		o.MaxBatch < 1 || o.MaxBatch > MaxBatchKeys || o.MaxLanes < 1 {
		return geometry{}, fmt.Errorf("%w: options %+v", ErrBadArg, o)
	}
	g := geometry{order: o.Order, nodeBytes: nodeBytesFor(o.Order), capacity: uint64(o.Capacity) + 1,
		maxBatch: uint64(o.MaxBatch), maxLanes: uint64(min(o.MaxLanes, o.MaxBatch))}
	return g, g.validate()
}

// Tree is a B+tree of uint64 keys and values in one PM region.
//
// # Layout and commit point
//
// Nodes have a fixed size and come from a pool in the region; a bitmap
// says which are in use. Every change is copy-on-write: a batch writes new
// nodes for every node it changes and never writes a node of the committed
// tree, except the next pointer of a leaf whose right neighbour it
// replaced (see Recover). The region holds two meta lines (root, height,
// key count) and two bitmaps, one of each per parity of the batch number.
// The commit point of a batch is one aligned 8-byte store: the commit
// word, which holds the number of the last committed batch and so selects
// the meta line and the bitmap of the committed tree.
//
// # Durability
//
// A write (Put, Delete, InsertBatch) is durable when it returns nil: its
// commit word is stored by a host copy, which is durable when it returns
// (pm.Machine.CopyIn). A write that returns an error may still happen: once
// its batch record is durable (before any node is written) the write rolls
// forward, and the next Open or Recover finishes it; until then the tree
// refuses other writes with ErrRecovery. Errors found before the record
// (ErrBadArg, ErrFull, ErrRecovery) leave the tree as it was. Reads see
// the last committed batch only, so whatever they return is durable (after
// a write that failed, call Recover before Scan: a leaf's next pointer may
// already point into the unfinished batch, as after OpenPending).
//
// # Concurrency
//
// A Tree is not safe for concurrent use: it drives its pm.Machine, which
// is not either. Reads (Get, Scan, Len, Check) may run concurrently with
// each other only if nothing writes the tree or launches on the machine
// meanwhile. Batches are parallel inside: InsertBatch runs one GPU kernel
// whose threads insert the batch's keys together. Scan's iterator reads
// the tree lazily; do not modify the tree while iterating.
type Tree struct {
	m    *pm.Machine
	name string
	r    pm.Range
	g    geometry
	// node0 is g.nodeAddr(r.Base, 0): node id lies at node0 plus
	// id*g.nodeBytes (readNodeInto, without deriving the offset each time).
	node0 pm.Addr
	// noAtomic is a testing knob: the host insert path writes the whole
	// resumable protocol even where the backend could make it atomic.
	noAtomic bool
	cur      meta
	bm       [2][]uint64 // volatile copies of the two bitmaps
	// diff lists the words where bm[0] and bm[1] may differ (every other
	// word is equal in both); nodes is the number of nodes marked in the
	// committed bitmap, and hint a node id no greater than its first free
	// one. publish keeps the three, so that a commit costs what it changes.
	diff  []int
	nodes int
	hint  uint64
	// reach is changes' scratch bitmap of the nodes its walk of a new tree
	// reached, all clear between commits.
	reach []uint64
	// chScratch holds changes' slices between commits, planScratch
	// planPaths' arrays (a plan's live until the next plan).
	chScratch changeScratch
	// stageBuf and stageFree are stage's buffers.
	stageBuf    []byte
	stageFree   []uint64
	planScratch planScratch
	// pubMark, pubCand and pubAt are publish's scratch: a bit a bitmap
	// word (all clear between commits), the candidate words, and each
	// candidate's index in them.
	pubMark []uint64
	pubCand []int
	pubAt   []int32
	// held and wb are insertHost's buffers of held writes, pieceBuf its
	// piece records and planNodes planPaths' index of the nodes a plan
	// reads, all kept between batches.
	held      []pm.Write
	wb        []byte
	pieceBuf  []entry
	planNodes nodeIndex
	// nc caches decoded committed nodes for insertHost (nodeCache).
	nc *nodeCache
	// keep marks the nodes freed by batches that views of earlier ones
	// may still read, kept out of reuse; kept lists them by batch (see
	// keepFreed). Both nil unless keepFreed was called.
	keep []uint64
	kept []keptIDs

	knobs testingKnobs // set by tests (export_test.go)
}

// changeScratch is changes' slices, kept between commits.
type changeScratch struct{ reached, made, freed, level, next []uint32 }

// planScratch is planPaths' arrays, kept between plans.
type planScratch struct {
	path, offs []uint32
	laneOf     []int
	ownerP     []uint64
	on         []*node // the descent's internal nodes by depth (planPaths)
	via        []int   // the child each took
}

// testingKnobs are a tree's test hooks, per instance so that tests can run
// in parallel.
type testingKnobs struct {
	// crashBeforeCommit makes a delete return it just before its commit.
	crashBeforeCommit error
	// noNodeCache turns insertHost's node cache off.
	noNodeCache bool
	// nodeCacheMax, if not 0, is the most nodes the node cache holds.
	nodeCacheMax int
}

// Create creates a tree in a new PM region named region: an empty root
// leaf, committed as batch 1, durable when Create returns.
func Create(m *pm.Machine, region string, o Options) (*Tree, error) {
	g, err := o.geometry()
	if err != nil {
		return nil, err
	}
	r, err := m.CreateRegion(region, g.size())
	if err != nil {
		return nil, fmt.Errorf("btree: create %q: %w", region, err)
	}
	t := &Tree{m: m, name: region, r: r, g: g, hint: 1, node0: g.nodeAddr(r.Base, 0)}
	words := int(g.bitmapBytes() / 8)
	t.bm[0], t.bm[1] = make([]uint64, words), make([]uint64, words)
	if err := t.write(r.Base.Add(headerOff), g.encode()); err != nil {
		return nil, err
	}
	root := &node{leaf: true}
	if err := t.write(g.nodeAddr(r.Base, 1), encodeNode(root, g.order, 1)); err != nil {
		return nil, err
	}
	if err := t.publish(meta{seq: 1, root: 1, height: 1}, []uint32{1}, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// Open opens the tree in the PM region named region and, if a batch was
// interrupted by a crash, finishes it (Recover with default options): the
// tree it returns is the last committed one, with that batch committed and
// durable.
func Open(m *pm.Machine, region string) (*Tree, error) {
	t, err := openNoRecover(m, region)
	if err != nil {
		return nil, err
	}
	if _, err := t.Recover(BatchOptions{}); err != nil {
		return nil, err
	}
	return t, nil
}

// OpenPending opens the tree in region without finishing an interrupted
// batch: the tree is the last committed one, and Recover finishes the
// batch. Reads see the committed tree, but a leaf's next pointer may
// already point into the unfinished batch: call Recover before Scan. It
// writes nothing.
func OpenPending(m *pm.Machine, region string) (*Tree, error) { return openNoRecover(m, region) }

func openNoRecover(m *pm.Machine, region string) (*Tree, error) {
	r, err := m.OpenRegion(region)
	if err != nil {
		return nil, fmt.Errorf("btree: open %q: %w", region, err)
	}
	t := &Tree{m: m, name: region, r: r}
	hb := make([]byte, line)
	if err := t.read(r.Base, hb); err != nil {
		return nil, err
	}
	if t.g, err = decodeHeader(hb); err != nil {
		return nil, fmt.Errorf("btree: region %q: %w", region, err)
	}
	t.node0 = t.g.nodeAddr(r.Base, 0)
	if t.g.size() > r.Size {
		return nil, fmt.Errorf("%w: region %q of %d bytes, header needs %d", ErrCorrupt, region, r.Size, t.g.size())
	}
	seq, err := t.load64(r.Base.Add(commitOff))
	if err != nil {
		return nil, err
	}
	if t.cur, err = t.readMeta(seq); err != nil {
		return nil, err
	}
	for i := range 2 {
		b := make([]byte, t.g.bitmapBytes())
		if err := t.read(r.Base.Add(t.g.bitmapOff(i)), b); err != nil {
			return nil, err
		}
		t.bm[i] = make([]uint64, len(b)/8)
		for w := range t.bm[i] {
			t.bm[i][w] = binary.LittleEndian.Uint64(b[8*w:])
		}
	}
	// The derived state publish keeps from here on.
	t.hint = 1
	for w := range t.bm[0] {
		if t.bm[0][w] != t.bm[1][w] {
			t.diff = append(t.diff, w)
		}
		t.nodes += bits.OnesCount64(t.bm[t.cur.seq&1][w])
	}
	return t, nil
}

func (t *Tree) readMeta(seq uint64) (meta, error) {
	if seq == 0 {
		return meta{}, fmt.Errorf("%w: no committed batch", ErrCorrupt)
	}
	b := make([]byte, line)
	if err := t.read(t.r.Base.Add(metaOff+(seq&1)*line), b); err != nil {
		return meta{}, err
	}
	mt, err := decodeMeta(b, t.g)
	if err != nil {
		return meta{}, err
	}
	if mt.seq != seq {
		return meta{}, fmt.Errorf("%w: commit word says batch %d, its meta line batch %d", ErrCorrupt, seq, mt.seq)
	}
	return mt, nil
}

// publish commits mt: the bitmap of parity mt.seq becomes the bitmap of
// the other parity (the tree mt replaces) with the nodes set marked in use
// and the nodes clr marked free; then the meta line, then the commit word,
// the commit point. Host writes are durable when they return.
//
// Only the bitmap words that differ from the PM copy of parity mt.seq are
// written, as one span from the first to the last: t.diff lists the words
// where the two bitmaps may differ, so the cost is in the words the last
// two batches changed, not in the size of the pool.
func (t *Tree) publish(mt meta, set, clr []uint32) error {
	p := mt.seq & 1
	dst, src := t.bm[p], t.bm[1-p]
	// The candidate words, ascending: those that may differ between the
	// parities, and those of the changed nodes (marked in t.pubMark, a bit
	// a word, then collected and cleared); their new values.
	if len(t.pubMark) < (len(src)+63)/64 {
		t.pubMark = make([]uint64, (len(src)+63)/64)
	}
	mark := func(w int) { t.pubMark[w/64] |= 1 << (w % 64) }
	for _, w := range t.diff {
		mark(w)
	}
	for _, ids := range [2][]uint32{set, clr} {
		for _, id := range ids {
			mark(int(id / 64))
		}
	}
	cand := t.pubCand[:0]
	for i, m := range t.pubMark {
		for ; m != 0; m &= m - 1 {
			cand = append(cand, 64*i+bits.TrailingZeros64(m))
		}
		t.pubMark[i] = 0
	}
	t.pubCand = cand
	// nv[i] is candidate word cand[i]'s new value; at finds a word's
	// index through t.pubAt, which only the candidates' entries are read
	// from.
	if len(t.pubAt) < len(src) {
		t.pubAt = make([]int32, len(src))
	}
	nv := make([]uint64, len(cand))
	for i, w := range cand {
		nv[i] = src[w]
		t.pubAt[w] = int32(i)
	}
	at := func(id uint32) int { return int(t.pubAt[id/64]) }
	for _, id := range clr {
		nv[at(id)] &^= 1 << (id % 64)
	}
	for _, id := range set {
		nv[at(id)] |= 1 << (id % 64)
	}
	lo, hi := -1, -1
	for i, w := range cand {
		if dst[w] != nv[i] {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo >= 0 {
		// One copy of the changed span: each host write is a drain point
		// for a timing backend. Between the candidates, the words equal
		// the other parity's, so dst already holds them.
		wlo, whi := cand[lo], cand[hi]
		b := make([]byte, 8*(whi-wlo+1))
		for w := wlo; w <= whi; w++ {
			binary.LittleEndian.PutUint64(b[8*(w-wlo):], dst[w])
		}
		for i := lo; i <= hi; i++ {
			binary.LittleEndian.PutUint64(b[8*(cand[i]-wlo):], nv[i])
		}
		if err := t.write(t.r.Base.Add(t.g.bitmapOff(int(p))+uint64(8*wlo)), b); err != nil {
			return err
		}
		for i := lo; i <= hi; i++ {
			dst[cand[i]] = nv[i]
		}
	}
	var buf [8]byte
	if err := t.write(t.r.Base.Add(metaOff+p*line), mt.encode()); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(buf[:], mt.seq)
	if err := t.write(t.r.Base.Add(commitOff), buf[:]); err != nil {
		return err
	}
	t.cur = mt
	t.diff = t.diff[:0]
	for i, w := range cand {
		t.nodes += bits.OnesCount64(nv[i]) - bits.OnesCount64(src[w])
		if dst[w] != src[w] {
			t.diff = append(t.diff, w)
		}
	}
	for _, id := range clr {
		t.hint = min(t.hint, uint64(id))
	}
	t.markKept(mt.seq, clr)
	return nil
}

// Host access: reads of the visible image, writes as durable copies.
func (t *Tree) read(a pm.Addr, b []byte) error {
	if err := t.m.Memory().Read(a, b); err != nil {
		return fmt.Errorf("btree: read %v: %w", a, err)
	}
	return nil
}

func (t *Tree) write(a pm.Addr, b []byte) error {
	if err := t.m.CopyIn(a, b); err != nil {
		return fmt.Errorf("btree: write %v: %w", a, err)
	}
	return nil
}

func (t *Tree) load64(a pm.Addr) (uint64, error) {
	v, err := t.m.Memory().Load(a, 8)
	if err != nil {
		return 0, fmt.Errorf("btree: load %v: %w", a, err)
	}
	return v, nil
}

func (t *Tree) readNode(id uint32) (*node, error) {
	n := &node{}
	if err := t.readNodeInto(id, make([]byte, t.g.nodeBytes), n); err != nil {
		return nil, err
	}
	return n, nil
}

// readNodeInto is readNode into n, through b (nodeBytes long), reusing
// their room.
func (t *Tree) readNodeInto(id uint32, b []byte, n *node) error {
	if id == 0 || uint64(id) >= t.g.capacity {
		return fmt.Errorf("%w: node id %d of %d", ErrCorrupt, id, t.g.capacity)
	}
	if err := t.read(t.node0.Add(uint64(id)*t.g.nodeBytes), b); err != nil {
		return err
	}
	return decodeNodeInto(b, t.g.order, id, n) // its errors name the node
}

// Region returns the tree's PM region.
func (t *Tree) Region() pm.Range { return t.r }

// Order returns the tree's order.
func (t *Tree) Order() int { return t.g.order }

// Len returns the number of keys of the last committed batch (durable; no
// PM access).
func (t *Tree) Len() int { return int(t.cur.count) }

// Height returns the number of levels (1: the root is a leaf) of the last
// committed batch.
func (t *Tree) Height() int { return int(t.cur.height) }

// Batches returns the number of the last committed batch (Create commits
// batch 1): every batch up to it is durable.
func (t *Tree) Batches() uint64 { return t.cur.seq }

// Nodes returns the number of nodes in use in the last committed batch.
func (t *Tree) Nodes() int { return t.nodes }

// Bytes returns the PM bytes the nodes of the last committed batch take.
func (t *Tree) Bytes() uint64 { return uint64(t.Nodes()) * t.g.nodeBytes }

// route returns the index of the child of internal node n whose range holds
// key: the number of separators <= key.
func route(n *node, key uint64) int {
	i, _ := slices.BinarySearch(n.keys, key)
	if i < len(n.keys) && n.keys[i] == key {
		i++
	}
	return i
}

// routes reports whether key takes child c of internal node n, as route
// would say, in a compare or two.
func routes(n *node, c int, key uint64) bool {
	return (c == 0 || key >= n.keys[c-1]) && (c == len(n.keys) || key < n.keys[c])
}

// findLeafInto reads the leaf for key into n, through b (nodeBytes
// long): one node and one buffer for the whole descent, not one per level.
func (t *Tree) findLeafInto(key uint64, b []byte, n *node) error {
	id := t.cur.root
	for range t.cur.height - 1 {
		if err := t.readNodeInto(id, b, n); err != nil {
			return err
		}
		if n.leaf {
			return fmt.Errorf("%w: leaf above the leaf level", ErrCorrupt)
		}
		id = uint32(n.vals[route(n, key)])
	}
	if err := t.readNodeInto(id, b, n); err != nil {
		return err
	}
	if !n.leaf {
		return fmt.Errorf("%w: internal node at the leaf level", ErrCorrupt)
	}
	return nil
}

// Get returns the value of key and whether the tree holds it, as of the
// last committed batch (durable). A read error (ErrCorrupt, or the
// backend's) is returned as such, never as a missing key.
func (t *Tree) Get(key uint64) (uint64, bool, error) {
	s := getScratch(t.g.nodeBytes)
	defer scratchPool.Put(s)
	n := &s.n
	if err := t.findLeafInto(key, s.b, n); err != nil {
		return 0, false, err
	}
	if i, ok := slices.BinarySearch(n.keys, key); ok {
		return n.vals[i], true, nil
	}
	return 0, false, nil
}

// scratch is the node and buffer of a descent (findLeafInto), pooled so
// that a Get allocates nothing: a pool, not a field of the Tree, because
// reads may run concurrently (see Tree).
type scratch struct {
	n node
	b []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch returns a scratch from the pool whose buffer is nodeBytes
// long; put it back with scratchPool.Put once nothing refers to its node.
func getScratch(nodeBytes uint64) *scratch {
	s := scratchPool.Get().(*scratch)
	if uint64(cap(s.b)) < nodeBytes {
		s.b = make([]byte, nodeBytes)
	}
	s.b = s.b[:nodeBytes]
	return s
}

// Scan returns the keys in [lo, hi] in ascending order with their values,
// as of the last committed batch (durable), following the leaf chain, for
// use with range.
//
// An iterator cannot return an error: a read that fails (a node that does
// not decode, a backend error) ends the sequence early, as if the range
// ended there, and the error is lost. Where reads can fail (a tree not
// verified by Check, a backend with I/O), use ScanErr, which returns it.
func (t *Tree) Scan(lo, hi uint64) iter.Seq2[uint64, uint64] {
	return func(yield func(uint64, uint64) bool) {
		_ = t.scan(lo, hi, yield)
	}
}

// ScanErr calls yield for the keys in [lo, hi] in ascending order with
// their values, as Scan yields them (the last committed batch, durable),
// until yield returns false. It returns the error of a read that failed
// (wrapping ErrCorrupt, or the backend's error), which ended the scan
// early; nil if the scan reached hi or yield stopped it. It is the form of
// Scan that reports errors.
func (t *Tree) ScanErr(lo, hi uint64, yield func(k, v uint64) bool) error {
	return t.scan(lo, hi, yield)
}

func (t *Tree) scan(lo, hi uint64, yield func(uint64, uint64) bool) error {
	if lo > hi {
		return nil
	}
	// One node and one buffer for the descent and every leaf of the chain.
	n, b := &node{}, make([]byte, t.g.nodeBytes)
	if err := t.findLeafInto(lo, b, n); err != nil {
		return err
	}
	for steps := uint64(0); ; steps++ {
		if steps > t.g.capacity {
			return fmt.Errorf("%w: leaf chain loops", ErrCorrupt)
		}
		for i, k := range n.keys {
			if k < lo {
				continue
			}
			if k > hi || !yield(k, n.vals[i]) {
				return nil
			}
		}
		if n.next == 0 || (len(n.keys) > 0 && n.keys[len(n.keys)-1] >= hi) {
			return nil // the next leaf's keys are all above hi
		}
		if err := t.readNodeInto(n.next, b, n); err != nil {
			return err
		}
		if !n.leaf {
			return fmt.Errorf("%w: leaf chain reaches an internal node", ErrCorrupt)
		}
	}
}

// All returns every key and value in order: Scan of the whole key space,
// with Scan's contract (a read error ends it silently; see ScanErr).
func (t *Tree) All() iter.Seq2[uint64, uint64] { return t.Scan(0, ^uint64(0)) }

const maxReported = 20

// Check verifies the committed tree, after bbolt's tx.Check: every
// reachable node's checksums (a node that fails is reported by id and not
// descended into), keys strictly ascending in every node, every non-root node between Order/2 and Order
// entries (children), every key of a subtree between the separators around
// it, all leaves at one depth, the leaf chain visiting the leaves in key
// order, the key count, every node reachable once, and the bitmap marking
// exactly the reachable nodes (no leaked and no doubly-owned node). It
// returns every inconsistency found (up to 20), each wrapping ErrCorrupt,
// joined; nil if there are none.
//
// A tree with an unfinished batch (see OpenPending) gives ErrRecovery: the
// leaf links the batch already wrote point into it. Check reads the
// committed tree as it is durable, and writes nothing.
func (t *Tree) Check() error {
	if _, ok, err := t.pending(); err != nil || ok {
		if err != nil {
			return err
		}
		return ErrRecovery
	}
	var errs []error
	bad := func(format string, a ...any) bool {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...))
		return len(errs) < maxReported
	}
	mt, err := t.readMeta(t.cur.seq)
	if err != nil {
		return err
	}
	if mt != t.cur {
		bad("meta line %+v, tree has %+v", mt, t.cur)
	}
	seen := make([]uint64, len(t.bm[0]))
	var leaves []uint32
	var nexts []uint32
	var count uint64
	minFill := t.g.order / 2
	type frame struct {
		id     uint32
		depth  uint32
		lo, hi uint64
		hasLo  bool
		hasHi  bool
	}
	stack := []frame{{id: mt.root}}
	for len(stack) > 0 && len(errs) < maxReported {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if f.id == 0 || uint64(f.id) >= t.g.capacity {
			bad("node id %d out of the pool", f.id)
			continue
		}
		if seen[f.id/64]&(1<<(f.id%64)) != 0 {
			bad("node %d reachable twice", f.id)
			continue
		}
		seen[f.id/64] |= 1 << (f.id % 64)
		n, err := t.readNode(f.id)
		if err != nil {
			if errors.Is(err, ErrCorrupt) { // it names the node already
				errs = append(errs, err)
			} else {
				bad("%v", err)
			}
			continue
		}
		isRoot := f.depth == 0
		leafLevel := f.depth == mt.height-1
		if n.leaf != leafLevel {
			bad("node %d at depth %d of %d is leaf=%v", f.id, f.depth, mt.height, n.leaf)
			continue
		}
		cnt := len(n.vals)
		if cnt > t.g.order || (!isRoot && cnt < minFill) || (isRoot && !n.leaf && cnt < 2) {
			bad("node %d holds %d entries (order %d, depth %d)", f.id, cnt, t.g.order, f.depth)
		}
		for i := 1; i < len(n.keys); i++ {
			if n.keys[i-1] >= n.keys[i] {
				bad("node %d keys out of order at %d: %d then %d", f.id, i, n.keys[i-1], n.keys[i])
				break
			}
		}
		for _, k := range n.keys {
			if (f.hasLo && k < f.lo) || (f.hasHi && k >= f.hi) {
				bad("node %d key %d outside its separators [%d, %d)", f.id, k, f.lo, f.hi)
				break
			}
		}
		if n.leaf {
			leaves = append(leaves, f.id)
			nexts = append(nexts, n.next)
			count += uint64(cnt)
			continue
		}
		// Push children right to left so that leaves come out in order.
		for j := cnt - 1; j >= 0; j-- {
			c := frame{id: uint32(n.vals[j]), depth: f.depth + 1, lo: f.lo, hi: f.hi, hasLo: f.hasLo, hasHi: f.hasHi}
			if n.vals[j]>>32 != 0 {
				bad("node %d child %d is %#x", f.id, j, n.vals[j])
				continue
			}
			if j > 0 {
				c.lo, c.hasLo = n.keys[j-1], true
			}
			if j < cnt-1 {
				c.hi, c.hasHi = n.keys[j], true
			}
			stack = append(stack, c)
		}
	}
	for i, id := range leaves {
		want := uint32(0)
		if i+1 < len(leaves) {
			want = leaves[i+1]
		}
		if nexts[i] != want {
			if !bad("leaf %d's next is %d, want %d", id, nexts[i], want) {
				break
			}
		}
	}
	if len(errs) == 0 && count != mt.count {
		bad("%d keys in the leaves, meta says %d", count, mt.count)
	}
	if len(errs) == 0 {
		b := make([]byte, t.g.bitmapBytes())
		if err := t.read(t.r.Base.Add(t.g.bitmapOff(int(mt.seq&1))), b); err != nil {
			return err
		}
		for w := range seen {
			got := binary.LittleEndian.Uint64(b[8*w:])
			if got != t.bm[mt.seq&1][w] {
				bad("bitmap word %d is %#x in PM, %#x in memory", w, got, t.bm[mt.seq&1][w])
			}
			if leak := got &^ seen[w]; leak != 0 {
				if !bad("node %d marked in use but unreachable (leaked)", 64*w+bits.TrailingZeros64(leak)) {
					break
				}
			}
			if miss := seen[w] &^ got; miss != 0 {
				if !bad("node %d reachable but marked free", 64*w+bits.TrailingZeros64(miss)) {
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}
