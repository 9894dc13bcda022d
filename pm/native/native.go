//go:build unix

package native

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/scopedpm/scopedpm/pm"
)

// Mode is a durability mode.
type Mode uint8

// Durability modes.
const (
	ModeAuto         Mode = iota // dax where available, else msync
	ModeMsync                    // msync(MS_SYNC) of dirty pages per ordering point
	ModeDAX                      // MAP_SYNC mapping, CLWB/CLFLUSHOPT + SFENCE
	ModeUnsafeNoSync             // no syncs, no ordering: measurement only
)

var modeNames = [...]string{"auto", "msync", "dax", "unsafe-nosync"}

// String returns "auto", "msync", "dax" or "unsafe-nosync".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode returns the mode named s (as printed by String).
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown mode %q", ErrUnsupported, s)
}

// DefaultMaxPending is the default Options.MaxPending.
const DefaultMaxPending = 1 << 20

// Options configure Open.
type Options struct {
	// Mode is the durability mode; ModeAuto picks dax where it works and
	// msync otherwise.
	Mode Mode
	// GPU is the GPU shape reported to the executors (pm.DefaultGPU if
	// zero).
	GPU pm.GPULimits
	// MaxPending bounds the persists logged before a flush mid-launch
	// (DefaultMaxPending if zero).
	MaxPending int
	// Journal keeps what PowerCut needs (test use: it grows with every
	// sync).
	Journal bool
	// Create makes the directory if it does not exist.
	Create bool
}

// Stats are the backend's counts since Open.
type Stats struct {
	Persists  uint64 // persist records logged (8-byte words or parts of them)
	Epochs    uint64 // non-empty epochs flushed
	Syncs     uint64 // msync calls, or CLWB+SFENCE groups in dax mode
	SyncBytes uint64 // bytes of the ranges synced (page-rounded for msync)
	Flushes   uint64 // log flushes
}

const fileExt = ".pmr"

type region struct {
	name     string
	base     pm.Addr
	size     uint64
	f        *os.File
	mapping  []byte // the whole file
	data     []byte // mapping[HeaderSize:]
	shadow   []byte // the visible image; aliases data in unsafe-nosync mode
	lo, hi   uint64 // dirty byte range of the current sync group (lo < hi)
	inDirty  bool
	fileName string
	epochs   []uint32 // per 8-byte word: epoch of its last pending persist (see Backend.epochBase)
}

// entry is one logged persist: part of one aligned 8-byte word.
type entry struct {
	epoch uint64
	addr  pm.Addr
	size  uint8
	b     [8]byte
}

type agentState struct {
	ep, lp uint64 // epoch of the next persist (lower bound); highest epoch persisted
}

// Backend is the native backend. Create it with Open.
type Backend struct {
	dir   string
	opts  Options
	mode  Mode
	cpu   cpuFeatures
	lock  *os.File
	mem   *pm.Memory
	regs  []*region // sorted by name
	byIdx []*region // by range index (Addr >> pm.OffsetBits)

	log       []entry
	epochBase uint64             // region.epochs hold epoch-epochBase; valid if > flushed-epochBase
	rel       map[pm.Addr]uint64 // epoch of the last pending release of each flag
	gpu, cpu2 []agentState
	flushed   uint64 // every epoch <= flushed is durable
	gmax      uint64 // highest epoch logged

	touched []*region
	counts  []int
	sorted  []entry
	stats   Stats
	jrn     *journal
	err     error
	closed  bool
}

// Open opens the region files of dir with the given options.
func Open(dir string, opts Options) (*Backend, error) {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.GPU == (pm.GPULimits{}) {
		opts.GPU = pm.DefaultGPU()
	}
	if opts.Create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIO, err)
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrIO, dir)
	}
	b := &Backend{dir: dir, opts: opts, cpu: detectCPU(), rel: map[pm.Addr]uint64{}}
	mode, err := b.pickMode(opts.Mode)
	if err != nil {
		return nil, err
	}
	b.mode = mode
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, dir, err)
	}
	b.lock = lock
	if err := b.load(); err != nil {
		b.unmapAll()
		b.lock.Close()
		return nil, err
	}
	return b, nil
}

