package btree

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/scopedpm/scopedpm/internal/seal"
	"github.com/scopedpm/scopedpm/pm"
)

// Sentinel errors of package btree; functions wrap them with %w and context.
var (
	// ErrBadArg: an argument is out of range (an order, a capacity, a
	// batch larger than the tree was created for).
	ErrBadArg = errors.New("btree: bad argument")
	// ErrCorrupt: persistent bytes do not decode, or the tree breaks an
	// invariant (see Check).
	ErrCorrupt = errors.New("btree: corrupt tree")
	// ErrFull: the node pool has no room for the nodes a batch may need.
	ErrFull = errors.New("btree: node pool full")
	// ErrRecovery: the tree holds an unfinished batch; call Recover.
	ErrRecovery = errors.New("btree: unfinished batch, recover first")
	// ErrVersion: the tree was written in a layout this build does not
	// read (it also wraps ErrCorrupt).
	ErrVersion = fmt.Errorf("%w: unsupported format version", ErrCorrupt)
)

// Limits.
const (
	// MinOrder and MaxOrder bound the order: the most entries of a leaf and
	// the most children of an internal node.
	MinOrder = 4
	MaxOrder = 255
	// MaxCapacity bounds the node pool (node ids are 32-bit; 0 is nil).
	MaxCapacity = 1<<31 - 1
	// MaxBatchKeys bounds a batch.
	MaxBatchKeys = 1 << 24
	// line is the alignment of every area of the region.
	line = 128
)

// The region, in order: header line, commit line, two meta lines, the batch
// record line, the marks, the lane table, the batch keys and values, the
// free list of the batch, four piece buffers (the leaves' and three the
// internal depths rotate over, see kern.buf), two bitmaps, the nodes.
const (
	headerOff = 0
	commitOff = line
	metaOff   = 2 * line // two lines
	recordOff = 4 * line
	resultOff = 5 * line // the batch's new root and height (seq, root, height)
	fixedEnd  = 6 * line

	magic     = "SPMBTREE"
	headerCRC = line - 4
	nodeTag   = 0xB7
	kindLeaf  = 1
	kindInner = 2
	lastPiece = uint64(1) << 63
	pieceBufs = 4 // piece buffers: the leaves', then three for the internal depths
	// formatVersion is the layout's version, in the header after the
	// geometry: 3 since nodes carry checksums (nodeSum, nextWord); 2 had
	// the internal depths rotate over three piece buffers. Trees written
	// before version 2 hold 0 there (version 1's layout, two buffers);
	// every other version is refused with ErrVersion.
	formatVersion = 3
	versionOff    = 8 + 8*5
)

// geometry is what the header records; every offset derives from it.
type geometry struct {
	order     int
	nodeBytes uint64
	capacity  uint64 // nodes, including the unused node 0
	maxBatch  uint64
	maxLanes  uint64
}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// nodeBytesFor is the fixed node size of an order: a header word, the next
// leaf, order keys and order values (or children), rounded to 64 bytes.
func nodeBytesFor(order int) uint64 { return roundUp(16+16*uint64(order), 64) }

func (g geometry) validate() error {
	switch {
	case g.order < MinOrder || g.order > MaxOrder:
		return fmt.Errorf("%w: order %d (want %d..%d)", ErrBadArg, g.order, MinOrder, MaxOrder)
	case g.nodeBytes != nodeBytesFor(g.order):
		return fmt.Errorf("%w: node size %d for order %d", ErrBadArg, g.nodeBytes, g.order)
	case g.capacity < 2 || g.capacity > MaxCapacity:
		return fmt.Errorf("%w: capacity %d nodes (want 2..%d)", ErrBadArg, g.capacity, MaxCapacity)
	case g.maxBatch < 1 || g.maxBatch > MaxBatchKeys:
		return fmt.Errorf("%w: batch of %d keys (want 1..%d)", ErrBadArg, g.maxBatch, MaxBatchKeys)
	case g.maxLanes < 1 || g.maxLanes > g.maxBatch:
		return fmt.Errorf("%w: %d lanes for batches of %d keys", ErrBadArg, g.maxLanes, g.maxBatch)
	}
	return nil
}

