package txn

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// Limits of a conventional log.
const (
	MaxParts   = 1 << 16 // partitions of a conventional log
	MaxPartCap = 1 << 31 // stream bytes of one partition
)

// ConvLog is a conventional partitioned log (GPM's gpmlog_create_conv): N
// partitions, each a contiguous byte stream that agents append to under a
// spin lock (an atomic compare-and-swap on a volatile word). Because several
// agents write one partition, an insert makes its entry and the new tail
// durable (Exec.Durable) before it releases the lock, so a later holder's
// persists never overtake it.
//
// Layout of its region: the header line; one 8-byte control word per
// partition (the partition's commit point, see Log), rounded up to a line;
// then each partition's stream, its capacity rounded up to a line. The locks
// live in device memory allocated by Create or Open; Close frees them.
type ConvLog struct {
	core
	r     pm.Range
	ctrl0 pm.Addr
	data0 pm.Addr
	locks pm.Addr
}

func convLayout(parts int, capacity uint64) (ctrlOff, dataOff, size uint64) {
	ctrlOff = Line
	dataOff = ctrlOff + roundUp(uint64(parts)*8, Line)
	return ctrlOff, dataOff, dataOff + uint64(parts)*capacity
}

// CreateConv creates a conventional log in a new PM region called name with
// parts partitions of capacity stream bytes each (rounded up to 128). The
// empty log is durable when it returns.
func CreateConv(m *pm.Machine, name string, parts int, capacity uint64) (*ConvLog, error) {
	if parts < 1 || parts > MaxParts {
		return nil, fmt.Errorf("%w: %d partitions (want 1..%d)", ErrBadArg, parts, MaxParts)
	}
	if capacity < 16 || capacity > MaxPartCap {
		return nil, fmt.Errorf("%w: partition capacity %d (want 16..%d)", ErrBadArg, capacity, MaxPartCap)
	}
	capacity = roundUp(capacity, Line)
	ctrlOff, dataOff, size := convLayout(parts, capacity)
	r, err := createRegion(m, name, size, encodeHeader(magicConv, uint64(parts), capacity, ctrlOff, dataOff, size))
	if err != nil {
		return nil, err
	}
	return newConv(m, r, parts, capacity, ctrlOff, dataOff)
}

// OpenConv opens the conventional log in region name, checking its header.
func OpenConv(m *pm.Machine, name string) (*ConvLog, error) {
	r, f, err := openRegion(m, name, magicConv, 5)
	if err != nil {
		return nil, err
	}
	parts, capacity := f[0], f[1]
	if parts < 1 || parts > MaxParts || capacity < Line || capacity > MaxPartCap || capacity%Line != 0 {
		return nil, fmt.Errorf("%w: region %q: %d partitions of %d bytes", ErrCorrupt, name, parts, capacity)
	}
	ctrlOff, dataOff, size := convLayout(int(parts), capacity)
	if f[2] != ctrlOff || f[3] != dataOff || f[4] != size || size > r.Size {
		return nil, fmt.Errorf("%w: region %q: layout %v disagrees with its geometry or the region's %d bytes", ErrCorrupt, name, f, r.Size)
	}
	return newConv(m, r, int(parts), capacity, ctrlOff, dataOff)
}

func newConv(m *pm.Machine, r pm.Range, parts int, capacity, ctrlOff, dataOff uint64) (*ConvLog, error) {
	locks, err := m.Alloc(pm.DeviceMem, uint64(parts)*8)
	if err != nil {
		return nil, err
	}
	l := &ConvLog{r: r, ctrl0: r.Base.Add(ctrlOff), data0: r.Base.Add(dataOff), locks: locks}
	l.core = core{kind: 'C', unit: 8, parts: parts, cap: capacity, l: l}
	return l, nil
}

// Close frees the log's volatile locks. The handle is unusable afterwards.
func (l *ConvLog) Close(m *pm.Machine) error { return m.Free(l.locks) }

