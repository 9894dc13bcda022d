package btree

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// insertHost is InsertBatch with the default options (Algorithm 2,
// workgroups of 64) run on the host instead of as a kernel: the DB's write
// path. It stages the batch exactly as InsertBatch does, then issues the
// very writes the kernel would (the same nodes at the same ids, the same
// piece records, epoch status marks, result and leaf chain words, byte for
// byte) in one order the kernel's persist barriers allow: each workgroup's
// levels from the leaves up, each level before its mark, then the levels
// above d, then the leaf chain. Host writes are durable in issue order, so
// a crash leaves a state the kernel could have left, and recovery (Open,
// Recover) finishes the batch with the kernel as it would an interrupted
// launch. Then it commits, as InsertBatch does. Where the backend can make
// the batch atomic, it is one record instead (insertHostCached).
func (t *Tree) insertHost(keys, vals []uint64) error {
	if len(keys) != len(vals) {
		return fmt.Errorf("%w: %d keys and %d values", ErrBadArg, len(keys), len(vals))
	}
	if len(keys) == 0 {
		return nil
	}
	done := t.useCache()
	err := t.insertHostCached(keys, vals)
	done(err == nil)
	return err
}

// insertHostCached is insertHost after useCache: with the node cache if
// it is on, and reading every node from the image if not (a growth's
// copy).
//
// On a backend that can make the batch's persists durable all together or
// not at all (pm/native's log mode, DeferAtomic), the batch is issued that
// way and writes only what the tree needs: its nodes, the leaf chain, the
// result and the commit. A crash keeps the whole batch or none of it, so
// there is nothing to resume: the staged keys, values, free list and
// record, the piece records and the epoch status marks are not written
// (the record area keeps the last one, of a committed batch, so no batch
// looks pending).
func (t *Tree) insertHostCached(keys, vals []uint64) error {
	o := BatchOptions{}.withDefaults()
	s, err := t.planFull(keys, vals, o)
	if err != nil {
		return err
	}
	if ad, ok := pm.As[atomicDeferrer](t.m.Backend()); ok && !t.noAtomic && t.hostAtomicBytes(s) <= ad.AtomicDeferBytes() {
		return ad.DeferAtomic(func() error {
			if s.ids, err = t.freeIDs(s.rec.free); err != nil {
				return err
			}
			return t.runHost(s, true)
		})
	}
	if s.ids, err = t.stage(s.rec, s.lanes, s.ks, s.vs); err != nil {
		return err
	}
	return t.runHost(s, false)
}

// atomicDeferrer is a backend that can make a batch's persists durable
// all together or not at all (pm/native.Backend.DeferAtomic), for at
// most AtomicDeferBytes of them (each write its bytes rounded up to 8,
// plus 16).
type atomicDeferrer interface {
	AtomicDeferBytes() int
	DeferAtomic(fn func() error) error
}

// hostAtomicBytes bounds the persists of an atomic host batch in
// atomicDeferrer's measure: every new node (two writes: the header and
// keys, the values), two leaf chain words a key, the result, and the
// commit's bitmap words (at most the whole bitmap) and meta.
func (t *Tree) hostAtomicBytes(s *staged) int {
	const w = 16 + 8 // an 8-byte write
	node := int(t.g.nodeBytes) + 2*16 + 8
	return int(s.rec.free)*node + len(s.ks)*2*w + int(t.g.capacity/64+1)*w + 4<<10
}

// runHost runs a planned batch on the host and commits it; atomic: as one
// atomic record, with none of the writes that only resuming needs.
func (t *Tree) runHost(s *staged, atomic bool) error {
	hb := &hostBatch{t: t, s: s, n: len(s.ks), h: int(s.rec.oldHeight), d: int(s.rec.d), order: t.g.order, atomic: atomic}
	hb.k = (&kern{g: t.g, base: t.r.Base, n: hb.n, h: hb.h, d: hb.d}).areas()
	hb.held, hb.wb = t.held[:0], t.wb[:0]
	defer func() { t.held, t.wb = hb.held[:0], hb.wb[:0] }()
	err := hb.run()
	// The writes held before an error were issued before it: issue them.
	if ferr := hb.flush(); ferr != nil {
		return ferr
	}
	if err != nil {
		return err
	}
	return t.commit(s.rec)
}

