package txn

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// HCL geometry.
const (
	// Lanes is the number of slots striped across one line: 32 lanes of
	// 4 bytes fill 128 bytes.
	Lanes = Line / 4
	// MaxHCLSlots bounds blocks × warps per block × 32.
	MaxHCLSlots = 1 << 24
	// MaxHCLCap bounds the stream bytes of one slot.
	MaxHCLCap = 1 << 26
)

// HCL is GPM's hierarchical coalesced log (gpmlog_create_hcl). Every thread
// of a launch geometry owns one slot, found from its block, its warp in the
// block and its lane; no lock is taken. The log's data is a run of 128-byte
// lines per warp. Lane i of a warp writes the 4-byte word at offset 4·i of a
// line, so when the 32 lanes of a warp insert together, each 4-byte stripe of
// their entries fills one line and the hardware coalesces it into one write;
// the next 4 bytes of an entry go to the same lane offset of the warp's next
// line. Each slot's control word (generation and tail, the slot's commit
// point, see Log) is its per-thread tail: the sentinel recovery reads.
//
// An insert stores the entry's stripes, orders them (Exec.Order), then
// stores the slot's control word and orders it before the thread's later
// persists. A slot must be written by one agent at a time.
//
// Layout of its region: the header line; one control word per slot, rounded
// up to a line; then, per warp, rows lines (a slot holds rows × 4 bytes).
type HCL struct {
	core
	r       pm.Range
	blocks  int
	threads int
	wpb     int
	rows    uint64
	ctrl0   pm.Addr
	data0   pm.Addr
}

func hclLayout(blocks, threads int, rows uint64) (slots int, ctrlOff, dataOff, size uint64) {
	wpb := (threads + Lanes - 1) / Lanes
	slots = blocks * wpb * Lanes
	ctrlOff = Line
	dataOff = ctrlOff + roundUp(uint64(slots)*8, Line)
	return slots, ctrlOff, dataOff, dataOff + uint64(blocks*wpb)*rows*Line
}

func checkHCLGeometry(blocks, threads int, capacity uint64) error {
	if blocks < 1 || threads < 1 || threads > 1<<12 || blocks > MaxHCLSlots {
		return fmt.Errorf("%w: HCL for %d blocks of %d threads", ErrBadArg, blocks, threads)
	}
	if wpb := (threads + Lanes - 1) / Lanes; blocks*wpb*Lanes > MaxHCLSlots {
		return fmt.Errorf("%w: HCL for %d blocks of %d threads: more than %d slots", ErrBadArg, blocks, threads, MaxHCLSlots)
	}
	if capacity < 12 || capacity > MaxHCLCap {
		return fmt.Errorf("%w: slot capacity %d (want 12..%d)", ErrBadArg, capacity, MaxHCLCap)
	}
	return nil
}

// CreateHCL creates an HCL log in a new PM region called name for a launch
// of blocks blocks of threads threads, each slot holding capacity stream
// bytes (rounded up to 4; a 4-byte entry takes 12). The empty log is durable
// when it returns.
func CreateHCL(m *pm.Machine, name string, blocks, threads int, capacity uint64) (*HCL, error) {
	if err := checkHCLGeometry(blocks, threads, capacity); err != nil {
		return nil, err
	}
	rows := roundUp(capacity, 4) / 4
	_, ctrlOff, dataOff, size := hclLayout(blocks, threads, rows)
	r, err := createRegion(m, name, size, encodeHeader(magicHCL, uint64(blocks), uint64(threads), rows, ctrlOff, dataOff, size))
	if err != nil {
		return nil, err
	}
	return newHCL(r, blocks, threads, rows, ctrlOff, dataOff), nil
}

// OpenHCL opens the HCL log in region name, checking its header.
func OpenHCL(m *pm.Machine, name string) (*HCL, error) {
	r, f, err := openRegion(m, name, magicHCL, 6)
	if err != nil {
		return nil, err
	}
	if f[0] > MaxHCLSlots || f[1] > 1<<12 || f[2] > MaxHCLCap/4 {
		return nil, fmt.Errorf("%w: region %q: HCL geometry %v", ErrCorrupt, name, f[:3])
	}
	blocks, threads, rows := int(f[0]), int(f[1]), f[2]
	if err := checkHCLGeometry(blocks, threads, rows*4); err != nil {
		return nil, fmt.Errorf("%w: region %q: %w", ErrCorrupt, name, err)
	}
	_, ctrlOff, dataOff, size := hclLayout(blocks, threads, rows)
	if f[3] != ctrlOff || f[4] != dataOff || f[5] != size || size > r.Size {
		return nil, fmt.Errorf("%w: region %q: layout %v disagrees with its geometry or the region's %d bytes", ErrCorrupt, name, f, r.Size)
	}
	return newHCL(r, blocks, threads, rows, ctrlOff, dataOff), nil
}

