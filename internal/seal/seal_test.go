package seal_test

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/seal"
)

// TestLayout pins the format every sealed block shares: magic first, the
// fields where the caller puts them, and a CRC-32C of the bytes before it,
// little-endian, in the last four bytes.
func TestLayout(t *testing.T) {
	b := seal.New("MAGICxx\x00", 64)
	seal.PutUint64s(b, 8, 1, 2, 0xdeadbeef)
	seal.Seal(b)
	want := make([]byte, 64)
	copy(want, "MAGICxx\x00")
	for i, f := range []uint64{1, 2, 0xdeadbeef} {
		binary.LittleEndian.PutUint64(want[8+8*i:], f)
	}
	binary.LittleEndian.PutUint32(want[60:], crc32.Checksum(want[:60], crc32.MakeTable(crc32.Castagnoli)))
	require.Equal(t, want, b)

	got, err := seal.Open(append(b, 9, 9), 64, "MAGICxx\x00")
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, []uint64{1, 2, 0xdeadbeef}, seal.Uint64s(got, 8, 3))
	require.Equal(t, seal.Checksum(want[:60]), seal.Update(seal.Checksum(want[:10]), want[10:60]))
}

func TestOpenErrors(t *testing.T) {
	const magic = "MAGICxx\x00"
	b := seal.New(magic, 32)
	seal.Seal(b)
	_, err := seal.Open(b[:31], 32, magic)
	require.ErrorIs(t, err, seal.ErrShort)
	_, err = seal.Open(b, 32, "OTHERxx\x00")
	require.ErrorIs(t, err, seal.ErrMagic)
	bad := append([]byte(nil), b...)
	bad[9] ^= 1
	_, err = seal.Open(bad, 32, magic)
	require.ErrorIs(t, err, seal.ErrChecksum)
	require.True(t, seal.HasMagic(b, magic))
	require.False(t, seal.HasMagic(b[:7], magic))

	r := seal.New("", 16) // a record without a magic
	r[0] = 7
	seal.Seal(r)
	_, err = seal.Open(r, 16, "")
	require.NoError(t, err)
	require.Panics(t, func() { seal.New("short", 16) })
}

func FuzzOpen(f *testing.F) {
	b := seal.New("MAGICxx\x00", 32)
	seal.Seal(b)
	f.Add(b)
	f.Add([]byte("MAGIC"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := seal.Open(data, 32, "MAGICxx\x00")
		if err == nil {
			require.Len(t, got, 32)
			c := append([]byte(nil), got...)
			seal.Seal(c)
			require.Equal(t, got, c, "an opened block reseals to itself")
		}
	})
}

// UpdateWord is Update of the word's 8 little-endian bytes, from any state.
func TestUpdateWord(t *testing.T) {
	seed := uint64(0x5ea1)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 1000 {
		crc, v := rng.Uint32(), rng.Uint64()
		b := binary.LittleEndian.AppendUint64(nil, v)
		require.Equal(t, seal.Update(crc, b), seal.UpdateWord(crc, v))
	}
}
