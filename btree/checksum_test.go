package btree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/seal"
	"github.com/scopedpm/scopedpm/pm"
)

// flipOutcome is what the readers made of a tree with one byte flipped.
type flipOutcome int

const (
	flipDetected flipOutcome = iota // an error wrapping ErrCorrupt
	flipRight                       // no error, and the right data
	flipWrong                       // no error, and wrong data (or another error)
)

// TestNodeByteFlips flips every byte of every node of a committed tree
// (nodes written by the insert kernel and by the host's Delete, a leaf
// chain updated in place) with a seeded random mask, one at a time, and
// reads the tree back with Open, Check, Get of every key, Scan (ScanErr),
// GetBatch and ScanBatch. A flip in a used field (the header word, the
// next word, a used key or value) must give ErrCorrupt from one of them;
// a flip in an unused slot beyond a node's count, or in the padding, may
// pass only if every reader returns the right data.
func TestNodeByteFlips(t *testing.T) {
	seed := testSeed(t)
	for _, tc := range []struct{ order, keys int }{{4, 48}, {15, 160}} {
		t.Run(fmt.Sprintf("order %d", tc.order), func(t *testing.T) {
			nodeByteFlips(t, rand.New(rand.NewPCG(seed, uint64(tc.order))), tc.order, tc.keys)
		})
	}
}

func nodeByteFlips(t *testing.T, rng *rand.Rand, order, nkeys int) {
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: order, Capacity: 400, MaxBatch: 200})
	require.NoError(t, err)
	want := map[uint64]uint64{}
	ks := batchKeys("dense", rng, nkeys, 1)
	vs := make([]uint64, len(ks))
	for i := range vs {
		vs[i] = rng.Uint64()
		want[ks[i]] = vs[i]
	}
	_, err = tr.InsertBatch(ks, vs, BatchOptions{})
	require.NoError(t, err)
	keys := slices.Sorted(maps.Keys(want))
	for _, k := range keys[5:12] { // host writes: new leaves, a pred's next pointer
		ok, err := tr.Delete(k)
		require.NoError(t, err)
		require.True(t, ok)
		delete(want, k)
	}
	require.NoError(t, tr.Put(1<<50, 7)) // a batch of one key
	want[1<<50] = 7
	keys = slices.Sorted(maps.Keys(want))
	require.NoError(t, tr.Check())

	// The reachable nodes, and what a flip at each byte of one touches.
	type nodeInfo struct {
		id      uint32
		leaf    bool
		keys    int // used key slots
		entries int // used value (child) slots
	}
	var nodes []nodeInfo
	var walk func(id uint32, depth int)
	walk = func(id uint32, depth int) {
		n, err := tr.readNode(id)
		require.NoError(t, err)
		nodes = append(nodes, nodeInfo{id, n.leaf, len(n.keys), len(n.vals)})
		if !n.leaf {
			for _, c := range n.vals {
				walk(uint32(c), depth+1)
			}
		}
	}
	walk(tr.cur.root, 0)
	used := func(ni nodeInfo, off int) bool {
		switch {
		case off < 16: // header and next words
			return true
		case off < 16+8*order:
			return off < 16+8*ni.keys
		case off < 16+16*order:
			return off < 16+8*order+8*ni.entries
		}
		return false // padding
	}

	var wantKV []KV
	for _, k := range keys {
		wantKV = append(wantKV, KV{k, want[k]})
	}
	read := func() (flipOutcome, string) {
		judge := func(err error, what string) (flipOutcome, string) {
			if errors.Is(err, ErrCorrupt) {
				return flipDetected, what + ": " + err.Error()
			}
			return flipWrong, what + ": unexpected error " + err.Error()
		}
		tr2, err := Open(m, "bt")
		if err != nil {
			return judge(err, "Open")
		}
		if err := tr2.Check(); err != nil {
			return judge(err, "Check")
		}
		for _, k := range append(keys, 0, 1<<40) {
			v, ok, err := tr2.Get(k)
			if err != nil {
				return judge(err, "Get")
			}
			if w, in := want[k]; ok != in || v != w {
				return flipWrong, "Get returned wrong data"
			}
		}
		var got []KV
		if err := tr2.ScanErr(0, ^uint64(0), func(k, v uint64) bool { got = append(got, KV{k, v}); return true }); err != nil {
			return judge(err, "Scan")
		}
		if !slices.Equal(got, wantKV) {
			return flipWrong, "Scan returned wrong data"
		}
		vals, found, err := tr2.GetBatch(keys)
		if err != nil {
			return judge(err, "GetBatch")
		}
		for i, k := range keys {
			if !found[i] || vals[i] != want[k] {
				return flipWrong, "GetBatch returned wrong data"
			}
		}
		res, err := tr2.ScanBatch([]Range{{0, ^uint64(0)}}, len(keys)+10)
		if err != nil {
			return judge(err, "ScanBatch")
		}
		if !slices.Equal(res[0], wantKV) {
			return flipWrong, "ScanBatch returned wrong data"
		}
		return flipRight, ""
	}

	var flips, usedFlips, detected, usedDetected, rightUnused, missed int
	for _, ni := range nodes {
		base := tr.g.nodeAddr(tr.r.Base, ni.id)
		for off := range int(tr.g.nodeBytes) {
			a := base.Add(uint64(off))
			orig := make([]byte, 1)
			require.NoError(t, tr.read(a, orig))
			mask := byte(1 + rng.IntN(255))
			require.NoError(t, m.CopyIn(a, []byte{orig[0] ^ mask}))
			got, why := read()
			require.NoError(t, m.CopyIn(a, orig))
			flips++
			u := used(ni, off)
			if u {
				usedFlips++
			}
			switch got {
			case flipDetected:
				detected++
				if u {
					usedDetected++
				}
			case flipRight:
				if u {
					missed++
					t.Errorf("node %d (leaf=%v) byte %d ^ %#02x: a used field, not detected", ni.id, ni.leaf, off, mask)
				} else {
					rightUnused++
				}
			case flipWrong:
				missed++
				t.Errorf("node %d (leaf=%v) byte %d ^ %#02x: %s", ni.id, ni.leaf, off, mask, why)
			}
		}
	}
	t.Logf("%d nodes of %d bytes: %d flips, %d detected as ErrCorrupt; %d in used fields, %d of them detected; %d in unused slots returned the right data; %d missed (wrong data or undetected in a used field)",
		len(nodes), tr.g.nodeBytes, flips, detected, usedFlips, usedDetected, rightUnused, missed)
	require.GreaterOrEqual(t, flips, 400)
	require.Zero(t, missed)
	require.NoError(t, tr.Check(), "every flip was undone")
}

