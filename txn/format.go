package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/scopedpm/scopedpm/internal/seal"
)

// Line is the alignment of every persistent structure's parts: a GPU cache
// line, the unit the hardware coalesces a warp's accesses into.
const Line = 128

// The header is the first line of every region txn creates: an 8-byte
// magic, a 4-byte version, 4 reserved bytes, up to 13 little-endian 8-byte
// fields, and at byte 124 a CRC-32C of bytes 0..123. It is written once, at
// create, by the host.
const (
	headerVersion = 1
	headerFields  = 13
)

// Region magics.
const (
	magicConv = "TXNCONV\x00"
	magicHCL  = "TXNHCL\x00\x00"
	magicEST  = "TXNEST\x00\x00"
	magicCkpt = "TXNCKPT\x00"
)

func encodeHeader(magic string, fields ...uint64) []byte {
	if len(fields) > headerFields {
		panic("txn: bad header layout") // internal invariant
	}
	b := seal.New(magic, Line)
	binary.LittleEndian.PutUint32(b[8:], headerVersion)
	seal.PutUint64s(b, 16, fields...)
	seal.Seal(b)
	return b
}

// decodeHeader checks magic, version and checksum and returns n fields.
func decodeHeader(b []byte, magic string, n int) ([]uint64, error) {
	if n > headerFields {
		return nil, fmt.Errorf("%w: header of %d fields", ErrCorrupt, n)
	}
	b, err := seal.Open(b, Line, magic)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != headerVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, v, headerVersion)
	}
	return seal.Uint64s(b, 16, n), nil
}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// Log entries. A partition (or HCL slot) is a byte stream; an entry is its
// payload, zero-padded to the stream's unit (8 bytes for a conventional log,
// 4 for HCL), followed by an 8-byte trailer: the payload length and a CRC-32C.
// The trailer comes last so the newest entry is found from the tail, which
// is where an undo log is read and removed from. The checksum covers the
// log kind, the partition's generation, the partition number, the entry's
// position, the length and the payload: an entry written under an older
// generation, at another place, or torn by a crash does not verify.
const trailerSize = 8

// maxEntry bounds an entry's payload.
const maxEntry = 1 << 30

// entryPre is the length of the prefix the checksum covers before the
// payload: the kind, the generation, the partition, the position and the
// length.
const entryPre = 17

func putEntryPre(b []byte, kind byte, gen, part, pos uint32, n int) {
	b[0] = kind
	binary.LittleEndian.PutUint32(b[1:], gen)
	binary.LittleEndian.PutUint32(b[5:], part)
	binary.LittleEndian.PutUint32(b[9:], pos)
	binary.LittleEndian.PutUint32(b[13:], uint32(n))
}

func entryCRC(kind byte, gen, part, pos uint32, payload []byte) uint32 {
	var pre [entryPre]byte
	putEntryPre(pre[:], kind, gen, part, pos, len(payload))
	return seal.Update(seal.Checksum(pre[:]), payload)
}

// entrySize is the stream bytes an entry of n payload bytes takes.
func entrySize(n, unit uint64) uint64 { return roundUp(n, unit) + trailerSize }

// encodeEntry returns the stream bytes of an entry at pos. The checksum's
// prefix goes in front of them in one buffer, so that one allocation and
// one CRC call cover both (entryCRC's value).
func encodeEntry(kind byte, gen, part, pos uint32, payload []byte, unit uint64) []byte {
	b := make([]byte, entryPre+entrySize(uint64(len(payload)), unit))
	putEntryPre(b, kind, gen, part, pos, len(payload))
	copy(b[entryPre:], payload)
	crc := seal.Checksum(b[:entryPre+len(payload)])
	b = b[entryPre:]
	t := b[len(b)-trailerSize:]
	binary.LittleEndian.PutUint32(t, uint32(len(payload)))
	binary.LittleEndian.PutUint32(t[4:], crc)
	return b
}

