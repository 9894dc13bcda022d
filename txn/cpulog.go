package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/scopedpm/scopedpm/internal/seal"
	"github.com/scopedpm/scopedpm/pm"
)

// CPULog is an undo log for CPU tasks in the shape COSPlay's tasks have
// (COSPlay §3, Fig. 2 and 4): a transaction writes every undo entry of a
// batch and reaches one ordering point, however many entries the batch
// holds, instead of one or two per entry; updates in place follow.
//
// Its partitions are independent; each belongs to one agent at a time (a
// coroutine task's window context) and keeps no lock. A partition is a
// control word, on a line of its own, holding the partition's generation
// (the commit point: Clear bumps it, durably), and a stream of entries.
// An entry is an 8-byte head (payload length plus one, so that a zeroed
// head is none; CRC-32C) and its payload,
// padded to 8 bytes; its checksum covers the log kind, the generation, the
// partition, the entry's position, the length and the payload. A batch
// (Insert, InsertMany) starts on a CPU line boundary (CPULine) after the
// partition's previous batch, writes its entries and orders them (one
// Exec.Order): nothing records where the stream ends.
//
// Recovery scans the whole stream for entries that verify under the
// current generation (from a batch start, entry after entry; past one that
// does not verify, at the next CPU line). An entry that does not verify
// belongs to a batch whose ordering point had not completed at the crash,
// so none of the updates it covers can have persisted (they come after
// that ordering point), and ignoring it is safe; an entry of an older
// generation was committed. Because no batch depends on another's tail,
// batches written in different StrandWeaver strands stay independent: a
// batch of one strand may persist before an earlier one of another.
//
// The stream's volatile tail (where the next batch goes) lives in the
// handle, rebuilt by a scan at OpenCPU: a partition is used by one agent
// at a time, and the handle by one goroutine at a time (a coroutine run),
// unlike ConvLog's.
type CPULog struct {
	r     pm.Range
	parts int
	cap   uint64
	ctrl0 pm.Addr
	data0 pm.Addr
	tails []uint64
}

// magicCPU is CPULog's region magic; cpuKind is its entries' kind byte.
const (
	magicCPU       = "TXNCPUL\x00"
	cpuKind   byte = 'B'
	cpuHead        = 8 // an entry's head: length and checksum
	cpuUnit        = 8
	cpuStride      = Line // bytes between control words
)

func cpuLayout(parts int, capacity uint64) (ctrlOff, dataOff, size uint64) {
	ctrlOff = Line
	dataOff = ctrlOff + uint64(parts)*cpuStride
	return ctrlOff, dataOff, dataOff + uint64(parts)*capacity
}

// CreateCPU creates a CPU log in a new PM region called name with parts
// partitions of capacity stream bytes each (rounded up to 128). The empty
// log is durable when it returns.
func CreateCPU(m *pm.Machine, name string, parts int, capacity uint64) (*CPULog, error) {
	if parts < 1 || parts > MaxParts {
		return nil, fmt.Errorf("%w: %d partitions (want 1..%d)", ErrBadArg, parts, MaxParts)
	}
	if capacity < 16 || capacity > MaxPartCap {
		return nil, fmt.Errorf("%w: partition capacity %d (want 16..%d)", ErrBadArg, capacity, MaxPartCap)
	}
	capacity = roundUp(capacity, Line)
	ctrlOff, dataOff, size := cpuLayout(parts, capacity)
	r, err := createRegion(m, name, size, encodeHeader(magicCPU, uint64(parts), capacity, ctrlOff, dataOff, size))
	if err != nil {
		return nil, err
	}
	return newCPULog(r, parts, capacity, ctrlOff, dataOff), nil
}

