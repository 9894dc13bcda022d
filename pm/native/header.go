package native

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/scopedpm/scopedpm/internal/seal"
	"github.com/scopedpm/scopedpm/pm"
)

// A region file is a header of HeaderSize bytes followed by the region's
// bytes. The header, little-endian:
//
//	offset  size  field
//	0       8     magic "SCPMREG\x00"
//	8       4     format version (1)
//	12      4     flags (0; reserved)
//	16      8     region size in bytes
//	24      8     region base address (pm.Addr)
//	32      2     name length n (1..255)
//	34      n     region name
//	4092    4     CRC-32C (Castagnoli) of bytes 0..4091
//
// Bytes between the name and the checksum are zero. The header is a whole
// page so that the region's bytes start page-aligned in the file.
const (
	// HeaderSize is the size of a region file's header.
	HeaderSize = 4096
	// FormatVersion is the region file format this package writes and reads.
	FormatVersion = 1

	fileMagic = "SCPMREG\x00"
	nameOff   = 34
	crcOff    = HeaderSize - 4
	maxName   = 255
)

// Header is the decoded header of a region file.
type Header struct {
	Version uint32
	Size    uint64  // region size in bytes
	Base    pm.Addr // base address of the region in the machine's address space
	Name    string  // region name
}

// Encode returns the header's HeaderSize bytes, checksum included.
func (h Header) Encode() []byte {
	b := seal.New(fileMagic, HeaderSize)
	binary.LittleEndian.PutUint32(b[8:], h.Version)
	binary.LittleEndian.PutUint64(b[16:], h.Size)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.Base))
	binary.LittleEndian.PutUint16(b[32:], uint16(len(h.Name)))
	copy(b[nameOff:], h.Name)
	seal.Seal(b)
	return b
}

// DecodeHeader decodes and validates a region file header. Anything that is
// not a header this package wrote (too short, another file's magic, an
// unknown version, a bad checksum, a size, base or name out of range) is an
// error wrapping pm.ErrCorrupt, and also ErrForeign for another file's
// magic or ErrVersion for another format version; it never panics.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) >= len(fileMagic) && !seal.HasMagic(b, fileMagic) {
		return Header{}, fmt.Errorf("%w: %w: bad magic %q", pm.ErrCorrupt, ErrForeign, b[:len(fileMagic)])
	}
	b, err := seal.Open(b, HeaderSize, fileMagic)
	if err != nil {
		return Header{}, fmt.Errorf("%w: header: %w", pm.ErrCorrupt, err)
	}
	h := Header{
		Version: binary.LittleEndian.Uint32(b[8:]),
		Size:    binary.LittleEndian.Uint64(b[16:]),
		Base:    pm.Addr(binary.LittleEndian.Uint64(b[24:])),
	}
	if h.Version != FormatVersion {
		return Header{}, fmt.Errorf("%w: %w: format version %d, this build reads %d", pm.ErrCorrupt, ErrVersion, h.Version, FormatVersion)
	}
	if flags := binary.LittleEndian.Uint32(b[12:]); flags != 0 {
		return Header{}, fmt.Errorf("%w: unknown flags %#x", pm.ErrCorrupt, flags)
	}
	if h.Size == 0 || h.Size > pm.MaxRangeSize {
		return Header{}, fmt.Errorf("%w: region size %d (want 1..%d)", pm.ErrCorrupt, h.Size, uint64(pm.MaxRangeSize))
	}
	if h.Base == 0 || uint64(h.Base)&(1<<pm.OffsetBits-1) != 0 || uint64(h.Base)>>pm.OffsetBits >= pm.MaxRanges {
		return Header{}, fmt.Errorf("%w: region base %v", pm.ErrCorrupt, h.Base)
	}
	n := int(binary.LittleEndian.Uint16(b[32:]))
	if n == 0 || n > maxName {
		return Header{}, fmt.Errorf("%w: name length %d", pm.ErrCorrupt, n)
	}
	h.Name = string(b[nameOff : nameOff+n])
	if strings.ContainsAny(h.Name, "\x00/") {
		return Header{}, fmt.Errorf("%w: region name %q", pm.ErrCorrupt, h.Name)
	}
	for _, c := range b[nameOff+n : crcOff] {
		if c != 0 {
			return Header{}, fmt.Errorf("%w: nonzero padding after the name", pm.ErrCorrupt)
		}
	}
	return h, nil
}