// TestCorruptNodeNamed: a leaf whose checksum fails is ErrCorrupt naming
// the leaf from every reader: Get, ScanErr, Check, the lookup kernels and
// the insert kernel (a batch staged before the damage, then recovered);
// once the byte is back the batch recovers and the tree checks.
func TestCorruptNodeNamed(t *testing.T) {
	m := newMachine(t)
	const order = 4
	tr, err := Create(m, "bt", Options{Order: order, Capacity: 200, MaxBatch: 100})
	require.NoError(t, err)
	ks := batchKeys("ascending", nil, 60, 10)
	_, err = tr.InsertBatch(ks, ks, BatchOptions{})
	require.NoError(t, err)
	var key uint64
	var a pm.Addr
	var named string
	orig := make([]byte, 1)
	firstLeaf := func() { // the first leaf's first value
		leaf := firstLeafID(t, tr)
		first, err := tr.readNode(leaf)
		require.NoError(t, err)
		key, a, named = first.keys[0], tr.g.nodeAddr(tr.r.Base, leaf).Add(16+8*order), fmt.Sprintf("node %d:", leaf)
		require.NoError(t, tr.read(a, orig))
	}
	flip := func() { require.NoError(t, m.CopyIn(a, []byte{orig[0] ^ 0x10})) }
	restore := func() { require.NoError(t, m.CopyIn(a, orig)) }
	requireNamed := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, ErrCorrupt, what)
		require.ErrorContains(t, err, named, what)
		t.Logf("%s: %v", what, err)
	}

	firstLeaf()
	flip()
	_, _, err = tr.Get(key)
	requireNamed(err, "Get")
	requireNamed(tr.ScanErr(0, ^uint64(0), func(k, v uint64) bool { return true }), "ScanErr")
	requireNamed(tr.Check(), "Check")
	_, _, err = tr.GetBatch([]uint64{key})
	requireNamed(err, "GetBatch")
	_, err = tr.ScanBatch([]Range{{0, ^uint64(0)}}, 100)
	requireNamed(err, "ScanBatch")
	restore()

	// The host's plan reads the leaf, so damage it between the plan and
	// the launch: the insert kernel's own check finds it.
	for x, alg := range []Alg{Alg2, Alg1} {
		firstLeaf() // the batches replace it
		o := BatchOptions{Alg: alg}.withDefaults()
		rec, lanes, starts, offs, err := tr.stageBatch([]uint64{key + 1000, uint64(x)}, []uint64{1, 2}, o)
		require.NoError(t, err)
		flip()
		_, err = tr.finish(rec, lanes, starts, offs, o, true)
		requireNamed(err, "insert kernel, "+alg.String())
		_, err = tr.Recover(BatchOptions{})
		requireNamed(err, "Recover")
		restore()
		_, err = tr.Recover(BatchOptions{})
		require.NoError(t, err)
	}
	tr2, err := Open(m, "bt")
	require.NoError(t, err)
	require.NoError(t, tr2.Check())
	for _, k := range []uint64{0, 1} {
		v, ok, err := tr2.Get(k)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, uint64(2), v)
	}
}

