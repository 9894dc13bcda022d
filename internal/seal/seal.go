// Package seal is the one codec of the module's sealed blocks: the headers of
// region files (pm/native), of the gpKVS table (kvs), of txn's regions and of
// the B+tree (btree), and the encoded machine image (pm.Image). A sealed block
// starts with an 8-byte magic and ends with a CRC-32C (Castagnoli) of every
// byte before it, little-endian, in its last 4 bytes; the fields between are
// little-endian integers at offsets each format fixes. The package holds the
// module's one Castagnoli table, for the formats' other checksums too.
package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// MagicSize is the size of a block's magic.
const MagicSize = 8

// SumSize is the size of a block's checksum, its last bytes.
const SumSize = 4

// Errors of Open. A format wraps them in its own corruption error.
var (
	ErrShort    = errors.New("seal: block too short")
	ErrMagic    = errors.New("seal: wrong magic")
	ErrChecksum = errors.New("seal: checksum mismatch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Update returns the CRC-32C crc extended with b (crc32.Update).
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// castagnoli8 are the slicing-by-8 tables of castagnoli: castagnoli8[k][i]
// is the CRC state after byte i followed by k zero bytes (castagnoli8[0]
// is the table itself).
var castagnoli8 = func() *[8][256]uint32 {
	var t [8][256]uint32
	t[0] = *castagnoli
	for k := 1; k < 8; k++ {
		for i := range t[k] {
			p := t[k-1][i]
			t[k][i] = p>>8 ^ t[0][byte(p)]
		}
	}
	return &t
}()

// UpdateWord returns Update(crc, the 8 bytes of v, little-endian), by
// slicing-by-8 tables: eight independent lookups, no slice (a slice of a
// local array escapes into crc32.Update, an allocation per call) and no
// call into hash/crc32. For one word at a time on hot paths.
func UpdateWord(crc uint32, v uint64) uint32 {
	v ^= uint64(^crc)
	t := castagnoli8
	return ^(t[7][byte(v)] ^ t[6][byte(v>>8)] ^ t[5][byte(v>>16)] ^ t[4][byte(v>>24)] ^
		t[3][byte(v>>32)] ^ t[2][byte(v>>40)] ^ t[1][byte(v>>48)] ^ t[0][byte(v>>56)])
}

// New returns a zeroed block of size bytes that starts with magic ("" for a
// block without one, such as a record inside a sealed region). It panics if
// magic is neither "" nor MagicSize bytes or size cannot hold magic and
// checksum: a format's constants are wrong.
func New(magic string, size int) []byte {
	if len(magic) != MagicSize && magic != "" || size < len(magic)+SumSize {
		panic("seal: bad block layout") // internal invariant
	}
	b := make([]byte, size)
	copy(b, magic)
	return b
}

// Seal writes the checksum of b's bytes before its last SumSize into them.
func Seal(b []byte) {
	n := len(b) - SumSize
	binary.LittleEndian.PutUint32(b[n:], Checksum(b[:n]))
}

// Open checks the sealed block at the start of b: at least size bytes, magic
// first (none for ""), and a checksum that matches. It returns the block,
// b[:size]. Its errors wrap ErrShort, ErrMagic or ErrChecksum, checked in
// that order; it never panics.
func Open(b []byte, size int, magic string) ([]byte, error) {
	if len(b) < size || size < len(magic)+SumSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrShort, len(b), size)
	}
	b = b[:size]
	if magic != "" && string(b[:MagicSize]) != magic {
		return nil, fmt.Errorf("%w: %q, want %q", ErrMagic, b[:MagicSize], magic)
	}
	n := size - SumSize
	if got, want := binary.LittleEndian.Uint32(b[n:]), Checksum(b[:n]); got != want {
		return nil, fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, got, want)
	}
	return b, nil
}

// HasMagic reports whether b starts with magic.
func HasMagic(b []byte, magic string) bool {
	return len(b) >= MagicSize && string(b[:MagicSize]) == magic
}

// PutUint64s writes fields as little-endian 8-byte integers from offset off.
func PutUint64s(b []byte, off int, fields ...uint64) {
	for i, f := range fields {
		binary.LittleEndian.PutUint64(b[off+8*i:], f)
	}
}

// Uint64s reads n little-endian 8-byte integers from offset off.
func Uint64s(b []byte, off, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[off+8*i:])
	}
	return out
}