// hostBatch runs a staged batch's kernel on the host (insertHost).
type hostBatch struct {
	t        *Tree
	s        *staged
	k        *kern // the region's addresses
	n, h, d  int
	order    int
	atomic   bool       // the batch is one atomic record: no piece records or marks
	pieces   [][]entry  // pieces[depth][2*i+p]: owner i's pieces, the last flagged lastPiece
	held     []pm.Write // writes not yet issued; their bytes lie in wb, in order (flush)
	wb       []byte     // the held writes' bytes
	nb       []byte     // scratch for a node's image (encode)
	words    []uint64   // scratch for a run's piece records (process)
	outBuf   []entry    // the pieces writePieces returns, emptied by process
	mergeBuf []entry
}

// encode is encodeNode(nodeOf(es, leaf, next), order, id) into hb's
// scratch, without allocating: the header, next word and used keys and
// values are encodeNode's, the slots beyond the count are stale (neither
// written nor covered by nodeSum).
func (hb *hostBatch) encode(es []entry, leaf bool, next, id uint32) []byte {
	order := hb.order
	if hb.nb == nil {
		hb.nb = make([]byte, nodeBytesFor(order))
	}
	b := hb.nb
	binary.LittleEndian.PutUint64(b, nodeHeader(leaf, len(es)))
	binary.LittleEndian.PutUint64(b[8:], nextWord(id, next))
	keys, vals := b[16:], b[16+8*order:]
	for i, e := range es {
		if leaf {
			binary.LittleEndian.PutUint64(keys[8*i:], e.key)
		} else if i > 0 {
			binary.LittleEndian.PutUint64(keys[8*(i-1):], e.key)
		}
		binary.LittleEndian.PutUint64(vals[8*i:], e.val)
	}
	binary.LittleEndian.PutUint32(b[4:], nodeSum(id, b, order))
	return b
}

// node returns committed node id, read (and checked) once. It issues the
// held writes first, so the read sees the image it would have.
func (hb *hostBatch) node(id uint32) (*node, error) {
	if nd, ok := hb.s.nodes.get(id); ok {
		return nd, nil
	}
	if nd, ok := hb.t.cached().get(id); ok {
		hb.s.nodes.put(id, nd) // committed, as the image holds it
		return nd, nil
	}
	if err := hb.flush(); err != nil {
		return nil, err
	}
	var nd *node
	var err error
	if c := hb.t.cached(); c != nil {
		nd, err = c.read(hb.t, id, make([]byte, hb.t.g.nodeBytes))
	} else {
		nd, err = hb.t.readNode(id)
	}
	if err != nil {
		return nil, err
	}
	hb.s.nodes.put(id, nd)
	return nd, nil
}

// put writes words at a as little-endian 8-byte words, one host write
// (held: see write).
func (hb *hostBatch) put(a pm.Addr, words ...uint64) error {
	lo := len(hb.wb)
	for _, w := range words {
		hb.wb = binary.LittleEndian.AppendUint64(hb.wb, w)
	}
	hb.hold(a, lo)
	return nil
}

// write is one host write of b at a, held until flush: the batch's writes
// go out in issue order in few vectored calls (pm.Machine.CopyInMany).
func (hb *hostBatch) write(a pm.Addr, b []byte) {
	lo := len(hb.wb)
	hb.wb = append(hb.wb, b...)
	hb.hold(a, lo)
}

// hold records the bytes of wb from lo as a held write at a; flush
// re-slices Data into wb's final array (wb may move as it grows).
func (hb *hostBatch) hold(a pm.Addr, lo int) {
	hb.held = append(hb.held, pm.Write{Addr: a, Data: hb.wb[lo:len(hb.wb):len(hb.wb)]})
}