// decodeTrailer returns the start of the entry that ends at tail and its
// payload length, from its trailer, checking bounds only.
func decodeTrailer(trailer []byte, tail, unit uint64) (start, n uint64, err error) {
	if len(trailer) != trailerSize {
		return 0, 0, fmt.Errorf("%w: trailer of %d bytes", ErrCorrupt, len(trailer))
	}
	n = uint64(binary.LittleEndian.Uint32(trailer))
	size := entrySize(n, unit)
	if n > maxEntry || size > tail {
		return 0, 0, fmt.Errorf("%w: entry of %d bytes ends at %d", ErrCorrupt, n, tail)
	}
	return tail - size, n, nil
}

// verifyEntry checks the payload of the entry at pos against its trailer.
func verifyEntry(kind byte, gen, part, pos uint32, payload, trailer []byte) error {
	want := binary.LittleEndian.Uint32(trailer[4:])
	if got := entryCRC(kind, gen, part, pos, payload); got != want {
		return fmt.Errorf("%w: entry at %d of partition %d: checksum %08x, want %08x", ErrCorrupt, pos, part, got, want)
	}
	return nil
}

// DecodeStream decodes the entries of a partition's byte stream, newest
// first, for the generation gen and the partition number part; unit is 8
// for a conventional log and 4 for HCL, and kind 'C' or 'H'. It stops at the
// first entry that does not verify and returns the entries before it with
// an error wrapping ErrCorrupt. It never panics; it is the decoder the logs
// use, exported for tools and fuzzing.
func DecodeStream(kind byte, gen, part uint32, stream []byte, unit int) ([][]byte, error) {
	if unit != 4 && unit != 8 {
		return nil, fmt.Errorf("%w: unit %d", ErrBadArg, unit)
	}
	var out [][]byte
	tail := uint64(len(stream))
	if tail%uint64(unit) != 0 {
		return nil, fmt.Errorf("%w: stream of %d bytes, not a multiple of %d", ErrCorrupt, tail, unit)
	}
	for tail > 0 {
		if tail < trailerSize {
			return out, fmt.Errorf("%w: %d stray bytes at the stream's start", ErrCorrupt, tail)
		}
		tr := stream[tail-trailerSize : tail]
		start, n, err := decodeTrailer(tr, tail, uint64(unit))
		if err != nil {
			return out, err
		}
		p := stream[start : start+n]
		if err := verifyEntry(kind, gen, part, uint32(start), p, tr); err != nil {
			return out, err
		}
		out = append(out, p)
		tail = start
	}
	return out, nil
}

// ctrl is a partition's control word: generation in the high 32 bits, tail
// (stream bytes in use) in the low 32. It is the partition's commit point.
func ctrlGen(w uint64) uint32  { return uint32(w >> 32) }
func ctrlTail(w uint64) uint32 { return uint32(w) }
func ctrlWord(gen, tail uint32) uint64 {
	return uint64(gen)<<32 | uint64(tail)
}

// tagged words: a 48-bit value with a 16-bit check of (what, index, value)
// in the low bits, for the epoch status table and checkpoint index words.
// Zero is the untagged value 0.
const maxTagged = 1<<48 - 1

func tagOf(what byte, idx uint64, v uint64) uint16 {
	var b [17]byte
	b[0] = what
	binary.LittleEndian.PutUint64(b[1:], idx)
	binary.LittleEndian.PutUint64(b[9:], v)
	return uint16(seal.Checksum(b[:]))
}

func tagWord(what byte, idx, v uint64) uint64 {
	if v == 0 {
		return 0
	}
	return v<<16 | uint64(tagOf(what, idx, v))
}

func untag(what byte, idx, w uint64) (uint64, error) {
	if w == 0 {
		return 0, nil
	}
	v := w >> 16
	if v == 0 || uint16(w) != tagOf(what, idx, v) {
		return 0, fmt.Errorf("%w: word %d holds %#x, bad check bits", ErrCorrupt, idx, w)
	}
	return v, nil
}