// Offsets of the variable areas.
func (g geometry) marksOff() uint64 { return fixedEnd }
func (g geometry) lanesOff() uint64 { return g.marksOff() + roundUp(8*(g.maxLanes+1), line) }
func (g geometry) keysOff() uint64  { return g.lanesOff() + roundUp(32*g.maxLanes, line) }
func (g geometry) valsOff() uint64  { return g.keysOff() + roundUp(8*g.maxBatch, line) }
func (g geometry) freeOff() uint64  { return g.valsOff() + roundUp(8*g.maxBatch, line) }
func (g geometry) bufOff(i int) uint64 {
	return g.freeOff() + roundUp(4*g.capacity, line) + uint64(i)*g.bufBytes()
}
func (g geometry) bufBytes() uint64    { return roundUp(32*g.maxBatch, line) }
func (g geometry) bitmapBytes() uint64 { return roundUp(8*((g.capacity+63)/64), line) }
func (g geometry) bitmapOff(i int) uint64 {
	return g.bufOff(pieceBufs) + uint64(i)*g.bitmapBytes()
}
func (g geometry) nodesOff() uint64 { return g.bitmapOff(2) }
func (g geometry) size() uint64     { return g.nodesOff() + g.capacity*g.nodeBytes }

func (g geometry) encode() []byte {
	b := seal.New(magic, line)
	seal.PutUint64s(b, 8, uint64(g.order), g.nodeBytes, g.capacity, g.maxBatch, g.maxLanes)
	binary.LittleEndian.PutUint32(b[versionOff:], formatVersion)
	seal.Seal(b)
	return b
}