// flush issues the held writes, in order, in one host call.
func (hb *hostBatch) flush() error {
	if len(hb.held) == 0 {
		return nil
	}
	// Re-slice every write into wb's final array.
	at := 0
	for i := range hb.held {
		n := len(hb.held[i].Data)
		hb.held[i].Data = hb.wb[at : at+n : at+n]
		at += n
	}
	err := hb.t.m.CopyInMany(hb.held)
	hb.held, hb.wb = hb.held[:0], hb.wb[:0]
	if err != nil {
		return fmt.Errorf("btree: write: %w", err)
	}
	return nil
}

// run issues the batch's writes: the kernel's phases B and C in one order
// its barriers allow.
func (hb *hostBatch) run() error {
	// The piece records of every depth, in the tree's buffer, kept
	// between batches (see insertHost).
	need := 2 * hb.n * hb.h
	if cap(hb.t.pieceBuf) < need {
		hb.t.pieceBuf = make([]entry, need)
	}
	buf := hb.t.pieceBuf[:need]
	clear(buf)
	hb.pieces = make([][]entry, hb.h)
	for d := range hb.pieces {
		hb.pieces[d] = buf[2*hb.n*d : 2*hb.n*(d+1) : 2*hb.n*(d+1)]
	}
	top := len(hb.s.lanes)
	for lane, ln := range hb.s.lanes {
		ks, ke := int(ln.ks), int(ln.ke)
		for li := range hb.h - hb.d {
			depth := hb.h - 1 - li
			for i := ks; i < ke; i++ {
				if i == ks || hb.s.path[depth][i-1] != hb.s.path[depth][i] {
					if err := hb.process(depth, i, ke, lane); err != nil {
						return err
					}
				}
			}
			if err := hb.mark(lane, li+1); err != nil {
				return err
			}
		}
	}
	for ti := range hb.d {
		depth := hb.d - 1 - ti
		for i := range hb.n {
			if i == 0 || hb.s.path[depth][i-1] != hb.s.path[depth][i] {
				if err := hb.process(depth, i, hb.n, top); err != nil {
					return err
				}
			}
		}
		if err := hb.mark(top, ti+1); err != nil {
			return err
		}
	}
	leafDepth := hb.h - 1
	for i := range hb.n {
		if i == 0 || hb.s.path[leafDepth][i-1] != hb.s.path[leafDepth][i] {
			if err := hb.chain(i); err != nil {
				return err
			}
		}
	}
	return hb.mark(top, hb.d+1)
}

// mark writes lane's epoch status mark: done levels durable (none in an
// atomic batch, which nothing resumes).
func (hb *hostBatch) mark(lane, done int) error {
	if hb.atomic {
		return nil
	}
	return hb.put(hb.k.mark(lane), markWord(hb.s.rec.seq, done, 0))
}

// runEnd is kern.runEnd: the end of the run of keys from owner i that
// share its node at depth, below hi.
func (hb *hostBatch) runEnd(depth, i, hi int) int {
	p := hb.s.path[depth]
	j := i + 1
	for j < hi && p[j] == p[i] {
		j++
	}
	return j
}