// TestCRCWord: crcWord is seal's CRC-32C of the same 8 bytes, from any
// state, and nextCheck is the CRC-32C of 'N', id and next.
func TestCRCWord(t *testing.T) {
	b := []byte{'N', 1, 2, 3, 4, 5, 6, 7, 8}
	require.Equal(t, seal.Checksum(b), crcWord(crcN, 0x0807060504030201))
	require.Equal(t, seal.Checksum(b), nextCheck(0x04030201, 0x08070605))
	require.Equal(t, seal.Checksum(b[1:]), crcWord(0, 0x0807060504030201))
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	w := make([]byte, 8)
	for range 1000 {
		crc, v := rng.Uint32(), rng.Uint64()
		binary.LittleEndian.PutUint64(w, v)
		require.Equal(t, seal.Update(crc, w), crcWord(crc, v), "crc %#x v %#x", crc, v)
		require.Equal(t, crcWordsRef(crc, v, 8), crcWord(crc, v))
		id, next := rng.Uint32(), rng.Uint32()
		require.Equal(t, nextCheckRef(id, next), nextCheck(id, next))
	}
}

// The checksums as the first version of format 3 computed them, byte by
// byte: the reference nodeSum and nextCheck must match (the format's
// checksum values never change), and the baseline of BenchmarkNodeSum.

// nodeSumRef is format 3's nodeSum as first written.
func nodeSumRef(id uint32, b []byte, order int) uint32 {
	h := binary.LittleEndian.Uint32(b)
	cnt := int(h >> 16)
	nk := cnt
	if h>>8&0xff != kindLeaf {
		nk = max(cnt-1, 0)
	}
	crc := crcWordsRef(0, uint64(id)|uint64(h)<<32, 8) // the id, then the header's low half
	crc = seal.Update(crc, b[16:16+8*nk])
	return seal.Update(crc, b[16+8*order:16+8*order+8*cnt])
}

// nextCheckRef is format 3's nextCheck as first written.
func nextCheckRef(id, next uint32) uint32 {
	return crcWordsRef(crcWordsRef(0, 'N', 1), uint64(id)|uint64(next)<<32, 8)
}

// castagnoli is the CRC-32C table the references read.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcWordsRef is seal.Update(crc, the n low bytes of v, little-endian),
// a byte at a time.
func crcWordsRef(crc uint32, v uint64, n int) uint32 {
	crc = ^crc
	for range n {
		crc = castagnoli[byte(crc)^byte(v)] ^ crc>>8
		v >>= 8
	}
	return ^crc
}

