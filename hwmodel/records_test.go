package hwmodel

import (
	"testing"
	"unsafe"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/stretchr/testify/require"
)

// A recordLog returns each kept record's own bytes across record and byte
// chunk boundaries, logs only the size of a record it does not keep, and
// starts over at reset with its chunks kept.
func TestRecordLog(t *testing.T) {
	require.Equal(t, uintptr(16), unsafe.Sizeof(record{}), "a record is 16 bytes: millions are logged at paper scale")
	var l recordLog
	const n = 3<<recChunkBits + 17 // several record chunks
	line := func(i int) []byte {   // 1..128 bytes, so that byte chunks fill unevenly
		b := make([]byte, 1+i%128)
		for k := range b {
			b[k] = byte(i + k)
		}
		return b
	}
	for i := range n {
		l.add(pm.Addr(64*i), line(i), i%5 != 0) // every fifth record without its bytes
	}
	require.Equal(t, n, l.len())
	for i := range n {
		r := l.at(i)
		require.Equal(t, pm.Addr(64*i), r.addr)
		require.Equal(t, uint32(len(line(i))), r.size)
		require.Equal(t, int32(-1), r.entry)
		if i%5 != 0 {
			require.Equal(t, line(i), l.bytes(i), "record %d", i)
		}
	}
	chunks := len(l.recs)
	l.reset()
	require.Zero(t, l.len())
	l.add(8, []byte{1, 2, 3}, true)
	require.Equal(t, []byte{1, 2, 3}, l.bytes(0))
	require.Len(t, l.recs, chunks, "reset keeps the chunks")
}