// process is kern.process on the host: it merges owner i's run into its
// node at depth, writes the pieces and their records (and, at the root,
// the grown root and the batch's result).
func (hb *hostBatch) process(depth, i, hi, lane int) error {
	hb.outBuf = hb.outBuf[:0]
	j := hb.runEnd(depth, i, hi)
	id := hb.s.path[depth][i]
	leaf := depth == hb.h-1
	nd, err := hb.node(id)
	if err != nil {
		return err
	}
	if nd.leaf != leaf {
		return fmt.Errorf("%w: node %d at depth %d of %d is leaf=%v", ErrCorrupt, id, depth, hb.h, nd.leaf)
	}
	merged := hb.mergeBuf[:0]
	ks, vs := hb.s.ks, hb.s.vs
	if leaf {
		a, b := 0, i
		for a < len(nd.keys) || b < j {
			switch {
			case b >= j || (a < len(nd.keys) && nd.keys[a] < ks[b]):
				merged = append(merged, entry{nd.keys[a], nd.vals[a]})
				a++
			case a >= len(nd.keys) || ks[b] < nd.keys[a]:
				merged = append(merged, entry{ks[b], vs[b]})
				b++
			default: // the key is present: new value
				merged = append(merged, entry{ks[b], vs[b]})
				a++
				b++
			}
		}
	} else {
		from, cnt := i, len(nd.vals)
		below := hb.pieces[depth+1]
		for c := range cnt {
			var sep uint64
			if c > 0 {
				sep = nd.keys[c-1]
			}
			child := nd.vals[c]
			x := from
			if c > 0 {
				x = from + sortSearch(ks[from:j], sep)
			}
			from = x
			touched := x < j
			if touched && c < cnt-1 {
				touched = ks[x] < nd.keys[c]
			}
			if !touched {
				merged = append(merged, entry{sep, child})
				continue
			}
			if uint64(hb.s.path[depth+1][x]) != child {
				return fmt.Errorf("%w: host batch: key %d of the run under node %d is not under its child %d", ErrCorrupt, x, id, child)
			}
			for p := 0; ; p++ {
				if 2*x+p >= 2*hb.n {
					return fmt.Errorf("%w: host batch: pieces of key %d overrun", ErrCorrupt, x)
				}
				pc := below[2*x+p]
				if p == 0 {
					pc.key = sep
				}
				merged = append(merged, entry{pc.key, pc.val &^ lastPiece})
				if below[2*x+p].val&lastPiece != 0 {
					break
				}
			}
		}
	}
	hb.mergeBuf = merged
	lv := hb.h - 1 - depth
	cur := uint64(hb.s.offs[depth*hb.n+i])
	var oldNext uint32
	if leaf {
		oldNext = nd.next
	}
	pieces, err := hb.writePieces(merged, leaf, lane, lv, &cur, oldNext)
	if err != nil {
		return err
	}
	// The piece records: 2*len(pieces) words from pieceAt(depth, 2*i).
	rec := hb.pieces[depth][2*i : 2*i+len(pieces)]
	words := hb.words[:0]
	for p, e := range pieces {
		v := e.val
		if p == len(pieces)-1 {
			v |= lastPiece
		}
		rec[p] = entry{e.key, v}
		words = append(words, e.key, v)
	}
	hb.words = words
	if !hb.atomic { // the records resume a kernel; the run reads rec
		if err := hb.put(hb.k.pieceAt(depth, 2*i), words...); err != nil {
			return err
		}
	}
	if depth == 0 {
		height := hb.h
		for len(pieces) > 1 {
			if pieces, err = hb.writePieces(pieces, false, lane, lv, &cur, 0); err != nil {
				return err
			}
			height++
		}
		if err := hb.put(hb.k.base.Add(resultOff), hb.s.rec.seq, pieces[0].val, uint64(height)); err != nil {
			return err
		}
	}
	return nil
}

// sortSearch returns the first index of ks (ascending) whose key is >= key.
func sortSearch(ks []uint64, key uint64) int {
	i, _ := slices.BinarySearch(ks, key)
	return i
}