// OpenCPU opens the CPU log in region name, checking its header, and
// finds each partition's tail by a scan of its stream.
func OpenCPU(m *pm.Machine, name string) (*CPULog, error) {
	r, f, err := openRegion(m, name, magicCPU, 5)
	if err != nil {
		return nil, err
	}
	parts, capacity := f[0], f[1]
	if parts < 1 || parts > MaxParts || capacity < Line || capacity > MaxPartCap || capacity%Line != 0 {
		return nil, fmt.Errorf("%w: region %q: %d partitions of %d bytes", ErrCorrupt, name, parts, capacity)
	}
	ctrlOff, dataOff, size := cpuLayout(int(parts), capacity)
	if f[2] != ctrlOff || f[3] != dataOff || f[4] != size || size > r.Size {
		return nil, fmt.Errorf("%w: region %q: layout %v disagrees with its geometry or the region's %d bytes", ErrCorrupt, name, f, r.Size)
	}
	l := newCPULog(r, int(parts), capacity, ctrlOff, dataOff)
	h := Host(m)
	for p := range l.parts {
		_, end := l.scan(h, p)
		l.tails[p] = end
	}
	if err := h.Err(); err != nil {
		return nil, err
	}
	return l, nil
}

func newCPULog(r pm.Range, parts int, capacity, ctrlOff, dataOff uint64) *CPULog {
	return &CPULog{r: r, parts: parts, cap: capacity, ctrl0: r.Base.Add(ctrlOff), data0: r.Base.Add(dataOff), tails: make([]uint64, parts)}
}

// Region returns the log's PM region.
func (l *CPULog) Region() pm.Range { return l.r }

// Stream returns the PM range of partition part's entries (not its
// control word).
func (l *CPULog) Stream(part int) pm.Range {
	return pm.Range{Name: l.r.Name, Base: l.data0.Add(uint64(part) * l.cap), Size: l.cap, Kind: l.r.Kind}
}

func (l *CPULog) ctrlAddr(part int) pm.Addr { return l.ctrl0.Add(uint64(part) * cpuStride) }

// Parts returns the number of partitions.
func (l *CPULog) Parts() int { return l.parts }

// Capacity returns the stream bytes of one partition.
func (l *CPULog) Capacity() int { return int(l.cap) }

// Part returns the agent's id modulo the number of partitions.
func (l *CPULog) Part(x Exec) (int, error) {
	if err := checkExec(x); err != nil {
		return 0, err
	}
	return x.Who().ID % l.parts, nil
}

func (l *CPULog) checkPart(x Exec, part int) error {
	if err := checkExec(x); err != nil {
		return err
	}
	if part < 0 || part >= l.parts {
		return fmt.Errorf("%w: partition %d of %d", ErrBadArg, part, l.parts)
	}
	return nil
}

// gen reads partition part's generation.
func (l *CPULog) gen(x Exec, part int) uint32 { return uint32(x.Load64(l.ctrlAddr(part))) }

func cpuEntrySize(n uint64) uint64 { return cpuHead + roundUp(n, cpuUnit) }

// Insert appends data to partition part as a batch of one entry (see
// InsertMany).
func (l *CPULog) Insert(x Exec, part int, data []byte) error {
	return l.InsertMany(x, part, [][]byte{data})
}

// InsertMany appends the entries to partition part as one batch: their
// bytes, then one ordering point (Exec.Order), which orders all of them
// before the agent's later persists.
func (l *CPULog) InsertMany(x Exec, part int, data [][]byte) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	gen := l.gen(x, part)
	if err := execErr(x); err != nil {
		return err
	}
	start := roundUp(l.tails[part], CPULine)
	total := uint64(0)
	for _, d := range data {
		if uint64(len(d)) > maxEntry {
			return fmt.Errorf("%w: partition %d: %d-byte entry", ErrFull, part, len(d))
		}
		total += cpuEntrySize(uint64(len(d)))
	}
	if start+total > l.cap {
		return fmt.Errorf("%w: partition %d: %d entries of %d bytes at %d, capacity %d", ErrFull, part, len(data), total, start, l.cap)
	}
	buf := make([]byte, 0, total)
	pos := start
	for _, d := range data {
		e := make([]byte, cpuEntrySize(uint64(len(d))))
		binary.LittleEndian.PutUint32(e, uint32(len(d))+1)
		binary.LittleEndian.PutUint32(e[4:], entryCRC(cpuKind, gen, uint32(part), uint32(pos), d))
		copy(e[cpuHead:], d)
		buf = append(buf, e...)
		pos += uint64(len(e))
	}
	x.StoreBytes(l.data0.Add(uint64(part)*l.cap+start), buf)
	x.Order()
	if err := execErr(x); err != nil {
		return err
	}
	l.tails[part] = pos
	return nil
}