func newHCL(r pm.Range, blocks, threads int, rows, ctrlOff, dataOff uint64) *HCL {
	wpb := (threads + Lanes - 1) / Lanes
	l := &HCL{r: r, blocks: blocks, threads: threads, wpb: wpb, rows: rows, ctrl0: r.Base.Add(ctrlOff), data0: r.Base.Add(dataOff)}
	l.core = core{kind: 'H', unit: 4, parts: blocks * wpb * Lanes, cap: rows * 4, l: l}
	return l
}

// Region returns the log's PM region.
func (l *HCL) Region() pm.Range { return l.r }

// Geometry returns the launch shape the log was made for.
func (l *HCL) Geometry() (blocks, threads int) { return l.blocks, l.threads }

func (l *HCL) ctrlAddr(part int) pm.Addr { return l.ctrl0.Add(uint64(part) * 8) }

// WordAddr returns where the 4-byte word at stream offset pos (a multiple
// of 4) of slot part lives: line pos/4 of the slot's warp, at lane offset.
func (l *HCL) WordAddr(part int, pos uint64) pm.Addr {
	warp, lane := uint64(part/Lanes), uint64(part%Lanes)
	return l.data0.Add((warp*l.rows+pos/4)*Line + lane*4)
}

func (l *HCL) write(x Exec, part int, pos uint64, b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		x.Store32(l.WordAddr(part, pos+uint64(i)), le32(b[i:]))
	}
}

func (l *HCL) read(x Exec, part int, pos uint64, b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		v := x.Load32(l.WordAddr(part, pos+uint64(i)))
		b[i], b[i+1], b[i+2], b[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
}

// Parts returns the number of slots: blocks × warps per block × 32.
func (l *HCL) Parts() int { return l.parts }

// Capacity returns the stream bytes of one slot.
func (l *HCL) Capacity() int { return int(l.cap) }

// Slot returns the slot of the thread at (block, warp in block, lane).
func (l *HCL) Slot(block, warp, lane int) (int, error) {
	if block < 0 || block >= l.blocks || warp < 0 || warp >= l.wpb || lane < 0 || lane >= Lanes {
		return 0, fmt.Errorf("%w: block %d warp %d lane %d outside an HCL of %d blocks of %d warps", ErrBadArg, block, warp, lane, l.blocks, l.wpb)
	}
	return (block*l.wpb+warp)*Lanes + lane, nil
}

// Part returns the agent's own slot, from its block, warp and lane. The
// agent's warps must be 32 wide.
func (l *HCL) Part(x Exec) (int, error) {
	if err := checkExec(x); err != nil {
		return 0, err
	}
	w := x.Who()
	if w.WarpSize != Lanes {
		return 0, fmt.Errorf("%w: warp size %d, HCL stripes %d lanes", ErrBadArg, w.WarpSize, Lanes)
	}
	return l.Slot(w.Block, w.WarpInBlock, w.Lane)
}

// Insert appends data to slot part without a lock; the entry and the new
// tail are ordered before the agent's later persists (call Exec.Durable to
// wait for them).
func (l *HCL) Insert(x Exec, part int, data []byte) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	return l.insert(x, part, data)
}

// Read returns the newest entry of slot part.
func (l *HCL) Read(x Exec, part int) ([]byte, error) {
	if err := l.checkPart(x, part); err != nil {
		return nil, err
	}
	p, _, _, err := l.last(x, part)
	return p, err
}

// Remove drops the newest entry of slot part, ordered before the agent's
// later persists.
func (l *HCL) Remove(x Exec, part int) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	return l.remove(x, part)
}

// Clear bumps slot part's generation: its control word is the single commit
// point, and every entry of the slot is discarded once it is durable.
func (l *HCL) Clear(x Exec, part int) error {
	if err := l.checkPart(x, part); err != nil {
		return err
	}
	return l.clear(x, part)
}

// Size returns the stream bytes slot part has in use.
func (l *HCL) Size(x Exec, part int) (int, error) {
	if err := l.checkPart(x, part); err != nil {
		return 0, err
	}
	_, tail, err := l.ctrl(x, part)
	return int(tail), err
}

// Entries returns the entries of slot part, oldest first.
func (l *HCL) Entries(x Exec, part int) ([][]byte, error) {
	if err := l.checkPart(x, part); err != nil {
		return nil, err
	}
	return l.entries(x, part)
}

// Check verifies every slot.
func (l *HCL) Check(x Exec) error { return l.check(x) }
