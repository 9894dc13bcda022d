package pm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/scopedpm/scopedpm/internal/seal"
)

// Image is a durable image: the PM namespace (each region's name and base
// address) and each region's bytes. It is what a crash leaves and what Reopen
// starts from.
type Image struct {
	Regions []RegionImage // sorted by name
}

// RegionImage is one region of an Image.
type RegionImage struct {
	Name string
	Base Addr
	Data []byte
}

// Region returns the region named name.
func (img *Image) Region(name string) (*RegionImage, bool) {
	i, ok := slices.BinarySearchFunc(img.Regions, name, func(r RegionImage, n string) int { return strings.Compare(r.Name, n) })
	if !ok {
		return nil, false
	}
	return &img.Regions[i], true
}

// Clone returns a deep copy of img.
func (img *Image) Clone() *Image {
	out := &Image{Regions: make([]RegionImage, len(img.Regions))}
	for i, r := range img.Regions {
		out.Regions[i] = RegionImage{Name: r.Name, Base: r.Base, Data: bytes.Clone(r.Data)}
	}
	return out
}

// Equal reports whether two images hold the same regions at the same bases
// with the same bytes.
func (img *Image) Equal(o *Image) bool {
	return slices.EqualFunc(img.Regions, o.Regions, func(a, b RegionImage) bool {
		return a.Name == b.Name && a.Base == b.Base && bytes.Equal(a.Data, b.Data)
	})
}

// Write copies data into the image at address a, which must lie inside one
// region. Crash checkers and timing backends use it to apply persists.
func (img *Image) Write(a Addr, data []byte) error {
	for i := range img.Regions {
		r := &img.Regions[i]
		if a>>OffsetBits != r.Base>>OffsetBits {
			continue
		}
		off := uint64(a - r.Base)
		if off > uint64(len(r.Data)) || uint64(len(data)) > uint64(len(r.Data))-off {
			return fmt.Errorf("%w: %d bytes at %v in region %q of %d bytes", ErrOutOfRange, len(data), a, r.Name, len(r.Data))
		}
		copy(r.Data[off:], data)
		return nil
	}
	return fmt.Errorf("%w: %v is in no region of the image", ErrUnmapped, a)
}

// The encoded image: magic, version, region count, then per region the name
// length (2 bytes), the name, the base and the size (8 bytes each) and the
// bytes; last, a CRC-32C of everything before it. Integers are little-endian.
const (
	imageMagic   = "SCPMIMG\x00"
	imageVersion = 1
	maxNameLen   = 255
)

// MarshalBinary encodes the image with a checksum.
func (img *Image) MarshalBinary() ([]byte, error) {
	if err := img.validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString(imageMagic)
	var w [8]byte
	binary.LittleEndian.PutUint32(w[:4], imageVersion)
	buf.Write(w[:4])
	binary.LittleEndian.PutUint32(w[:4], uint32(len(img.Regions)))
	buf.Write(w[:4])
	for _, r := range img.Regions {
		binary.LittleEndian.PutUint16(w[:2], uint16(len(r.Name)))
		buf.Write(w[:2])
		buf.WriteString(r.Name)
		binary.LittleEndian.PutUint64(w[:], uint64(r.Base))
		buf.Write(w[:])
		binary.LittleEndian.PutUint64(w[:], uint64(len(r.Data)))
		buf.Write(w[:])
		buf.Write(r.Data)
	}
	binary.LittleEndian.PutUint32(w[:4], seal.Checksum(buf.Bytes()))
	buf.Write(w[:4])
	return buf.Bytes(), nil
}

// UnmarshalBinary decodes an image encoded by MarshalBinary. Bytes that are
// not such an image (a wrong magic, version or checksum, a bad name, a
// duplicate region, a size that disagrees with the length) give an error
// wrapping ErrCorrupt; img is left unchanged.
func (img *Image) UnmarshalBinary(data []byte) error {
	const hdr = len(imageMagic) + 8
	if len(data) < hdr+4 || !seal.HasMagic(data, imageMagic) {
		return fmt.Errorf("%w: not an image (bad magic or too short)", ErrCorrupt)
	}
	if _, err := seal.Open(data, len(data), imageMagic); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	body := data[:len(data)-4]
	if v := binary.LittleEndian.Uint32(body[len(imageMagic):]); v != imageVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrCorrupt, v, imageVersion)
	}
	n := binary.LittleEndian.Uint32(body[len(imageMagic)+4:])
	p := body[hdr:]
	var out Image
	for i := uint32(0); i < n; i++ {
		if len(p) < 2 {
			return fmt.Errorf("%w: region %d truncated", ErrCorrupt, i)
		}
		nl := int(binary.LittleEndian.Uint16(p))
		p = p[2:]
		if len(p) < nl+16 {
			return fmt.Errorf("%w: region %d truncated", ErrCorrupt, i)
		}
		name := string(p[:nl])
		base := Addr(binary.LittleEndian.Uint64(p[nl:]))
		size := binary.LittleEndian.Uint64(p[nl+8:])
		p = p[nl+16:]
		if size > uint64(len(p)) {
			return fmt.Errorf("%w: region %q claims %d bytes, %d left", ErrCorrupt, name, size, len(p))
		}
		out.Regions = append(out.Regions, RegionImage{Name: name, Base: base, Data: bytes.Clone(p[:size])})
		p = p[size:]
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(p))
	}
	if err := out.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	*img = out
	return nil
}

// validate checks names, sizes, bases, order and uniqueness.
func (img *Image) validate() error {
	bases := make(map[Addr]string, len(img.Regions))
	for i, r := range img.Regions {
		if err := checkName(r.Name); err != nil {
			return err
		}
		if i > 0 && img.Regions[i-1].Name >= r.Name {
			return fmt.Errorf("%w: regions not sorted or %q duplicated", ErrRegionExists, r.Name)
		}
		if len(r.Data) == 0 || uint64(len(r.Data)) > MaxRangeSize {
			return fmt.Errorf("%w: region %q has %d bytes", ErrBadSize, r.Name, len(r.Data))
		}
		if r.Base == 0 || uint64(r.Base)&offMask != 0 || uint64(r.Base)>>OffsetBits >= MaxRanges {
			return fmt.Errorf("%w: region %q at base %v", ErrUnmapped, r.Name, r.Base)
		}
		if other, dup := bases[r.Base]; dup {
			return fmt.Errorf("%w: regions %q and %q share base %v", ErrRegionExists, other, r.Name, r.Base)
		}
		bases[r.Base] = r.Name
	}
	return nil
}

// checkName returns ErrBadName for names that are empty, longer than 255
// bytes, or hold a NUL or '/'.
func checkName(name string) error {
	if name == "" || len(name) > maxNameLen || strings.ContainsAny(name, "\x00/") {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	return nil
}