// DAXSupport reports whether dax mode works for files in dir: the CPU has
// CLWB or CLFLUSHOPT and a file there maps with MAP_SHARED_VALIDATE|MAP_SYNC.
// The error says why not.
func DAXSupport(dir string) error {
	return daxSupport(dir, detectCPU())
}

func daxSupport(dir string, f cpuFeatures) error {
	if !f.has() {
		return fmt.Errorf("%w: dax: CPUID reports neither CLWB nor CLFLUSHOPT", ErrUnsupported)
	}
	if mapSyncFlags == 0 {
		return fmt.Errorf("%w: dax: no MAP_SYNC on this system", ErrUnsupported)
	}
	p, err := os.CreateTemp(dir, ".daxprobe-*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	defer os.Remove(p.Name())
	defer p.Close()
	if err := p.Truncate(int64(os.Getpagesize())); err != nil {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	m, err := unix.Mmap(int(p.Fd()), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, mapSyncFlags)
	if err != nil {
		return fmt.Errorf("%w: dax: MAP_SYNC mapping refused in %s: %w", ErrUnsupported, dir, err)
	}
	unix.Munmap(m)
	return nil
}

func (b *Backend) pickMode(m Mode) (Mode, error) {
	switch m {
	case ModeAuto:
		if daxSupport(b.dir, b.cpu) == nil {
			return ModeDAX, nil
		}
		return ModeMsync, nil
	case ModeDAX:
		if err := daxSupport(b.dir, b.cpu); err != nil {
			return 0, err
		}
		return ModeDAX, nil
	case ModeMsync, ModeUnsafeNoSync:
		return m, nil
	}
	return 0, fmt.Errorf("%w: %v", ErrUnsupported, m)
}

// load maps every region file of the directory.
func (b *Backend) load() error {
	ents, err := os.ReadDir(b.dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, fileExt+".tmp"):
			// A region whose creation did not finish: never acknowledged.
			if err := os.Remove(filepath.Join(b.dir, n)); err != nil {
				return fmt.Errorf("%w: %w", ErrIO, err)
			}
		case strings.HasSuffix(n, fileExt) && !e.IsDir():
			r, err := b.openRegion(n)
			if err != nil {
				return err
			}
			b.regs = append(b.regs, r)
		}
	}
	slices.SortFunc(b.regs, func(x, y *region) int { return strings.Compare(x.name, y.name) })
	for _, r := range b.regs {
		b.setIdx(r)
	}
	return nil
}

func (b *Backend) mapFlags() int {
	if b.mode == ModeDAX {
		return mapSyncFlags
	}
	return unix.MAP_SHARED
}

func (b *Backend) openRegion(fileName string) (*region, error) {
	path := filepath.Join(b.dir, fileName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	r, err := b.mapRegion(f, fileName)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("region file %s: %w", path, err)
	}
	return r, nil
}

func (b *Backend) mapRegion(f *os.File, fileName string) (*region, error) {
	hdr := make([]byte, HeaderSize)
	n, err := f.ReadAt(hdr, 0)
	if err != nil && n < HeaderSize {
		if !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: read header: %w", ErrIO, err)
		}
		_, err := DecodeHeader(hdr[:n]) // a short file: truncated or foreign
		return nil, err
	}
	h, err := DecodeHeader(hdr)
	if err != nil {
		return nil, err
	}
	if want := strings.TrimSuffix(fileName, fileExt); h.Name != want {
		return nil, fmt.Errorf("%w: holds region %q, file name says %q", pm.ErrCorrupt, h.Name, want)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	if uint64(st.Size()) != HeaderSize+h.Size {
		return nil, fmt.Errorf("%w: %w: file has %d bytes, header says %d+%d", pm.ErrCorrupt, ErrSizeMismatch, st.Size(), HeaderSize, h.Size)
	}
	if HeaderSize+h.Size > uint64(int(^uint(0)>>1)) {
		return nil, fmt.Errorf("%w: %w: region of %d bytes does not fit the address space", pm.ErrCorrupt, ErrSizeMismatch, h.Size)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(HeaderSize+h.Size), unix.PROT_READ|unix.PROT_WRITE, b.mapFlags())
	if err != nil {
		return nil, fmt.Errorf("%w: mmap: %w", ErrIO, err)
	}
	r := &region{name: h.Name, base: h.Base, size: h.Size, f: f, mapping: m, data: m[HeaderSize:], fileName: fileName}
	if b.mode == ModeUnsafeNoSync {
		r.shadow = r.data
	} else {
		r.shadow = make([]byte, h.Size)
		copy(r.shadow, r.data)
	}
	return r, nil
}

