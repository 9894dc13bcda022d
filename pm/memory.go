package pm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Addr is a byte address in a machine's address space. The high bits select a
// range (a volatile allocation or a PM region), the low OffsetBits bits are
// the offset in it; address 0 is never mapped. A PM region keeps its base
// address across a crash and reopen, so addresses stored in PM stay valid.
type Addr uint64

// OffsetBits is the number of low address bits that hold the offset in a
// range; a range is at most 1<<OffsetBits bytes.
const OffsetBits = 40

// MaxRangeSize is the largest range Alloc or CreateRegion accepts.
const MaxRangeSize = 1 << OffsetBits

const offMask = 1<<OffsetBits - 1

// MaxRanges bounds the number of ranges mapped at once, and so the range
// index in an address. Freed indices are reused, lowest first.
const MaxRanges = 1 << 20

// String formats a as "0x<range>:<offset>" in hex.
func (a Addr) String() string {
	return fmt.Sprintf("0x%x:%x", uint64(a)>>OffsetBits, uint64(a)&offMask)
}

// Add returns a+n.
func (a Addr) Add(n uint64) Addr { return a + Addr(n) }

// Kind is the kind of memory a range holds.
type Kind uint8

// Memory kinds.
const (
	DeviceMem Kind = iota // GPU device memory (volatile)
	HostMem               // host DRAM (volatile)
	PMem                  // a named persistent-memory region
	SharedMem             // a block's on-chip shared memory (volatile, mapped by the executor)
)