// decodeHeader decodes the header line; bytes that are not a valid header
// give an error wrapping ErrCorrupt.
func decodeHeader(b []byte) (geometry, error) {
	b, err := seal.Open(b, line, magic)
	if err != nil {
		return geometry{}, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	if v := binary.LittleEndian.Uint32(b[versionOff:]); v != formatVersion {
		return geometry{}, fmt.Errorf("%w: version %d, this build reads %d", ErrVersion, max(v, 1), formatVersion)
	}
	f := seal.Uint64s(b, 8, 5)
	if f[0] > MaxOrder {
		return geometry{}, fmt.Errorf("%w: order %d", ErrCorrupt, f[0])
	}
	g := geometry{order: int(f[0]), nodeBytes: f[1], capacity: f[2], maxBatch: f[3], maxLanes: f[4]}
	if err := g.validate(); err != nil {
		return geometry{}, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	return g, nil
}

// meta is one of the two meta lines: the tree as of batch seq.
type meta struct {
	seq    uint64
	root   uint32
	height uint32 // levels; 1 = the root is a leaf
	count  uint64 // keys
}

func (m meta) encode() []byte {
	b := seal.New("", line)
	binary.LittleEndian.PutUint64(b[0:], m.seq)
	binary.LittleEndian.PutUint32(b[8:], m.root)
	binary.LittleEndian.PutUint32(b[12:], m.height)
	binary.LittleEndian.PutUint64(b[16:], m.count)
	seal.Seal(b)
	return b
}

func decodeMeta(b []byte, g geometry) (meta, error) {
	b, err := seal.Open(b, line, "")
	if err != nil {
		return meta{}, fmt.Errorf("%w: meta: %w", ErrCorrupt, err)
	}
	m := meta{seq: binary.LittleEndian.Uint64(b[0:]), root: binary.LittleEndian.Uint32(b[8:]),
		height: binary.LittleEndian.Uint32(b[12:]), count: binary.LittleEndian.Uint64(b[16:])}
	if m.root == 0 || uint64(m.root) >= g.capacity || m.height < 1 || m.height > 64 {
		return meta{}, fmt.Errorf("%w: meta root %d height %d", ErrCorrupt, m.root, m.height)
	}
	return m, nil
}

// record is the batch record: what a batch needs to run, or to be resumed
// by recovery. Its seq word is written last (see startBatch).
type record struct {
	seq       uint64
	n         uint64 // keys
	lanes     uint64 // workgroup lanes (Algorithm 2) or key blocks (Algorithm 1)
	d         uint32 // depth of the subtree roots; = old height for Algorithm 1
	oldRoot   uint32
	oldHeight uint32
	alg       uint32
	free      uint64 // free-list entries of the batch
	topStart  uint64 // free-list range of the top lane
	topEnd    uint64
	del       uint32 // 1: a host delete (keys are removed, not inserted)
	block     uint32 // BlockThreads the batch was planned with
}

func (r record) encode() []byte {
	b := seal.New("", line)
	seal.PutUint64s(b, 0, r.seq, r.n, r.lanes, uint64(r.d), uint64(r.oldRoot), uint64(r.oldHeight), uint64(r.alg), r.free, r.topStart, r.topEnd, uint64(r.del), uint64(r.block))
	seal.Seal(b)
	return b
}

func decodeRecord(b []byte, g geometry) (record, error) {
	b, err := seal.Open(b, line, "")
	if err != nil {
		return record{}, fmt.Errorf("%w: batch record: %w", ErrCorrupt, err)
	}
	f := seal.Uint64s(b, 0, 12)
	r := record{seq: f[0], n: f[1], lanes: f[2], d: uint32(f[3]), oldRoot: uint32(f[4]), oldHeight: uint32(f[5]),
		alg: uint32(f[6]), free: f[7], topStart: f[8], topEnd: f[9], del: uint32(f[10]), block: uint32(f[11])}
	switch {
	case r.n < 1 || r.n > g.maxBatch || r.lanes < 1 || r.lanes > g.maxLanes:
		return record{}, fmt.Errorf("%w: batch of %d keys in %d lanes", ErrCorrupt, r.n, r.lanes)
	case f[5] < 1 || f[5] > 64 || f[3] > f[5] || f[4] == 0 || f[4] >= g.capacity:
		return record{}, fmt.Errorf("%w: batch on root %d height %d depth %d", ErrCorrupt, f[4], f[5], f[3])
	case r.free > g.capacity || r.topStart > r.topEnd || r.topEnd > r.free || f[6] > 2 || f[10] > 1 || f[11] < 1 || f[11] > 1<<20:
		return record{}, fmt.Errorf("%w: batch free list %d, top %d..%d", ErrCorrupt, r.free, r.topStart, r.topEnd)
	}
	return r, nil
}

// A mark is a lane's epoch status word (scoped persist barrier paper §8.3): the batch (low 24
// bits of its seq) and the levels the lane has completed (the low 32 bits
// are reserved, 0). One aligned 8-byte store. Every run owner at every
// level writes its pieces to a slice of the batch's free list the plan
// gave it, so no allocation cursor needs recording (a cursor read after a
// barrier could already include the next level's allocations of threads
// that passed the barrier first).
func markWord(seq uint64, done int, alloc uint64) uint64 {
	return (seq&0xffffff)<<40 | uint64(done&0xff)<<32 | alloc&0xffffffff
}

// markDone returns the levels completed (and the reserved low word) of mark w
// for batch seq, or 0 and start if w belongs to another batch.
func markDone(w, seq, start uint64) (int, uint64) {
	if w>>40 != seq&0xffffff {
		return 0, start
	}
	return int(w >> 32 & 0xff), w & 0xffffffff
}

// node is a decoded node. A leaf holds len(keys) == len(vals) entries; an
// internal node holds len(vals) children (as ids) and len(vals)-1 keys,
// keys[j] the least key of child j+1.
type node struct {
	leaf bool
	next uint32 // leaves: the next leaf, 0 for the last
	keys []uint64
	vals []uint64
}

// Node format (version 3). A node is a header word, a next word, Order
// keys and Order values (children for an internal node):
//
//	header: bits 0-7 nodeTag, 8-15 the kind, 16-31 the count (entries of
//	        a leaf, children of an internal node), 32-63 nodeSum
//	next:   bits 0-31 the next leaf (0: none, and always 0 in an internal
//	        node), 32-63 nextCheck of the node's id and that next leaf
//
// nodeSum is a CRC-32C of the node's id, the header's low 32 bits and the
// used keys and values (a leaf's first count keys and values, an internal
// node's first count-1 keys and count children); slots beyond the count
// and the next word are not covered. The next word has its own check
// because it is the one word written in place in a committed node (the
// leaf chain, see Tree): one aligned 8-byte store keeps pointer and check
// together, so a crash cannot leave a node whose checksum disagrees with
// it. Covering the id catches a node written at, or read from, the wrong
// place. A node whose sum or check does not match is ErrCorrupt, naming the
// node (decodeNodeInto, kern.header).

// nodeHeader is the header word of a node without its checksum (the low
// 32 bits); encodeNode and the kernels add nodeSum in the high bits.
func nodeHeader(leaf bool, count int) uint64 {
	k := uint64(kindInner)
	if leaf {
		k = kindLeaf
	}
	return nodeTag | k<<8 | uint64(count)<<16
}

// nodeSum returns the checksum of node id whose bytes b (at least
// nodeBytesFor(order)) hold a header with a count of at most order: a
// CRC-32C of the id, the header's low 32 bits and the used keys and values.
//
// The id and the header's low half are one 8-byte word, hashed by table
// (crcWord); the used keys and values are hashed where they lie in b, by
// seal.Update (the CPU's CRC-32C instruction where there is one): one
// call when they are contiguous (a full leaf), else one per nonempty run.
func nodeSum(id uint32, b []byte, order int) uint32 {
	h := binary.LittleEndian.Uint32(b)
	cnt := int(h >> 16)
	nk := cnt
	if h>>8&0xff != kindLeaf {
		nk = max(cnt-1, 0)
	}
	crc := crcWord(0, uint64(id)|uint64(h)<<32) // the id, then the header's low half
	vals := 16 + 8*order
	if nk == order { // the keys run into the values
		return seal.Update(crc, b[16:vals+8*cnt])
	}
	if nk > 0 {
		crc = seal.Update(crc, b[16:16+8*nk])
	}
	if cnt > 0 {
		crc = seal.Update(crc, b[vals:vals+8*cnt])
	}
	return crc
}

// nextCheck is the check of node id's next word when it points at next:
// the CRC-32C of 'N' (no prefix nodeSum shares), id and next.
func nextCheck(id, next uint32) uint32 {
	return crcWord(crcN, uint64(id)|uint64(next)<<32)
}

// crcN is the CRC-32C of the byte 'N', nextCheck's prefix.
var crcN = seal.Update(0, []byte{'N'})

// crcWord is the CRC-32C crc extended with the 8 bytes of v, little-endian
// (seal.UpdateWord: table lookups, no allocation).
func crcWord(crc uint32, v uint64) uint32 { return seal.UpdateWord(crc, v) }

// nextWord is the next word of node id pointing at next (0: none).
func nextWord(id, next uint32) uint64 { return uint64(nextCheck(id, next))<<32 | uint64(next) }

// nextOf returns the next leaf of node id's next word w, or false if its
// check does not match.
func nextOf(id uint32, w uint64) (uint32, bool) {
	next := uint32(w)
	return next, uint32(w>>32) == nextCheck(id, next)
}

// encodeNode encodes n as node id of order order, with its checksums.
func encodeNode(n *node, order int, id uint32) []byte {
	b := make([]byte, nodeBytesFor(order))
	cnt := len(n.vals)
	binary.LittleEndian.PutUint64(b, nodeHeader(n.leaf, cnt))
	binary.LittleEndian.PutUint64(b[8:], nextWord(id, n.next))
	for i, k := range n.keys {
		binary.LittleEndian.PutUint64(b[16+8*i:], k)
	}
	for i, v := range n.vals {
		binary.LittleEndian.PutUint64(b[16+8*order+8*i:], v)
	}
	binary.LittleEndian.PutUint32(b[4:], nodeSum(id, b, order))
	return b
}

// checkHeader checks the header word h of node id, a leaf or an internal
// node as leaf says (either if any), without its checksum, and returns its
// count.
func checkHeader(id uint32, h uint64, order int) (int, error) {
	kind, cnt := h>>8&0xff, int(h>>16&0xffff)
	if h&0xff != nodeTag || (kind != kindLeaf && kind != kindInner) || cnt > order || (kind == kindInner && cnt < 1) {
		return 0, fmt.Errorf("%w: node %d: header %#x", ErrCorrupt, id, h)
	}
	return cnt, nil
}

// decodeNode decodes the bytes of node id of order order. Bytes that are
// not a node, or whose checksums do not match, give an error wrapping
// ErrCorrupt that names the node; it never panics.
func decodeNode(b []byte, order int, id uint32) (*node, error) {
	n := &node{}
	if err := decodeNodeInto(b, order, id, n); err != nil {
		return nil, err
	}
	return n, nil
}

// decodeNodeInto is decodeNode into n, reusing the room of n's slices.
func decodeNodeInto(b []byte, order int, id uint32, n *node) error {
	h, cnt, err := checkNode(b, order, id)
	if err != nil {
		return err
	}
	next, ok := nextOf(id, binary.LittleEndian.Uint64(b[8:]))
	if !ok {
		return fmt.Errorf("%w: node %d: next word %#x fails its check", ErrCorrupt, id, binary.LittleEndian.Uint64(b[8:]))
	}
	if h>>8&0xff != kindLeaf && next != 0 {
		return fmt.Errorf("%w: node %d: internal node with a next pointer", ErrCorrupt, id)
	}
	decodeBody(b, order, h, cnt, n)
	n.next = next
	return nil
}

// decodeBodyInto decodes node id from b, as decodeNodeInto does, but
// never reads its next word (b[8:16]): n.next is 0. The checksum does not
// cover the next word, so b may alias an image whose next words a writer
// changes meanwhile (a snapshot read, see readBody).
func decodeBodyInto(b []byte, order int, id uint32, n *node) error {
	h, cnt, err := checkNode(b, order, id)
	if err != nil {
		return err
	}
	decodeBody(b, order, h, cnt, n)
	n.next = 0
	return nil
}

// checkNode checks the bytes b of node id but for its next word (length,
// header, checksum) and returns its header word and entry count.
func checkNode(b []byte, order int, id uint32) (h uint64, cnt int, err error) {
	if order < MinOrder || order > MaxOrder || uint64(len(b)) < nodeBytesFor(order) {
		return 0, 0, fmt.Errorf("%w: node %d of %d bytes for order %d", ErrCorrupt, id, len(b), order)
	}
	h = binary.LittleEndian.Uint64(b)
	if cnt, err = checkHeader(id, h, order); err != nil {
		return 0, 0, err
	}
	if sum := nodeSum(id, b, order); uint32(h>>32) != sum {
		return 0, 0, fmt.Errorf("%w: node %d: checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, id, uint32(h>>32), sum)
	}
	return h, cnt, nil
}

// decodeBody fills n's kind, keys and values from b (header h, count cnt,
// both checked).
func decodeBody(b []byte, order int, h uint64, cnt int, n *node) {
	n.leaf = h>>8&0xff == kindLeaf
	nk := cnt
	if !n.leaf {
		nk = cnt - 1
	}
	n.keys = words(sized(n.keys, nk), b[16:])
	n.vals = words(sized(n.vals, cnt), b[16+8*order:])
}

// sized returns s with length n, reusing its room; a nil s gets a new
// slice.
func sized(s []uint64, n int) []uint64 {
	if s == nil || cap(s) < n {
		return make([]uint64, n)
	}
	return s[:n]
}

// words fills w with the little-endian words at the start of b (at least
// 8*len(w) bytes) and returns it.
func words(w []uint64, b []byte) []uint64 {
	b = b[:8*len(w)]
	d := w
	for len(d) >= 4 && len(b) >= 32 { // four at a time, no bounds check in the body
		d[0] = binary.LittleEndian.Uint64(b[0:8])
		d[1] = binary.LittleEndian.Uint64(b[8:16])
		d[2] = binary.LittleEndian.Uint64(b[16:24])
		d[3] = binary.LittleEndian.Uint64(b[24:32])
		d, b = d[4:], b[32:]
	}
	for i := range d {
		d[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return w
}

// addr helpers
func (g geometry) nodeAddr(base pm.Addr, id uint32) pm.Addr {
	return base.Add(g.nodesOff() + uint64(id)*g.nodeBytes)
}