// Dir returns the backend's directory.
func (b *Backend) Dir() string { return b.dir }

// Mode returns the durability mode in use (never ModeAuto).
func (b *Backend) Mode() Mode { return b.mode }

// Name returns "native/" followed by the mode, e.g. "native/msync".
func (b *Backend) Name() string { return "native/" + b.mode.String() }

// FlushInstruction names the line flush dax mode uses on this CPU ("clwb",
// "clflushopt" or "none").
func (b *Backend) FlushInstruction() string { return b.cpu.String() }

// Stats returns the backend's counts since Open.
func (b *Backend) Stats() Stats { return b.stats }

// Attach binds the backend to the machine's memory. It asks for every verb
// (unsafe-nosync asks for none) and no batching: threads run as they do on
// the functional backend, so results match it exactly.
func (b *Backend) Attach(mem *pm.Memory) (pm.Caps, error) {
	if b.closed {
		return pm.Caps{}, ErrClosed
	}
	if b.mem != nil {
		return pm.Caps{}, fmt.Errorf("%w: native backend attached to a second machine", pm.ErrBackend)
	}
	b.mem = mem
	if b.mode == ModeUnsafeNoSync {
		return pm.Caps{GPU: b.opts.GPU}, nil
	}
	return pm.Caps{Ops: true, GPU: b.opts.GPU}, nil
}

// Stored lists the regions of the directory, in name order; their Data is
// the visible image.
func (b *Backend) Stored() ([]pm.StoredRegion, error) {
	if b.closed {
		return nil, ErrClosed
	}
	out := make([]pm.StoredRegion, 0, len(b.regs))
	for _, r := range b.regs {
		out = append(out, pm.StoredRegion{Name: r.name, Base: r.base, Data: r.shadow})
	}
	return out, nil
}

