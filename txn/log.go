package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
)

// Log is a persistent undo log of independent partitions (a conventional
// log's partitions or HCL's per-thread slots). Each partition is a stack of
// checksummed entries under one control word, its commit point: an aligned
// 8-byte word packing the partition's generation (high 32 bits) and tail
// (low 32 bits, the stream bytes in use). Insert writes the entry, orders
// it, then stores the control word with the new tail; Remove lowers the
// tail; Clear bumps the generation and zeroes the tail in one store, which
// commits (or discards) everything logged since the last Clear, because an
// entry's checksum covers the generation it was written under.
//
// A Log handle is immutable after Create or Open and may be shared by every
// thread and task of a machine; the partitions' contents follow the rules of
// each implementation (HCL slots belong to one thread each, conventional
// partitions are locked).
type Log interface {
	// Parts returns the number of partitions.
	Parts() int
	// Capacity returns the stream bytes of one partition; an entry of n
	// payload bytes takes n rounded up to 8 (conventional) or 4 (HCL),
	// plus 8.
	Capacity() int
	// Part returns the partition an agent uses by default.
	Part(x Exec) (int, error)
	// Insert appends an entry to partition part. Its bytes and the new
	// tail are ordered before the agent's later persists.
	Insert(x Exec, part int, data []byte) error
	// Read returns the newest entry of partition part (ErrEmpty if none).
	Read(x Exec, part int) ([]byte, error)
	// Remove drops the newest entry of partition part.
	Remove(x Exec, part int) error
	// Clear discards every entry of partition part by bumping its
	// generation (the commit point), durably.
	Clear(x Exec, part int) error
	// Size returns the stream bytes partition part has in use.
	Size(x Exec, part int) (int, error)
	// Entries returns the entries of partition part, oldest first.
	Entries(x Exec, part int) ([][]byte, error)
	// Check verifies the whole log: every control word within bounds and
	// every live entry's checksum. It reports every problem found, each
	// wrapping ErrCorrupt.
	Check(x Exec) error
}

// layout maps a partition's stream onto PM.
type layout interface {
	ctrlAddr(part int) pm.Addr
	write(x Exec, part int, pos uint64, b []byte)
	read(x Exec, part int, pos uint64, b []byte)
}

// core is the stream logic shared by both logs.
type core struct {
	kind  byte
	unit  uint64
	parts int
	cap   uint64
	l     layout
}

func checkExec(x Exec) error {
	if x == nil {
		return fmt.Errorf("%w: nil Exec", ErrBadArg)
	}
	return nil
}

func (c *core) checkPart(x Exec, part int) error {
	if err := checkExec(x); err != nil {
		return err
	}
	if part < 0 || part >= c.parts {
		return fmt.Errorf("%w: partition %d of %d", ErrBadArg, part, c.parts)
	}
	return nil
}

// ctrl reads and checks a control word.
func (c *core) ctrl(x Exec, part int) (gen uint32, tail uint64, err error) {
	w := x.Load64(c.l.ctrlAddr(part))
	if err := execErr(x); err != nil {
		return 0, 0, err
	}
	gen, tail = ctrlGen(w), uint64(ctrlTail(w))
	if tail > c.cap || tail%c.unit != 0 {
		return 0, 0, fmt.Errorf("%w: partition %d: tail %d (capacity %d, unit %d)", ErrCorrupt, part, tail, c.cap, c.unit)
	}
	return gen, tail, nil
}

func (c *core) insert(x Exec, part int, data []byte) error {
	gen, tail, err := c.ctrl(x, part)
	if err != nil {
		return err
	}
	size := entrySize(uint64(len(data)), c.unit)
	if uint64(len(data)) > maxEntry || tail+size > c.cap {
		return fmt.Errorf("%w: partition %d: %d-byte entry at %d, capacity %d", ErrFull, part, len(data), tail, c.cap)
	}
	c.l.write(x, part, tail, encodeEntry(c.kind, gen, uint32(part), uint32(tail), data, c.unit))
	x.Order()
	x.Store64(c.l.ctrlAddr(part), ctrlWord(gen, uint32(tail+size)))
	x.Order()
	return execErr(x)
}

// insertMany appends several entries with one write of their bytes and
// one store of the control word, which makes them live together.
func (c *core) insertMany(x Exec, part int, datas [][]byte) error {
	gen, tail, err := c.ctrl(x, part)
	if err != nil {
		return err
	}
	total := uint64(0)
	for _, d := range datas {
		if uint64(len(d)) > maxEntry {
			return fmt.Errorf("%w: partition %d: %d-byte entry", ErrFull, part, len(d))
		}
		total += entrySize(uint64(len(d)), c.unit)
	}
	if tail+total > c.cap {
		return fmt.Errorf("%w: partition %d: %d entries of %d bytes at %d, capacity %d", ErrFull, part, len(datas), total, tail, c.cap)
	}
	if len(datas) == 0 {
		return nil
	}
	buf := make([]byte, 0, total)
	pos := tail
	for _, d := range datas {
		buf = append(buf, encodeEntry(c.kind, gen, uint32(part), uint32(pos), d, c.unit)...)
		pos += entrySize(uint64(len(d)), c.unit)
	}
	c.l.write(x, part, tail, buf)
	x.Order()
	x.Store64(c.l.ctrlAddr(part), ctrlWord(gen, uint32(pos)))
	x.Order()
	return execErr(x)
}

