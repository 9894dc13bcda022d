package btree

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeNode: any bytes decode to a node that re-encodes to the same
// entries, or to an error wrapping ErrCorrupt; never a panic. The decoder
// of snapshot reads (decodeBodyInto, which skips the next word) accepts
// whatever decodeNodeInto accepts and gives the same node, next aside.
// (Bytes not written by encodeNode almost never pass the node's
// checksums: the seeds are the fuzzer's way into the decoder past them.)
func FuzzDecodeNode(f *testing.F) {
	for _, order := range []int{4, 15} {
		f.Add(encodeNode(&node{leaf: true, next: 7, keys: []uint64{1, 2}, vals: []uint64{3, 4}}, order, 3), order)
		f.Add(encodeNode(&node{keys: []uint64{10}, vals: []uint64{5, 6}}, order, 3), order)
	}
	f.Add([]byte{nodeTag, kindInner}, 4)
	f.Fuzz(func(t *testing.T, b []byte, order int) {
		var body node
		berr := decodeBodyInto(b, order, 3, &body)
		if berr != nil {
			require.True(t, errors.Is(berr, ErrCorrupt), "%v", berr)
		}
		n, err := decodeNode(b, order, 3)
		if err != nil {
			require.True(t, errors.Is(err, ErrCorrupt), "%v", err)
			return
		}
		require.NoError(t, berr, "the body decoder refuses what the node decoder accepts")
		require.Equal(t, n.leaf, body.leaf)
		require.Equal(t, n.keys, body.keys)
		require.Equal(t, n.vals, body.vals)
		require.Zero(t, body.next)
		require.LessOrEqual(t, len(n.vals), order)
		if !n.leaf {
			require.Equal(t, len(n.vals)-1, len(n.keys))
		}
		n2, err := decodeNode(encodeNode(n, order, 3), order, 3)
		require.NoError(t, err)
		require.Equal(t, n, n2)
	})
}

// FuzzDecodeHeader covers the header, meta and batch-record decoders.
func FuzzDecodeHeader(f *testing.F) {
	g := geometry{order: 15, nodeBytes: nodeBytesFor(15), capacity: 100, maxBatch: 50, maxLanes: 50}
	f.Add(g.encode())
	f.Add(meta{seq: 3, root: 5, height: 2, count: 40}.encode())
	f.Add(record{seq: 4, n: 10, lanes: 2, d: 1, oldRoot: 5, oldHeight: 2, free: 20, topStart: 10, topEnd: 20}.encode())
	f.Add(make([]byte, line))
	f.Fuzz(func(t *testing.T, b []byte) {
		if gg, err := decodeHeader(b); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		} else {
			require.NoError(t, gg.validate())
			require.Equal(t, b[:line], gg.encode())
		}
		if m, err := decodeMeta(b, g); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		} else {
			require.Less(t, uint64(m.root), g.capacity)
		}
		if r, err := decodeRecord(b, g); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		} else {
			require.LessOrEqual(t, r.n, g.maxBatch)
			require.LessOrEqual(t, r.topEnd, r.free)
		}
	})
}

// TestOpenCorrupt: a region that is not a tree is an error, not a panic.
func TestOpenCorrupt(t *testing.T) {
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: 4, Capacity: 50, MaxBatch: 20})
	require.NoError(t, err)
	require.NoError(t, tr.Put(1, 2))
	require.NoError(t, tr.Check())
	// Break the header's checksum.
	require.NoError(t, m.CopyIn(tr.r.Base.Add(20), []byte{0xff}))
	_, err = Open(m, "bt")
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = Open(m, "nope")
	require.Error(t, err)
	_, err = Create(m, "x", Options{Order: 2})
	require.ErrorIs(t, err, ErrBadArg)
}

// TestOldFormatRefused: a tree whose header carries another format
// version (version 1, before the piece-buffer fix, wrote 0 there; version
// 2's nodes have no checksums) is refused with ErrVersion, which is also an
// ErrCorrupt.
func TestOldFormatRefused(t *testing.T) {
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: 4, Capacity: 50, MaxBatch: 20})
	require.NoError(t, err)
	require.NoError(t, tr.Put(1, 2))
	for _, v := range []uint32{0, 1, 2, formatVersion + 1} {
		b := tr.g.encode()
		binary.LittleEndian.PutUint32(b[versionOff:], v)
		binary.LittleEndian.PutUint32(b[headerCRC:], crc32.Checksum(b[:headerCRC], crc32.MakeTable(crc32.Castagnoli)))
		require.NoError(t, m.CopyIn(tr.r.Base, b))
		_, err = Open(m, "bt")
		require.ErrorIs(t, err, ErrVersion, "version %d", v)
		require.ErrorIs(t, err, ErrCorrupt)
	}
	require.NoError(t, m.CopyIn(tr.r.Base, tr.g.encode()))
	tr2, err := Open(m, "bt")
	require.NoError(t, err)
	require.NoError(t, tr2.Check())
}