// String returns "device", "host" or "pm".
func (k Kind) String() string {
	switch k {
	case DeviceMem:
		return "device"
	case HostMem:
		return "host"
	case PMem:
		return "pm"
	case SharedMem:
		return "shared"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Range describes one allocated range of the address space.
type Range struct {
	Name string // region name; empty for volatile ranges
	Base Addr
	Size uint64
	Kind Kind
}

// Contains reports whether [a, a+n) lies inside r.
func (r Range) Contains(a Addr, n uint64) bool {
	return a >= r.Base && uint64(a-r.Base) <= r.Size && n <= r.Size-uint64(a-r.Base)
}

type segment struct {
	Range
	data   []byte
	closed error // set by ClosePM: every access fails with it
}

// Memory is a machine's address space and its visible image: what loads
// return. It does not know about durability; a Backend does.
type Memory struct {
	segs  []*segment // indexed by Addr >> OffsetBits; nil entries are unmapped
	holes int        // nil entries in segs above index 0
}

func newMemory() *Memory { return &Memory{segs: []*segment{nil}} }

// add maps a new range at index idx (or the next free index if idx == 0).
func (m *Memory) add(kind Kind, name string, size uint64, idx int, data []byte) (*segment, error) {
	if size == 0 || size > MaxRangeSize {
		return nil, fmt.Errorf("%w: %d bytes (want 1..%d)", ErrBadSize, size, uint64(MaxRangeSize))
	}
	if idx == 0 {
		idx = m.freeIndex()
	}
	if idx >= MaxRanges {
		return nil, fmt.Errorf("%w: range index %d, at most %d ranges", ErrBadSize, idx, MaxRanges)
	}
	if idx >= len(m.segs) {
		m.holes += idx - len(m.segs)
		m.segs = append(m.segs, make([]*segment, idx+1-len(m.segs))...)
	} else if m.segs[idx] == nil {
		m.holes--
	}
	if m.segs[idx] != nil {
		return nil, fmt.Errorf("%w: range index %d in use", ErrCorrupt, idx)
	}
	if data == nil {
		data = make([]byte, size)
	}
	s := &segment{Range: Range{Name: name, Base: Addr(uint64(idx) << OffsetBits), Size: size, Kind: kind}, data: data}
	m.segs[idx] = s
	return s, nil
}

func (m *Memory) remove(s *segment) {
	m.segs[s.Base>>OffsetBits] = nil
	m.holes++
}

// ClosePM closes every PM range: later accesses of their addresses fail
// with err (with the address), and Regions no longer lists them. A Storage
// backend calls it as it closes, with its ErrClosed, before it frees the
// memory that holds the ranges' bytes.
func (m *Memory) ClosePM(err error) {
	for i, s := range m.segs {
		if s != nil && s.Kind == PMem {
			// Size 0: Access's fast path never takes it.
			m.segs[i] = &segment{Range: Range{Base: s.Base, Kind: PMem}, closed: err}
		}
	}
}

// freeIndex returns the lowest unused range index.
func (m *Memory) freeIndex() int {
	if m.holes > 0 {
		for i := 1; i < len(m.segs); i++ {
			if m.segs[i] == nil {
				return i
			}
		}
	}
	return len(m.segs)
}

// MapShared maps a zero-filled range of size bytes of SharedMem for an
// executor (a block's shared memory). Host code allocates with
// Machine.Alloc instead; no backend hears of these ranges.
func (m *Memory) MapShared(size uint64) (Addr, error) {
	s, err := m.add(SharedMem, "", size, 0, nil)
	if err != nil {
		return 0, err
	}
	return s.Base, nil
}

// UnmapShared unmaps a range MapShared returned.
func (m *Memory) UnmapShared(a Addr) error {
	s, off, err := m.locate(a, 0, 1)
	if err != nil {
		return err
	}
	if off != 0 || s.Kind != SharedMem {
		return fmt.Errorf("%w: %v is not a shared range", ErrNotVolatile, a)
	}
	m.remove(s)
	return nil
}

// Lookup returns the range holding address a.
func (m *Memory) Lookup(a Addr) (Range, error) {
	s, _, err := m.locate(a, 1, 1)
	if err != nil {
		return Range{}, err
	}
	return s.Range, nil
}

// Ranges returns every mapped range in address order (a closed one is
// not mapped; see ClosePM).
func (m *Memory) Ranges() []Range {
	var out []Range
	for _, s := range m.segs {
		if s != nil && s.closed == nil {
			out = append(out, s.Range)
		}
	}
	return out
}

// Regions returns the PM regions in name order.
func (m *Memory) Regions() []Range {
	var out []Range
	for _, s := range m.segs {
		if s != nil && s.Kind == PMem && s.closed == nil {
			out = append(out, s.Range)
		}
	}
	slices.SortFunc(out, func(a, b Range) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (m *Memory) region(name string) *segment {
	for _, s := range m.segs {
		if s != nil && s.Kind == PMem && s.closed == nil && s.Name == name {
			return s
		}
	}
	return nil
}

// locate checks that [a, a+n) lies in one range and that a is a multiple of
// align, and returns the range and the offset of a in it.
func (m *Memory) locate(a Addr, n, align uint64) (*segment, uint64, error) {
	idx := uint64(a) >> OffsetBits
	if idx >= uint64(len(m.segs)) || m.segs[idx] == nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrUnmapped, a)
	}
	s := m.segs[idx]
	if s.closed != nil {
		return nil, 0, fmt.Errorf("%w: %v", s.closed, a)
	}
	off := uint64(a) & offMask
	if off > s.Size || n > s.Size-off {
		return nil, 0, fmt.Errorf("%w: %d bytes at %v in %s range of %d bytes", ErrOutOfRange, n, a, s.Kind, s.Size)
	}
	if uint64(a)&(align-1) != 0 {
		return nil, 0, fmt.Errorf("%w: %d-byte access at %v", ErrMisaligned, n, a)
	}
	return s, off, nil
}

// Bytes returns the n bytes of the visible image at a, which must be a
// multiple of align (a power of two), and whether they lie in PM. The slice
// aliases the image: writes through it are stores that no backend sees, so
// executors use it only to carry out a verb they report.
func (m *Memory) Bytes(a Addr, n, align uint64) (b []byte, persistent bool, err error) {
	b, k, err := m.Access(a, n, align)
	return b, err == nil && k == PMem, err
}

// Access is Bytes that returns the kind of memory the bytes lie in.
func (m *Memory) Access(a Addr, n, align uint64) (b []byte, k Kind, err error) {
	idx, off := uint64(a)>>OffsetBits, uint64(a)&offMask
	if idx < uint64(len(m.segs)) {
		if s := m.segs[idx]; s != nil && off <= s.Size && n <= s.Size-off && uint64(a)&(align-1) == 0 {
			return s.data[off : off+n : off+n], s.Kind, nil
		}
	}
	_, _, err = m.locate(a, n, align)
	return nil, 0, err
}

// Load reads a naturally aligned value of size 1, 2, 4 or 8 bytes at a.
func (m *Memory) Load(a Addr, size uint64) (uint64, error) {
	if !validSize(size) {
		return 0, fmt.Errorf("%w: %d-byte value", ErrBadSize, size)
	}
	b, _, err := m.Bytes(a, size, size)
	if err != nil {
		return 0, err
	}
	return getLE(b), nil
}

// Store writes a naturally aligned value of size 1, 2, 4 or 8 bytes at a.
// It changes only the visible image; see Machine.CopyIn for host writes that
// a backend must see.
func (m *Memory) Store(a Addr, size, v uint64) error {
	if !validSize(size) {
		return fmt.Errorf("%w: %d-byte value", ErrBadSize, size)
	}
	b, _, err := m.Bytes(a, size, size)
	if err != nil {
		return err
	}
	PutLE(b, v)
	return nil
}

// Read copies len(buf) bytes at a into buf.
func (m *Memory) Read(a Addr, buf []byte) error {
	b, _, err := m.Bytes(a, uint64(len(buf)), 1)
	if err != nil {
		return err
	}
	copy(buf, b)
	return nil
}

func validSize(n uint64) bool { return n == 1 || n == 2 || n == 4 || n == 8 }

func getLE(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 8:
		return binary.LittleEndian.Uint64(b)
	}
	panic(fmt.Sprintf("pm: value size %d", len(b)))
}

// GetLE decodes a little-endian value of len(b) = 1, 2, 4 or 8 bytes. Other
// lengths are a programming error and panic.
func GetLE(b []byte) uint64 { return getLE(b) }

// PutLE encodes v little-endian into len(b) = 1, 2, 4 or 8 bytes. Other
// lengths are a programming error and panic.
func PutLE(b []byte, v uint64) {
	switch len(b) {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(b, v)
	default:
		panic(fmt.Sprintf("pm: value size %d", len(b)))
	}
}