// last decodes the newest entry.
func (c *core) last(x Exec, part int) (payload []byte, start uint64, gen uint32, err error) {
	gen, tail, err := c.ctrl(x, part)
	if err != nil {
		return nil, 0, 0, err
	}
	if tail == 0 {
		return nil, 0, gen, fmt.Errorf("%w: partition %d", ErrEmpty, part)
	}
	if tail < trailerSize {
		return nil, 0, 0, fmt.Errorf("%w: partition %d: tail %d", ErrCorrupt, part, tail)
	}
	var tr [trailerSize]byte
	c.l.read(x, part, tail-trailerSize, tr[:])
	start, n, err := decodeTrailer(tr[:], tail, c.unit)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("partition %d: %w", part, err)
	}
	buf := make([]byte, roundUp(n, c.unit))
	c.l.read(x, part, start, buf)
	if err := execErr(x); err != nil {
		return nil, 0, 0, err
	}
	if err := verifyEntry(c.kind, gen, uint32(part), uint32(start), buf[:n], tr[:]); err != nil {
		return nil, 0, 0, err
	}
	return buf[:n], start, gen, nil
}

func (c *core) remove(x Exec, part int) error {
	_, start, gen, err := c.last(x, part)
	if err != nil {
		return err
	}
	x.Store64(c.l.ctrlAddr(part), ctrlWord(gen, uint32(start)))
	x.Order()
	return execErr(x)
}

func (c *core) clear(x Exec, part int) error {
	w := x.Load64(c.l.ctrlAddr(part))
	x.Store64(c.l.ctrlAddr(part), ctrlWord(ctrlGen(w)+1, 0))
	x.Durable()
	return execErr(x)
}

func (c *core) entries(x Exec, part int) ([][]byte, error) {
	gen, tail, err := c.ctrl(x, part)
	if err != nil {
		return nil, err
	}
	stream := make([]byte, tail)
	c.l.read(x, part, 0, stream)
	if err := execErr(x); err != nil {
		return nil, err
	}
	es, err := DecodeStream(c.kind, gen, uint32(part), stream, int(c.unit))
	if err != nil {
		return nil, fmt.Errorf("partition %d: %w", part, err)
	}
	slices.Reverse(es)
	return es, nil
}

// maxReported bounds the problems a Check reports.
const maxReported = 64

func (c *core) check(x Exec) error {
	if err := checkExec(x); err != nil {
		return err
	}
	var errs []error
	for p := 0; p < c.parts && len(errs) < maxReported; p++ {
		if _, err := c.entries(x, p); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readHeader reads the first line of a region.
func readHeader(m *pm.Machine, r pm.Range) ([]byte, error) {
	if r.Size < Line {
		return nil, fmt.Errorf("%w: region %q of %d bytes has no header", ErrCorrupt, r.Name, r.Size)
	}
	b := make([]byte, Line)
	if err := m.CopyOut(r.Base, b); err != nil {
		return nil, err
	}
	return b, nil
}

// createRegion makes a region of size bytes and writes its header.
func createRegion(m *pm.Machine, name string, size uint64, hdr []byte) (pm.Range, error) {
	if m == nil {
		return pm.Range{}, fmt.Errorf("%w: nil machine", ErrBadArg)
	}
	if size > pm.MaxRangeSize {
		return pm.Range{}, fmt.Errorf("%w: %d bytes needed, a region holds %d", ErrBadArg, size, uint64(pm.MaxRangeSize))
	}
	r, err := m.CreateRegion(name, size)
	if err != nil {
		return pm.Range{}, err
	}
	if err := m.CopyIn(r.Base, hdr); err != nil {
		return pm.Range{}, err
	}
	return r, nil
}

func openRegion(m *pm.Machine, name, magic string, n int) (pm.Range, []uint64, error) {
	if m == nil {
		return pm.Range{}, nil, fmt.Errorf("%w: nil machine", ErrBadArg)
	}
	r, err := m.OpenRegion(name)
	if err != nil {
		return pm.Range{}, nil, err
	}
	b, err := readHeader(m, r)
	if err != nil {
		return pm.Range{}, nil, err
	}
	f, err := decodeHeader(b, magic, n)
	if err != nil {
		return pm.Range{}, nil, fmt.Errorf("region %q: %w", name, err)
	}
	return r, f, nil
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