// writePieces is kern.writePieces on the host: it splits es evenly into
// nodes of at most Order entries at the lane's next free ids and writes
// the words the kernel stores (header, next, the used keys and values; the
// slots beyond the count keep what they held). A leaf's pieces are
// chained, the last keeping oldNext.
func (hb *hostBatch) writePieces(es []entry, leaf bool, lane, lv int, cur *uint64, oldNext uint32) ([]entry, error) {
	order := hb.order
	p := max(1, (len(es)+order-1)/order)
	base := *cur
	*cur += uint64(p)
	if end := hb.s.starts[lane][lv+1]; base+uint64(p) > end {
		return nil, fmt.Errorf("%w: host batch: lane %d of %d: %d nodes at cursor %d, lane ends at %d", ErrCorrupt, lane, len(hb.s.lanes), p, base, end)
	}
	// out is new entries at the end of hb.outBuf, which process empties:
	// es may be an earlier out (a growing root), left intact by append.
	o0 := len(hb.outBuf)
	hb.outBuf = append(hb.outBuf, make([]entry, p)...)
	out := hb.outBuf[o0 : o0+p : o0+p]
	at := 0
	for q := range p {
		sz := len(es)/p + btoi(q < len(es)%p)
		part := es[at : at+sz]
		at += sz
		id := hb.s.ids[base+uint64(q)]
		out[q] = entry{part[0].key, uint64(id)}
		next := uint32(0)
		if leaf {
			next = oldNext
			if q < p-1 {
				next = hb.s.ids[base+uint64(q)+1]
			}
		}
		img := hb.encode(part, leaf, next, id)
		hb.t.cached().fill(id, part, leaf, next, order)
		nk := len(part) - btoi(!leaf)
		at0 := hb.k.node(id)
		hb.write(at0, img[:16+8*nk])
		vo := 16 + 8*order
		hb.write(at0.Add(uint64(vo)), img[vo:vo+8*len(part)])
	}
	return out, nil
}

// chain is kern.chain on the host: it links leaf owner i's last piece to
// the next leaf (or that leaf's first piece), and points the untouched leaf
// before owner i's old leaf, if any, at its first piece.
func (hb *hostBatch) chain(i int) error {
	leafDepth := hb.h - 1
	path := hb.s.path
	c := path[leafDepth][i]
	j := hb.runEnd(leafDepth, i, hb.n)
	ps := hb.pieces[leafDepth]
	first := uint32(ps[2*i].val &^ lastPiece)
	var last uint32
	for p := 0; ; p++ {
		if 2*i+p >= 2*hb.n {
			return fmt.Errorf("%w: host batch: leaf pieces of key %d overrun", ErrCorrupt, i)
		}
		v := ps[2*i+p].val
		last = uint32(v &^ lastPiece)
		if v&lastPiece != 0 {
			break
		}
	}
	old, err := hb.node(c)
	if err != nil {
		return err
	}
	next := old.next
	if j < hb.n && next != 0 && path[leafDepth][j] == next {
		next = uint32(ps[2*j].val &^ lastPiece)
	}
	if last == 0 || first == 0 || uint64(last) >= hb.t.g.capacity || uint64(first) >= hb.t.g.capacity {
		return fmt.Errorf("%w: host batch: leaf pieces %d..%d of key %d", ErrCorrupt, first, last, i)
	}
	if err := hb.put(hb.k.node(last).Add(8), nextWord(last, next)); err != nil {
		return err
	}
	hb.t.cached().setNext(last, next)
	// The leaf before c in the old tree: up to the first ancestor where c's
	// branch is not the leftmost, one child left, then rightmost down.
	var pred uint32
	for depth := leafDepth - 1; depth >= 0 && pred == 0; depth-- {
		parent, child := path[depth][i], path[depth+1][i]
		pn, err := hb.node(parent)
		if err != nil {
			return err
		}
		for x := 1; x < len(pn.vals); x++ {
			if uint32(pn.vals[x]) != child {
				continue
			}
			pred = uint32(pn.vals[x-1])
			for range leafDepth - 1 - depth {
				n, err := hb.node(pred)
				if err != nil {
					return err
				}
				if n.leaf {
					return fmt.Errorf("%w: node %d: leaf above the leaf level", ErrCorrupt, pred)
				}
				pred = uint32(n.vals[len(n.vals)-1])
			}
			break
		}
	}
	if pred != 0 && (i == 0 || path[leafDepth][i-1] != pred) {
		hb.t.cached().drop(pred) // its next word changes
		return hb.put(hb.k.node(pred).Add(8), nextWord(pred, first))
	}
	return nil
}