// TestCheckFindsDamage: Check reports a broken node, a leaked node and a
// broken leaf chain.
func TestCheckFindsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, tr *Tree)
	}{
		{"leaked node", func(t *testing.T, tr *Tree) {
			ids, err := tr.freeIDs(1)
			require.NoError(t, err)
			require.NoError(t, tr.publish(meta{seq: tr.cur.seq + 1, root: tr.cur.root, height: tr.cur.height, count: tr.cur.count}, ids, nil))
		}},
		{"bad leaf chain", func(t *testing.T, tr *Tree) {
			id := firstLeafID(t, tr)
			b := make([]byte, 8)
			require.NoError(t, tr.write(tr.g.nodeAddr(tr.r.Base, id).Add(8), b))
		}},
		{"keys out of order", func(t *testing.T, tr *Tree) {
			id := firstLeafID(t, tr)
			b := make([]byte, 8)
			b[0] = 0xff
			require.NoError(t, tr.write(tr.g.nodeAddr(tr.r.Base, id).Add(16), b))
		}},
		{"count", func(t *testing.T, tr *Tree) {
			mt := tr.cur
			mt.seq++
			mt.count++
			require.NoError(t, tr.publish(mt, nil, nil))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			tr, err := Create(m, "bt", Options{Order: 4, Capacity: 200, MaxBatch: 100})
			require.NoError(t, err)
			ks := batchKeys("ascending", nil, 60, 1)
			_, err = tr.InsertBatch(ks, ks, BatchOptions{})
			require.NoError(t, err)
			require.NoError(t, tr.Check())
			tc.damage(t, tr)
			err = tr.Check()
			require.ErrorIs(t, err, ErrCorrupt)
			t.Log(err)
		})
	}
}

func firstLeafID(t *testing.T, tr *Tree) uint32 {
	id := tr.cur.root
	for range tr.cur.height - 1 {
		n, err := tr.readNode(id)
		require.NoError(t, err)
		id = uint32(n.vals[0])
	}
	return id
}

// TestScanReportsErrors: a leaf of the chain that does not decode ends
// Scan and All early after the keys before it, and ScanErr returns an
// error wrapping ErrCorrupt after yielding the same keys; a scan that
// stays left of the leaf, or that yield stops before it, has no error.
func TestScanReportsErrors(t *testing.T) {
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: 4, Capacity: 200, MaxBatch: 100})
	require.NoError(t, err)
	ks := batchKeys("ascending", nil, 60, 1)
	_, err = tr.InsertBatch(ks, ks, BatchOptions{})
	require.NoError(t, err)
	first, err := tr.readNode(firstLeafID(t, tr))
	require.NoError(t, err)
	require.NotZero(t, first.next)
	require.NoError(t, tr.write(tr.g.nodeAddr(tr.r.Base, first.next), make([]byte, 8)))
	before := first.keys // the keys a scan yields before the broken leaf

	tests := []struct {
		name    string
		lo, hi  uint64
		stop    int // yield returns false after this many keys (0: never)
		want    []uint64
		wantErr error
	}{
		{"through the broken leaf", 0, ^uint64(0), 0, before, ErrCorrupt},
		{"left of it", 0, before[len(before)-1], 0, before, nil},
		{"stopped before it", 0, ^uint64(0), 2, before[:2], nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint64
			err := tr.ScanErr(tc.lo, tc.hi, func(k, v uint64) bool {
				got = append(got, k)
				return tc.stop == 0 || len(got) < tc.stop
			})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, got)
			got = got[:0]
			for k := range tr.Scan(tc.lo, tc.hi) {
				got = append(got, k)
				if tc.stop > 0 && len(got) == tc.stop {
					break
				}
			}
			require.Equal(t, tc.want, got, "Scan ends where ScanErr failed")
		})
	}
	_, _, err = tr.Get(before[len(before)-1] + 1)
	require.ErrorIs(t, err, ErrCorrupt, "Get reports the broken leaf")
}