// scanned is an entry a scan found: its payload and position.
type scanned struct {
	p   []byte
	pos uint64
}

// scan reads partition part's stream and returns its live entries, oldest
// first, and the end of the last one.
func (l *CPULog) scan(x Exec, part int) ([]scanned, uint64) {
	gen := l.gen(x, part)
	s := make([]byte, l.cap)
	x.LoadBytes(l.data0.Add(uint64(part)*l.cap), s)
	var out []scanned
	end := uint64(0)
	for pos := uint64(0); pos+cpuHead <= l.cap; {
		n := uint64(binary.LittleEndian.Uint32(s[pos:])) - 1 // wraps for a zero head
		size := cpuEntrySize(n)
		if n <= maxEntry && pos+size <= l.cap {
			p := s[pos+cpuHead : pos+cpuHead+n]
			if binary.LittleEndian.Uint32(s[pos+4:]) == entryCRC(cpuKind, gen, uint32(part), uint32(pos), p) {
				out = append(out, scanned{p, pos})
				pos += size
				end = pos
				continue
			}
		}
		pos = roundUp(pos+1, CPULine)
	}
	return out, end
}

// Read returns the newest entry of partition part.
func (l *CPULog) Read(x Exec, part int) ([]byte, error) {
	if err := l.checkPart(x, part); err != nil {
		return nil, err
	}
	es, _ := l.scan(x, part)
	if err := execErr(x); err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, fmt.Errorf("%w: partition %d", ErrEmpty, part)
	}
	return es[len(es)-1].p, nil
}

// Remove drops the newest entry of partition part, durably: its head is
// zeroed.
func (l *CPULog) Remove(x Exec, part int) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	es, _ := l.scan(x, part)
	if err := execErr(x); err != nil {
		return err
	}
	if len(es) == 0 {
		return fmt.Errorf("%w: partition %d", ErrEmpty, part)
	}
	last := es[len(es)-1]
	x.Store64(l.data0.Add(uint64(part)*l.cap+last.pos), 0)
	x.Durable()
	if err := execErr(x); err != nil {
		return err
	}
	l.tails[part] = 0
	if len(es) > 1 {
		prev := es[len(es)-2]
		l.tails[part] = prev.pos + cpuEntrySize(uint64(len(prev.p)))
	}
	return nil
}

// Clear bumps partition part's generation, durably: the control word is
// the single commit point, and every entry is discarded once it is
// durable.
func (l *CPULog) Clear(x Exec, part int) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	a := l.ctrlAddr(part)
	x.Store64(a, uint64(uint32(x.Load64(a))+1))
	x.Durable()
	if err := execErr(x); err != nil {
		return err
	}
	l.tails[part] = 0
	return nil
}

// Size returns the stream bytes partition part has in use since its last
// Clear, as this handle knows them (a scan at OpenCPU after a crash).
func (l *CPULog) Size(x Exec, part int) (int, error) {
	if err := l.checkPart(x, part); err != nil {
		return 0, err
	}
	return int(l.tails[part]), nil
}

// Entries returns the live entries of partition part, oldest first.
func (l *CPULog) Entries(x Exec, part int) ([][]byte, error) {
	if err := l.checkPart(x, part); err != nil {
		return nil, err
	}
	es, _ := l.scan(x, part)
	if err := execErr(x); err != nil {
		return nil, err
	}
	out := make([][]byte, len(es))
	for i, e := range es {
		out[i] = e.p
	}
	return out, nil
}

// Check verifies the log's header. Its partitions cannot be corrupt in
// a way recovery would trust: an entry that does not verify is not live
// (see CPULog), and every generation is valid.
func (l *CPULog) Check(x Exec) error {
	if err := checkExec(x); err != nil {
		return err
	}
	h := make([]byte, Line)
	x.LoadBytes(l.r.Base, h)
	if err := execErr(x); err != nil {
		return err
	}
	if _, err := seal.Open(h, Line, magicCPU); err != nil {
		return fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	return nil
}

var _ Log = (*CPULog)(nil)