// decodeNodeIntoRef is decodeNodeInto as first written (nodeSumRef,
// nextCheckRef, a word at a time), the baseline of BenchmarkNodeSum.
func decodeNodeIntoRef(b []byte, order int, id uint32, n *node) error {
	if order < MinOrder || order > MaxOrder || uint64(len(b)) < nodeBytesFor(order) {
		return fmt.Errorf("%w: node %d of %d bytes for order %d", ErrCorrupt, id, len(b), order)
	}
	h := binary.LittleEndian.Uint64(b)
	cnt, err := checkHeader(id, h, order)
	if err != nil {
		return err
	}
	if sum := nodeSumRef(id, b, order); uint32(h>>32) != sum {
		return fmt.Errorf("%w: node %d: checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, id, uint32(h>>32), sum)
	}
	w := binary.LittleEndian.Uint64(b[8:])
	next := uint32(w)
	if uint32(w>>32) != nextCheckRef(id, next) {
		return fmt.Errorf("%w: node %d: next word %#x fails its check", ErrCorrupt, id, w)
	}
	n.leaf, n.next = h>>8&0xff == kindLeaf, next
	if !n.leaf && next != 0 {
		return fmt.Errorf("%w: node %d: internal node with a next pointer", ErrCorrupt, id)
	}
	nk := cnt
	if !n.leaf {
		nk = cnt - 1
	}
	n.keys = sized(n.keys, nk)
	n.vals = sized(n.vals, cnt)
	for i := range n.keys {
		n.keys[i] = binary.LittleEndian.Uint64(b[16+8*i:])
	}
	for i := range n.vals {
		n.vals[i] = binary.LittleEndian.Uint64(b[16+8*order+8*i:])
	}
	return nil
}

// TestNodeSumReference: nodeSum and decodeNodeInto agree with the
// reference (format 3 as first written) on random nodes of orders 4, 15
// and 255: random bytes everywhere (unused slots and padding included),
// a header of either kind with every count from 0 (1 for an internal
// node) to the order, a random id; half of them sealed so that they
// decode, the other half with a random stored sum or next word.
func TestNodeSumReference(t *testing.T) {
	seed := testSeed(t)
	for _, order := range []int{4, 15, 255} {
		t.Run(fmt.Sprintf("order %d", order), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(order)))
			b := make([]byte, nodeBytesFor(order))
			var got, want node
			for i := range 4000 {
				for j := range b {
					b[j] = byte(rng.Uint32())
				}
				leaf := rng.IntN(2) == 0
				cnt := rng.IntN(order + 1)
				if !leaf {
					cnt = max(cnt, 1)
				}
				if i%8 == 0 {
					cnt = order // full nodes: the keys run into the values
				}
				id := rng.Uint32()
				binary.LittleEndian.PutUint32(b, uint32(nodeHeader(leaf, cnt)))
				sum := nodeSumRef(id, b, order)
				require.Equal(t, sum, nodeSum(id, b, order), "node %d leaf=%v count %d", id, leaf, cnt)
				if i%2 == 0 {
					binary.LittleEndian.PutUint32(b[4:], sum)
					next := uint32(0)
					if leaf {
						next = rng.Uint32()
					}
					binary.LittleEndian.PutUint64(b[8:], uint64(nextCheckRef(id, next))<<32|uint64(next))
				}
				errRef := decodeNodeIntoRef(b, order, id, &want)
				err := decodeNodeInto(b, order, id, &got)
				if errRef != nil {
					require.EqualError(t, err, errRef.Error())
					continue
				}
				require.NoError(t, err)
				require.Equal(t, want.leaf, got.leaf)
				require.Equal(t, want.next, got.next)
				require.Equal(t, want.keys, got.keys)
				require.Equal(t, want.vals, got.vals)
			}
		})
	}
}

// BenchmarkNodeSum: the checksum of a full node of the default order,
// alone and as part of decoding it, and of a half-full internal node;
// the ref variants are format 3's first implementation (nodeSumRef,
// decodeNodeIntoRef), for a before-and-after in one run.
func BenchmarkNodeSum(b *testing.B) {
	const order = 15
	n := &node{leaf: true, next: 9, keys: make([]uint64, order), vals: make([]uint64, order)}
	for i := range n.keys {
		n.keys[i], n.vals[i] = uint64(i), uint64(i*i)
	}
	img := encodeNode(n, order, 5)
	half := encodeNode(&node{keys: n.keys[:7], vals: n.vals[:8]}, order, 5)
	for _, c := range []struct {
		name   string
		sum    func(uint32, []byte, int) uint32
		decode func([]byte, int, uint32, *node) error
	}{{"", nodeSum, decodeNodeInto}, {"ref", nodeSumRef, decodeNodeIntoRef}} {
		b.Run("sum"+c.name, func(b *testing.B) {
			for b.Loop() {
				c.sum(5, img, order)
			}
		})
		b.Run("sumhalf"+c.name, func(b *testing.B) {
			for b.Loop() {
				c.sum(5, half, order)
			}
		})
		b.Run("decode"+c.name, func(b *testing.B) {
			var d node
			for b.Loop() {
				if err := c.decode(img, order, 5, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