// Region returns the log's PM region.
func (l *ConvLog) Region() pm.Range { return l.r }

func (l *ConvLog) ctrlAddr(part int) pm.Addr { return l.ctrl0.Add(uint64(part) * 8) }

func (l *ConvLog) streamAddr(part int, pos uint64) pm.Addr {
	return l.data0.Add(uint64(part)*l.cap + pos)
}

func (l *ConvLog) write(x Exec, part int, pos uint64, b []byte) {
	x.StoreBytes(l.streamAddr(part, pos), b)
}

func (l *ConvLog) read(x Exec, part int, pos uint64, b []byte) {
	if len(b) > 0 {
		x.LoadBytes(l.streamAddr(part, pos), b)
	}
}

func (l *ConvLog) lock(x Exec, part int) {
	a := l.locks.Add(uint64(part) * 8)
	for x.CAS64(a, 0, 1) != 0 {
		x.Pause()
	}
}

func (l *ConvLog) unlock(x Exec, part int) { x.CAS64(l.locks.Add(uint64(part)*8), 1, 0) }

// Parts returns the number of partitions.
func (l *ConvLog) Parts() int { return l.parts }

// Capacity returns the stream bytes of one partition.
func (l *ConvLog) Capacity() int { return int(l.cap) }

// Part returns the agent's id modulo the number of partitions.
func (l *ConvLog) Part(x Exec) (int, error) {
	if err := checkExec(x); err != nil {
		return 0, err
	}
	return x.Who().ID % l.parts, nil
}

// Insert appends data to partition part under its lock; the entry and the
// new tail are durable when it returns.
func (l *ConvLog) Insert(x Exec, part int, data []byte) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	l.lock(x, part)
	defer l.unlock(x, part)
	if err := l.insert(x, part, data); err != nil {
		return err
	}
	x.Durable()
	return execErr(x)
}

// InsertMany appends the entries to partition part as Insert appends
// each, in order, but with one write of their bytes and one store of the
// control word, which makes all of them live at once (a crash before it
// leaves none). Tx.AddMany uses it.
func (l *ConvLog) InsertMany(x Exec, part int, data [][]byte) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	l.lock(x, part)
	defer l.unlock(x, part)
	if err := l.insertMany(x, part, data); err != nil {
		return err
	}
	x.Durable()
	return execErr(x)
}

// Read returns the newest entry of partition part.
func (l *ConvLog) Read(x Exec, part int) ([]byte, error) {
	if err := l.checkPart(x, part); err != nil {
		return nil, err
	}
	l.lock(x, part)
	defer l.unlock(x, part)
	p, _, _, err := l.last(x, part)
	return p, err
}

// Remove drops the newest entry of partition part, durably.
func (l *ConvLog) Remove(x Exec, part int) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	l.lock(x, part)
	defer l.unlock(x, part)
	if err := l.remove(x, part); err != nil {
		return err
	}
	x.Durable()
	return execErr(x)
}

// Clear bumps partition part's generation: its control word is the single
// commit point, and every entry is discarded once it is durable.
func (l *ConvLog) Clear(x Exec, part int) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	l.lock(x, part)
	defer l.unlock(x, part)
	return l.clear(x, part)
}

// Size returns the stream bytes partition part has in use.
func (l *ConvLog) Size(x Exec, part int) (int, error) {
	if err := l.checkPart(x, part); err != nil {
		return 0, err
	}
	_, tail, err := l.ctrl(x, part)
	return int(tail), err
}

// Entries returns the entries of partition part, oldest first.
func (l *ConvLog) Entries(x Exec, part int) ([][]byte, error) {
	if err := l.checkPart(x, part); err != nil {
		return nil, err
	}
	l.lock(x, part)
	defer l.unlock(x, part)
	return l.entries(x, part)
}

// Check verifies every partition without taking the locks: run it when no
// agent is writing.
func (l *ConvLog) Check(x Exec) error { return l.check(x) }