// CreateStored creates the region file NAME.pmr, zero-filled, and maps it.
// The file is written under a temporary name, fsynced, renamed and the
// directory fsynced: durable on return, and a crash leaves either no
// region or the whole empty one.
func (b *Backend) CreateStored(name string, base pm.Addr, size uint64) ([]byte, error) {
	if b.closed {
		return nil, ErrClosed
	}
	if b.region(name) != nil {
		return nil, fmt.Errorf("%w: %q", pm.ErrRegionExists, name)
	}
	h := Header{Version: FormatVersion, Size: size, Base: base, Name: name}
	fileName := name + fileExt
	path := filepath.Join(b.dir, fileName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	fail := func(err error) ([]byte, error) {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("%w: create %s: %w", ErrIO, path, err)
	}
	if _, err := f.WriteAt(h.Encode(), 0); err != nil {
		return fail(err)
	}
	if err := f.Truncate(int64(HeaderSize + size)); err != nil {
		return fail(err)
	}
	if err := preallocate(f, int64(HeaderSize+size)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDir(b.dir); err != nil {
		f.Close()
		return nil, err
	}
	r, err := b.mapRegion(f, fileName)
	if err != nil {
		f.Close()
		return nil, err
	}
	b.regs = append(b.regs, r)
	slices.SortFunc(b.regs, func(x, y *region) int { return strings.Compare(x.name, y.name) })
	b.setIdx(r)
	if b.jrn != nil {
		b.jrn.addRegion(r)
	}
	return r.shadow, nil
}

// RemoveStored deletes the region's file; durable on return.
func (b *Backend) RemoveStored(name string) error {
	if b.closed {
		return ErrClosed
	}
	r := b.region(name)
	if r == nil {
		return fmt.Errorf("%w: %q", pm.ErrNoRegion, name)
	}
	b.flush()
	if err := os.Remove(filepath.Join(b.dir, r.fileName)); err != nil {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	if err := syncDir(b.dir); err != nil {
		return err
	}
	b.unmap(r)
	b.regs = slices.DeleteFunc(b.regs, func(x *region) bool { return x == r })
	b.byIdx[uint64(r.base)>>pm.OffsetBits] = nil
	if b.jrn != nil {
		b.jrn.removeRegion(name)
	}
	return nil
}

func (b *Backend) setIdx(r *region) {
	i := int(uint64(r.base) >> pm.OffsetBits)
	if i >= len(b.byIdx) {
		b.byIdx = append(b.byIdx, make([]*region, i+1-len(b.byIdx))...)
	}
	b.byIdx[i] = r
}

// regionAt returns the region holding a, or nil.
func (b *Backend) regionAt(a pm.Addr) *region {
	if i := uint64(a) >> pm.OffsetBits; i < uint64(len(b.byIdx)) {
		return b.byIdx[i]
	}
	return nil
}

func (b *Backend) region(name string) *region {
	for _, r := range b.regs {
		if r.name == name {
			return r
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: fsync %s: %w", ErrIO, dir, err)
	}
	return nil
}

// Host makes host writes to PM durable on return: the copied range goes
// from the visible image to the mapping and is synced.
func (b *Backend) Host(ev pm.HostEvent) {
	if b.closed || ev.Range.Kind != pm.PMem {
		return
	}
	if ev.Kind == pm.HostCreate && b.regionAt(ev.Range.Base) == nil && b.err == nil {
		b.err = fmt.Errorf("%w: %q (is the backend wrapped by one that hides it? a wrapper must implement pm.Wrapper)", ErrNotStored, ev.Range.Name)
	}
	if ev.Kind != pm.HostWrite || b.mode == ModeUnsafeNoSync {
		return
	}
	r := b.regionAt(ev.Range.Base)
	if r == nil || ev.Size == 0 {
		return
	}
	b.flush()
	off := uint64(ev.Addr - r.base)
	copy(r.data[off:off+ev.Size], r.shadow[off:off+ev.Size])
	b.dirty(r, off, off+ev.Size)
	if b.jrn != nil {
		for a, end := ev.Addr, ev.Addr.Add(ev.Size); a < end; {
			n := min(pm.WordSize-uint64(a)%pm.WordSize, uint64(end-a))
			var e entry
			e.addr, e.size = a, uint8(n)
			copy(e.b[:], r.shadow[uint64(a-r.base):uint64(a-r.base)+n])
			b.jrn.pending = append(b.jrn.pending, e)
			a = a.Add(n)
		}
	}
	b.syncGroup()
}

// Begin starts a launch or CPU run: every agent starts with no ordering
// constraint beyond what is already durable.
func (b *Backend) Begin(pm.Launch) error {
	if b.closed {
		return ErrClosed
	}
	clear(b.gpu)
	clear(b.cpu2)
	return b.err
}

func (b *Backend) state(a *pm.Agent) *agentState {
	s, i := &b.gpu, a.ID
	if a.Kind == pm.CPUTask {
		// The coroutine tasks of a core share its fences: an SFence (or
		// CFence) orders every earlier persist of the core.
		s, i = &b.cpu2, a.Unit
	}
	if i >= len(*s) {
		*s = append(*s, make([]agentState, i+1-len(*s))...)
	}
	return &(*s)[i]
}

// cur is the lowest epoch s's next persist may take.
func (b *Backend) cur(s *agentState) uint64 { return max(s.ep, b.flushed+1) }

// record logs the persists of op by s at epoch e or later (later for a
// word with a pending persist at a later epoch, so that persists of one
// word stay in program order) and returns the highest epoch used.
func (b *Backend) record(s *agentState, e uint64, op *pm.Op) uint64 {
	if op.Data == nil {
		// A naturally aligned value of at most 8 bytes: one word.
		var v [8]byte
		pm.PutLE(v[:op.Size], op.Value)
		return b.recordWord(s, e, op.Addr, v[:op.Size])
	}
	hi := e
	data, a := op.Data, op.Addr
	for len(data) > 0 {
		n := min(pm.WordSize-int(a%pm.WordSize), len(data))
		hi = max(hi, b.recordWord(s, e, a, data[:n]))
		data, a = data[n:], a+pm.Addr(n)
	}
	return hi
}

func (b *Backend) recordWord(s *agentState, e uint64, a pm.Addr, data []byte) uint64 {
	if r := b.regionAt(a); r != nil {
		// Coherence: not before a pending persist of the same word.
		if r.epochs == nil {
			r.epochs = make([]uint32, (r.size+pm.WordSize-1)/pm.WordSize)
		}
		w := &r.epochs[uint64(a-r.base)/pm.WordSize]
		if le := uint64(*w); le > b.flushed-b.epochBase && le+b.epochBase > e {
			e = le + b.epochBase
		}
		*w = uint32(e - b.epochBase)
	}
	en := entry{epoch: e, addr: a, size: uint8(len(data))}
	copy(en.b[:], data)
	b.log = append(b.log, en)
	s.lp = max(s.lp, e)
	b.gmax = max(b.gmax, e)
	b.stats.Persists++
	return e
}

// Op logs persists and applies the ordering rules of the package doc.
func (b *Backend) Op(a *pm.Agent, op *pm.Op) {
	if b.closed {
		return
	}
	switch op.Kind {
	case pm.OpStore, pm.OpAtomic:
		if op.Persists() {
			s := b.state(a)
			b.record(s, b.cur(s), op)
		}
	case pm.OpPRel:
		s := b.state(a)
		e := max(b.cur(s), s.lp+1)
		s.ep = e
		if op.Persists() {
			e = b.record(s, e, op)
			s.ep = e
		}
		b.rel[op.Addr] = e
	case pm.OpPAcq:
		if r, ok := b.rel[op.Addr]; ok {
			s := b.state(a)
			s.ep = max(b.cur(s), r+1)
		}
	case pm.OpOFence, pm.OpPBarrier, pm.OpDFence, pm.OpEpochBarrier, pm.OpSFence, pm.OpCFence, pm.OpMemBar, pm.OpPersistBarrier, pm.OpJoinStrand:
		b.order(b.state(a))
	case pm.OpL2WB, pm.OpPCommit:
		// The re-study's write-back of the whole L2 (and drain of every
		// write-pending queue) covers every thread's persists so far.
		s := b.state(a)
		s.ep = max(b.cur(s), b.gmax+1)
	}
	if len(b.log) >= b.opts.MaxPending {
		b.flush()
	}
}

// order puts s's later persists after its earlier ones.
func (b *Backend) order(s *agentState) { s.ep = max(b.cur(s), s.lp+1) }

// Sync gives every member of a barrier the highest epoch among them: what
// any member ordered before the barrier is ordered before every member's
// persists after it.
func (b *Backend) Sync(group []*pm.Agent) {
	if b.closed {
		return
	}
	var e uint64
	for _, a := range group {
		e = max(e, b.cur(b.state(a)))
	}
	for _, a := range group {
		b.state(a).ep = e
	}
}

// Step is not called: the backend asks for no batches.
func (b *Backend) Step(int) uint64 { return 0 }

// End flushes the log: every persist of the run is durable when it
// returns. It reports the first I/O error since the last End.
func (b *Backend) End() (pm.Stats, error) {
	if b.closed {
		return pm.Stats{}, ErrClosed
	}
	b.flush()
	err := b.err
	b.err = nil
	return pm.Stats{Persists: b.stats.Persists}, err
}

// flush applies the log to the mapping epoch by epoch, syncing each.
func (b *Backend) flush() {
	if len(b.log) == 0 {
		return
	}
	b.stats.Flushes++
	b.sortLog()
	for i := 0; i < len(b.log); {
		j := i
		for ; j < len(b.log) && b.log[j].epoch == b.log[i].epoch; j++ {
			en := &b.log[j]
			r := b.regionAt(en.addr)
			if r == nil {
				continue // the region was removed
			}
			off := uint64(en.addr - r.base)
			copy(r.data[off:off+uint64(en.size)], en.b[:en.size])
			b.dirty(r, off, off+uint64(en.size))
		}
		if b.jrn != nil {
			b.jrn.pending = append(b.jrn.pending, b.log[i:j]...)
		}
		b.stats.Epochs++
		b.syncGroup()
		i = j
	}
	b.flushed = max(b.flushed, b.gmax)
	b.log = b.log[:0]
	if b.gmax-b.epochBase > 1<<31 {
		// Keep region.epochs in 32 bits: forget every (now durable) epoch.
		for _, r := range b.regs {
			clear(r.epochs)
		}
		b.epochBase = b.gmax
	}
	clear(b.rel)
}

// sortLog orders the log by epoch, keeping the logged order within an
// epoch: a counting sort over the pending epochs flushed+1..gmax.
func (b *Backend) sortLog() {
	lo := b.flushed + 1
	n := b.gmax - lo + 1
	if n > uint64(len(b.log)) {
		slices.SortStableFunc(b.log, func(x, y entry) int { return cmp.Compare(x.epoch, y.epoch) })
		return
	}
	if cap(b.counts) < int(n)+1 {
		b.counts = make([]int, n+1)
	}
	counts := b.counts[:n+1]
	clear(counts)
	for i := range b.log {
		counts[b.log[i].epoch-lo+1]++
	}
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	if cap(b.sorted) < len(b.log) {
		b.sorted = make([]entry, len(b.log))
	}
	out := b.sorted[:len(b.log)]
	for i := range b.log {
		k := b.log[i].epoch - lo
		out[counts[k]] = b.log[i]
		counts[k]++
	}
	b.log, b.sorted = out, b.log
}

func (b *Backend) dirty(r *region, lo, hi uint64) {
	if !r.inDirty {
		r.inDirty, r.lo, r.hi = true, lo, hi
		b.touched = append(b.touched, r)
		return
	}
	r.lo, r.hi = min(r.lo, lo), max(r.hi, hi)
}

// syncGroup makes the dirty ranges of the touched regions durable.
func (b *Backend) syncGroup() {
	page := uint64(os.Getpagesize())
	for _, r := range b.touched {
		r.inDirty = false
		switch b.mode {
		case ModeMsync:
			lo := (HeaderSize + r.lo) &^ (page - 1)
			hi := HeaderSize + r.hi
			if err := unix.Msync(r.mapping[lo:hi], unix.MS_SYNC); err != nil && b.err == nil {
				b.err = fmt.Errorf("%w: msync %s: %w", ErrIO, r.name, err)
			}
			b.stats.SyncBytes += (hi - lo + page - 1) &^ (page - 1)
		case ModeDAX:
			flushLines(b.cpu, r.data[r.lo:r.hi])
			b.stats.SyncBytes += r.hi - r.lo
		}
	}
	if len(b.touched) > 0 {
		if b.mode == ModeDAX {
			fence()
		}
		b.stats.Syncs++
	}
	b.touched = b.touched[:0]
	if b.jrn != nil {
		b.jrn.commit()
	}
}

// Crash returns the durable image, read back from the mappings, and closes
// the backend. The files stay; Open the directory again to recover.
func (b *Backend) Crash() (*pm.Image, error) {
	if b.closed {
		return nil, ErrClosed
	}
	b.flush()
	img := b.durable()
	err := b.Close()
	return img, err
}

// durable reads every region's bytes from its mapping.
func (b *Backend) durable() *pm.Image {
	img := &pm.Image{}
	for _, r := range b.regs {
		img.Regions = append(img.Regions, pm.RegionImage{Name: r.name, Base: r.base, Data: slices.Clone(r.data)})
	}
	return img
}

// Close flushes what is pending, unmaps every region and releases the
// directory. The machine on the backend must not be used afterwards (in
// unsafe-nosync mode its memory is the unmapped mapping).
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.flush()
	err := b.err
	b.unmapAll()
	b.closed = true
	if b.lock != nil {
		b.lock.Close()
	}
	return err
}

func (b *Backend) unmapAll() {
	for _, r := range b.regs {
		b.unmap(r)
	}
	b.regs = nil
	b.byIdx = nil
}

func (b *Backend) unmap(r *region) {
	if r.mapping != nil {
		if err := unix.Munmap(r.mapping); err != nil && b.err == nil {
			b.err = fmt.Errorf("%w: munmap %s: %w", ErrIO, r.name, err)
		}
		r.mapping, r.data = nil, nil
	}
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// OpenRegion returns the PM region name of m, creating it with size bytes
// if it does not exist. A region that exists with another size is an error
// wrapping ErrSizeMismatch: a store reopened with a different size must not
// be read with the wrong layout.
func OpenRegion(m *pm.Machine, name string, size uint64) (pm.Range, error) {
	r, err := m.OpenRegion(name)
	if errors.Is(err, pm.ErrNoRegion) {
		return m.CreateRegion(name, size)
	}
	if err != nil {
		return pm.Range{}, err
	}
	if r.Size != size {
		return pm.Range{}, fmt.Errorf("%w: region %q has %d bytes, opened with %d", ErrSizeMismatch, name, r.Size, size)
	}
	return r, nil
}
