//go:build unix

package native

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scopedpm/scopedpm/internal/radix"
	"github.com/scopedpm/scopedpm/pm"
)

// Mode is a durability mode.
type Mode uint8

// Durability modes.
const (
	ModeAuto         Mode = iota // dax where available, else log
	ModeLog                      // persist log with group commit; region files are checkpoints
	ModeDAX                      // MAP_SYNC mapping, CLWB/CLFLUSHOPT + SFENCE
	ModeUnsafeNoSync             // no syncs, no ordering: measurement only

	// ModeMsync is the former name of ModeLog, kept for callers that
	// name it; "msync" parses to ModeLog.
	//
	// Deprecated: use ModeLog.
	ModeMsync = ModeLog
)

var modeNames = [...]string{"auto", "log", "dax", "unsafe-nosync"}

// String returns "auto", "log", "dax" or "unsafe-nosync".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode returns the mode named s (as printed by String; "msync" is
// accepted for ModeLog).
func ParseMode(s string) (Mode, error) {
	if s == "msync" {
		return ModeLog, nil
	}
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown mode %q", ErrUnsupported, s)
}

// DefaultMaxPending is the default Options.MaxPending.
const DefaultMaxPending = 1 << 20

// DefaultCheckpointBytes is the default Options.CheckpointBytes.
const DefaultCheckpointBytes = 64 << 20

// Options configure Open.
type Options struct {
	// Mode is the durability mode; ModeAuto picks dax where it works and
	// log otherwise.
	Mode Mode
	// GPU is the GPU shape reported to the executors (pm.DefaultGPU if
	// zero).
	GPU pm.GPULimits
	// MaxPending bounds the persists held in memory during a launch or a
	// Defer: when a launch (or the host writes and launches of a Defer)
	// has logged this many since the last durability point, they are
	// written and synced at once (DefaultMaxPending if zero).
	MaxPending int
	// CheckpointBytes: once the log file passes this size, the next
	// durability point starts an empty log and a background checkpoint,
	// which writes the region files from the old log (see the package
	// doc; DefaultCheckpointBytes if zero).
	CheckpointBytes int64
	// SBRPReleases makes a PRel only order, as SBRP's rule has it,
	// instead of a durability point. By default a PRel is one (log
	// mode), since scoped persist barriers, x86 and COSPlay make a
	// release a full, durable fence; a program written for SBRP alone
	// saves a sync of the log per round of releases with it.
	SBRPReleases bool
	// Journal keeps what PowerCut needs (test use: it grows with every
	// sync). Log mode only.
	Journal bool
	// Create makes the directory if it does not exist.
	Create bool
	// FS is the file system the backend uses (OSFS() if nil); tests wrap
	// it with InjectFS to inject faults or count syncs.
	FS FS
	// NoHugePages keeps region images in small pages. By default an
	// image asks the kernel for huge pages (Linux), which cut TLB misses
	// on random access to a large image (gpKVS's table: 4% less CPU a
	// batch of host SETs) but take memory 2 MiB at a time (a B+tree of
	// 1M keys: about 3 MB more at its peak, for no measured speed).
	NoHugePages bool

	daxOnPageCache bool // test: dax's write-back path on a MAP_SHARED mapping
}

// Stats are the backend's counts since Open.
type Stats struct {
	Persists    uint64 // persist records logged (stores, atomics that wrote, PM release flags)
	Syncs       uint64 // log mode: fdatasyncs of the log (durability points); dax: CLWB+SFENCE groups
	SyncBytes   uint64 // log mode: bytes written to the log; dax: bytes written back
	Checkpoints uint64 // log mode: checkpoints started (the log restarted; the region files written in the background, or at RemoveRegion and Close)
	Epochs      uint64 // dax: non-empty epochs flushed
	Flushes     uint64 // dax: log flushes
}

const fileExt = ".pmr"

const pageSize = 4096

type region struct {
	name     string
	base     pm.Addr
	size     uint64
	f        File
	fileName string
	// data is the region's bytes: in log and unsafe-nosync modes the
	// visible image (shadow), in dax mode the mapping's bytes, and shadow
	// is a private copy. image is the anonymous mapping (newImage) that
	// holds the visible image.
	data    []byte
	shadow  []byte
	image   []byte
	mapping []byte   // dax: the whole file
	dirty   []uint64 // log, unsafe-nosync: one bit per page written since the last checkpoint

	lo, hi  uint64   // dax: dirty byte range of the current sync group (lo < hi)
	inDirty bool     // dax
	epochs  []uint32 // dax: per 8-byte word, epoch of its last pending persist
}

// markDirty records that bytes [off, off+n) changed since the checkpoint.
func (r *region) markDirty(off, n uint64) {
	if n == 0 {
		return
	}
	if r.dirty == nil {
		r.dirty = make([]uint64, (r.size/pageSize+64)/64)
	}
	for p := off / pageSize; p <= (off+n-1)/pageSize; p++ {
		r.dirty[p/64] |= 1 << (p % 64)
	}
}

// Backend is the native backend. Create it with Open.
//
// A Backend serves one machine, whose calls come from one goroutine at a
// time. The log underneath is safe for concurrent use: commits that
// arrive while a sync of the log is under way share the next sync (group
// commit).
type Backend struct {
	dir   string
	opts  Options
	fs    FS
	mode  Mode
	cpu   cpuFeatures
	lock  File
	mem   *pm.Memory
	regs  []*region // sorted by name
	byIdx []*region // by range index (Addr >> pm.OffsetBits)

	// log mode
	plog     *plog
	buf      []byte // entries of persists since the last durability point
	lastEnt  int    // offset in buf of the last entry, or -1
	npend    int    // persists in buf
	hostErr  error  // error of the last Host call, for HostErr
	defers   int    // depth of Defer calls: durability points wait for the outermost's end
	atomic   int    // depth of DeferAtomic calls: their persists stay in one record
	atomicAt int    // where in buf the outermost DeferAtomic's persists start
	// batchBytes is maxBatchBytes; tests lower it to cut records small.
	batchBytes int

	// dax mode
	log       []entry
	epochBase uint64             // region.epochs hold epoch-epochBase; valid if > flushed-epochBase
	rel       map[pm.Addr]uint64 // epoch of the last pending release of each flag
	gpu, cpu2 []agentState
	flushed   uint64 // every epoch <= flushed is durable
	gmax      uint64 // highest epoch logged
	touched   []*region
	counts    []int
	sorted    []entry

	ckpt *bgCheckpoint // log mode: the background checkpoint running, if any

	stats  Stats
	jrn    *journal
	err    error // sticky: an I/O error (refuse writes) or ErrNotStored
	closed bool
}

// Open opens the region files of dir with the given options and recovers
// them: the persist log's valid prefix is replayed onto the regions (a torn
// or damaged last record is dropped: it was never acknowledged), the
// result written to the region files and the log restarted. A damaged
// record followed by valid ones is an error wrapping pm.ErrCorrupt.
func Open(dir string, opts Options) (*Backend, error) {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.CheckpointBytes <= 0 {
		opts.CheckpointBytes = DefaultCheckpointBytes
	}
	if opts.GPU == (pm.GPULimits{}) {
		opts.GPU = pm.DefaultGPU()
	}
	if opts.FS == nil {
		opts.FS = OSFS()
	}
	fs := opts.FS
	if opts.Create {
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIO, err)
		}
	}
	st, err := fs.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrIO, dir)
	}
	b := &Backend{dir: dir, opts: opts, fs: fs, cpu: detectCPU(), rel: map[pm.Addr]uint64{}, lastEnt: -1, batchBytes: maxBatchBytes}
	mode, err := b.pickMode(opts.Mode)
	if err != nil {
		return nil, err
	}
	b.mode = mode
	lock, err := fs.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, dir, err)
	}
	b.lock = lock
	b.plog = newPlog(fs, filepath.Join(dir, logName))
	if err := b.load(); err != nil {
		b.unmapAll()
		b.plog.close()
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
	if b.opts.daxOnPageCache {
		return ModeDAX, nil
	}
	switch m {
	case ModeAuto:
		if daxSupport(b.dir, b.cpu) == nil {
			return ModeDAX, nil
		}
		return ModeLog, nil
	case ModeDAX:
		if err := daxSupport(b.dir, b.cpu); err != nil {
			return 0, err
		}
		return ModeDAX, nil
	case ModeLog, ModeUnsafeNoSync:
		return m, nil
	}
	return 0, fmt.Errorf("%w: %v", ErrUnsupported, m)
}

// load opens every region file of the directory and recovers the log.
func (b *Backend) load() error {
	ents, err := b.fs.ReadDir(b.dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, fileExt+".tmp") || n == logName+".tmp" || n == freeLogName:
			// A region whose creation, or a log whose restart, did not
			// finish: never acknowledged; or a log kept for reuse.
			if err := b.fs.Remove(filepath.Join(b.dir, n)); err != nil {
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
		if b.regionAt(r.base) != nil {
			return fmt.Errorf("%w: regions %q and %q have the same base %v", pm.ErrCorrupt, b.regionAt(r.base).name, r.name, r.base)
		}
		b.setIdx(r)
	}
	return b.recover()
}

// recover replays the logs onto the regions, then writes them and
// restarts the log if a log held anything. LOG.old, the log of a
// background checkpoint that did not finish, holds the older records: it
// is replayed first, then LOG.
func (b *Backend) recover() error {
	logPath, oldPath := filepath.Join(b.dir, logName), filepath.Join(b.dir, oldLogName)
	apply := func(e logEntry) error {
		r := b.regionAt(e.addr)
		if r == nil || e.addr < r.base || uint64(e.addr-r.base)+uint64(len(e.data)) > r.size {
			return fmt.Errorf("%w: log entry of %d bytes at %v outside every region", pm.ErrCorrupt, len(e.data), e.addr)
		}
		off := uint64(e.addr - r.base)
		copy(r.data[off:], e.data)
		copy(r.shadow[off:], e.data)
		r.markDirty(off, uint64(len(e.data)))
		return nil
	}
	var gen uint64
	old := false
	f, size, err := openLog(b.fs, oldPath)
	switch {
	case err == nil:
		old = true
		g, _, _, err := scanLogAt(f, size, scanPiece, apply, nil)
		f.Close()
		if err != nil {
			return fmt.Errorf("log %s: %w", oldPath, err)
		}
		gen = g
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: read log: %w", ErrIO, err)
	}
	f, size, err = openLog(b.fs, logPath)
	if errors.Is(err, os.ErrNotExist) && !old {
		return b.plog.create(b.dir, 1)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: read log: %w", ErrIO, err)
	}
	if err == nil {
		// (A crash between a checkpoint's two renames leaves LOG.old
		// and no LOG.)
		g, end, records, err := scanLogAt(f, size, scanPiece, apply, nil)
		zero := false
		if err == nil && !old && records == 0 {
			zero, err = zeroFrom(f, end, size)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("log %s: %w", logPath, err)
		}
		if zero {
			// An empty log: append to it.
			f, err := b.fs.OpenFile(logPath, os.O_RDWR, 0)
			if err != nil {
				return fmt.Errorf("%w: open log: %w", ErrIO, err)
			}
			b.plog.f, b.plog.gen, b.plog.off, b.plog.zeroEnd = f, g, end, size
			return nil
		}
		gen = max(gen, g)
	}
	if err := b.writeRegions(true); err != nil {
		return err
	}
	if old {
		// Before LOG is replaced: LOG.old replayed over regions that
		// hold LOG's newer writes, with LOG gone, would undo them.
		if err := b.fs.Remove(oldPath); err != nil {
			return fmt.Errorf("%w: %w", ErrIO, err)
		}
		if err := b.fs.SyncDir(b.dir); err != nil {
			return fmt.Errorf("%w: sync directory %s: %w", ErrIO, b.dir, err)
		}
	}
	return b.plog.create(b.dir, gen+1)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (b *Backend) mapFlags() int {
	if b.mode == ModeDAX && !b.opts.daxOnPageCache {
		return mapSyncFlags
	}
	return unix.MAP_SHARED
}

func (b *Backend) openRegion(fileName string) (*region, error) {
	path := filepath.Join(b.dir, fileName)
	f, err := b.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	r, err := b.readRegion(f, fileName)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("region file %s: %w", path, err)
	}
	return r, nil
}

// readRegion validates a region file and loads its bytes (dax: maps them).
func (b *Backend) readRegion(f File, fileName string) (*region, error) {
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
	r := &region{name: h.Name, base: h.Base, size: h.Size, f: f, fileName: fileName}
	img, err := b.newImage(h.Size)
	if err != nil {
		return nil, err
	}
	r.image, r.shadow = img, img
	if b.mode == ModeDAX {
		m, err := unix.Mmap(int(f.Fd()), 0, int(HeaderSize+h.Size), unix.PROT_READ|unix.PROT_WRITE, b.mapFlags())
		if err != nil {
			_ = freeImage(img)
			return nil, fmt.Errorf("%w: mmap: %w", ErrIO, err)
		}
		r.mapping, r.data = m, m[HeaderSize:]
		copy(r.shadow, r.data)
		return r, nil
	}
	r.data = img
	if n, err := f.ReadAt(r.data, HeaderSize); err != nil && !(errors.Is(err, io.EOF) && uint64(n) == h.Size) {
		_ = freeImage(img)
		return nil, fmt.Errorf("%w: read: %w", ErrIO, err)
	}
	return r, nil
}

// newImage returns a region's image of size zero bytes (see image.go), in
// huge pages unless Options.NoHugePages.
func (b *Backend) newImage(size uint64) ([]byte, error) {
	if b.opts.NoHugePages {
		return newMapping(size)
	}
	return newImage(size)
}

// Dir returns the backend's directory.
func (b *Backend) Dir() string { return b.dir }

// Mode returns the durability mode in use (never ModeAuto).
func (b *Backend) Mode() Mode { return b.mode }

// Name returns "native/" followed by the mode, e.g. "native/log".
func (b *Backend) Name() string { return "native/" + b.mode.String() }

// FlushInstruction names the line flush dax mode uses on this CPU ("clwb",
// "clflushopt" or "none").
func (b *Backend) FlushInstruction() string { return b.cpu.String() }

// Stats returns the backend's counts since Open.
func (b *Backend) Stats() Stats {
	st := b.stats
	if b.mode == ModeLog && b.plog != nil {
		b.plog.mu.Lock()
		st.Syncs, st.SyncBytes = b.plog.syncs, b.plog.bytes
		b.plog.mu.Unlock()
	}
	return st
}

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

// usable returns the error that refuses a write: ErrClosed after Close, or
// the sticky I/O error.
func (b *Backend) usable() error {
	if b.closed {
		return ErrClosed
	}
	if err := b.pollCheckpoint(); err != nil {
		return err
	}
	if b.err != nil && errors.Is(b.err, ErrIO) {
		return b.err
	}
	if b.plog != nil {
		if err := b.plog.failed(); err != nil {
			return b.fail(err)
		}
	}
	return nil
}

// fail records err as the sticky error (the first one wins) and returns
// it. After an I/O error the backend refuses further writes.
func (b *Backend) fail(err error) error {
	if b.err == nil || !errors.Is(b.err, ErrIO) {
		b.err = err
	}
	return err
}

// CreateStored creates the region file NAME.pmr, zero-filled. The file is
// written under a temporary name, synced, renamed and the directory
// synced: durable on return, and a crash leaves either no region or the
// whole empty one.
func (b *Backend) CreateStored(name string, base pm.Addr, size uint64) ([]byte, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if b.region(name) != nil {
		return nil, fmt.Errorf("%w: %q", pm.ErrRegionExists, name)
	}
	h := Header{Version: FormatVersion, Size: size, Base: base, Name: name}
	fileName := name + fileExt
	path := filepath.Join(b.dir, fileName)
	tmp := path + ".tmp"
	f, err := b.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, b.fail(fmt.Errorf("%w: create %s: %w", ErrIO, tmp, err))
	}
	fail := func(err error) ([]byte, error) {
		f.Close()
		b.fs.Remove(tmp)
		return nil, b.fail(fmt.Errorf("%w: create %s: %w", ErrIO, path, err))
	}
	if _, err := f.WriteAt(h.Encode(), 0); err != nil {
		return fail(err)
	}
	if err := f.Truncate(int64(HeaderSize + size)); err != nil {
		return fail(err)
	}
	if err := preallocate(f.Fd(), int64(HeaderSize+size)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := b.fs.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := b.fs.SyncDir(b.dir); err != nil {
		f.Close()
		// The region may or may not exist after a crash: unknown.
		return nil, b.fail(fmt.Errorf("%w: sync directory %s: %w", ErrIO, b.dir, err))
	}
	r := &region{name: name, base: base, size: size, f: f, fileName: fileName}
	img, err := b.newImage(size)
	if err != nil {
		f.Close()
		return nil, b.fail(err)
	}
	r.image, r.data, r.shadow = img, img, img
	if b.mode == ModeDAX {
		m, err := unix.Mmap(int(f.Fd()), 0, int(HeaderSize+size), unix.PROT_READ|unix.PROT_WRITE, b.mapFlags())
		if err != nil {
			f.Close()
			_ = freeImage(img)
			return nil, b.fail(fmt.Errorf("%w: mmap: %w", ErrIO, err))
		}
		r.mapping, r.data = m, m[HeaderSize:]
	}
	b.regs = append(b.regs, r)
	slices.SortFunc(b.regs, func(x, y *region) int { return strings.Compare(x.name, y.name) })
	b.setIdx(r)
	if b.jrn != nil {
		b.jrn.addRegion(r)
	}
	return r.shadow, nil
}

// RemoveStored deletes the region's file; durable on return. In log mode
// it first makes everything durable and checkpoints, so that the log holds
// no record of the region.
func (b *Backend) RemoveStored(name string) error {
	if err := b.usable(); err != nil {
		return err
	}
	r := b.region(name)
	if r == nil {
		return fmt.Errorf("%w: %q", pm.ErrNoRegion, name)
	}
	switch b.mode {
	case ModeLog, ModeUnsafeNoSync:
		if err := b.commit(); err != nil {
			return err
		}
		if err := b.checkpoint(); err != nil {
			return err
		}
	case ModeDAX:
		b.flush()
	}
	if err := b.fs.Remove(filepath.Join(b.dir, r.fileName)); err != nil {
		return b.fail(fmt.Errorf("%w: %w", ErrIO, err))
	}
	if err := b.fs.SyncDir(b.dir); err != nil {
		return b.fail(fmt.Errorf("%w: sync directory %s: %w", ErrIO, b.dir, err))
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

// Host makes host writes to PM durable on return. In log mode the copied
// bytes are one log entry and the write is a durability point: one sync
// of the log. An error (ErrClosed, or an I/O error wrapping ErrIO) is kept
// for HostErr, which the machine reads.
func (b *Backend) Host(ev pm.HostEvent) {
	b.hostErr = nil
	if ev.Range.Kind != pm.PMem {
		return
	}
	if b.closed {
		b.hostErr = ErrClosed
		return
	}
	if ev.Kind == pm.HostCreate && b.regionAt(ev.Range.Base) == nil && b.err == nil {
		b.err = fmt.Errorf("%w: %q (is the backend wrapped by one that hides it? a wrapper must implement pm.Wrapper)", ErrNotStored, ev.Range.Name)
	}
	if ev.Kind != pm.HostWrite {
		return
	}
	if err := b.usable(); err != nil {
		b.hostErr = err
		return
	}
	r := b.regionAt(ev.Range.Base)
	if r == nil || ev.Size == 0 || ev.Addr < r.base || uint64(ev.Addr-r.base)+ev.Size > r.size {
		return
	}
	off := uint64(ev.Addr - r.base)
	b.hostErr = b.hostWrite(r, ev.Addr, r.shadow[off:off+ev.Size])
}

// hostWrite makes the host write of data at a, in r, durable (log mode:
// logs it and, outside Defer, syncs).
func (b *Backend) hostWrite(r *region, a pm.Addr, data []byte) error {
	off, n := uint64(a-r.base), uint64(len(data))
	switch b.mode {
	case ModeUnsafeNoSync:
		r.markDirty(off, n)
	case ModeLog:
		b.logBytes(r, a, data)
		if b.defers == 0 || b.atomic == 0 && b.npend >= b.opts.MaxPending {
			// Inside Defer, MaxPending bounds the host writes held too:
			// a sync mid-Defer keeps a prefix of them, as a crash may
			// (not inside DeferAtomic, which AtomicDeferBytes bounds).
			return b.commit()
		}
	case ModeDAX:
		b.flush()
		copy(r.data[off:off+n], data)
		b.daxDirty(r, off, off+n)
		b.syncGroup()
	}
	return nil
}

// HostWrites implements pm.HostWriter (pm.Machine.CopyInMany): Host for
// each write in order, with one full health check (the background
// checkpoint's, the log's) for the lot; a sticky I/O error that a write
// leaves fails the writes after it, as their own Host calls would.
func (b *Backend) HostWrites(ws []pm.Write) (int, error) {
	b.hostErr = nil
	if b.closed {
		return 0, ErrClosed
	}
	if err := b.usable(); err != nil {
		return 0, err
	}
	for i, w := range ws {
		if i > 0 && b.err != nil && errors.Is(b.err, ErrIO) {
			return i, b.err
		}
		r := b.regionAt(w.Addr)
		if r == nil || len(w.Data) == 0 || w.Addr < r.base || uint64(w.Addr-r.base)+uint64(len(w.Data)) > r.size {
			continue
		}
		if err := b.hostWrite(r, w.Addr, w.Data); err != nil {
			return i, err
		}
	}
	return len(ws), nil
}

// HostErr returns the error of the last Host call (nil when it is durable)
// and forgets it: pm.Machine returns it from CopyIn.
func (b *Backend) HostErr() error {
	err := b.hostErr
	b.hostErr = nil
	return err
}

// Begin starts a launch or CPU run. It refuses one after Close
// (ErrClosed) or after an I/O error (the sticky error, wrapping ErrIO).
func (b *Backend) Begin(pm.Launch) error {
	if b.closed {
		return ErrClosed
	}
	clear(b.gpu)
	clear(b.cpu2)
	if err := b.usable(); err != nil {
		return err
	}
	return b.err
}

// logBytes appends a persist of data at a in r to the pending entries.
// Entries hold at most maxEntryBytes; a batch that reaches maxBatchBytes
// is committed at once (a prefix of issue order, which recovery allows), so
// that no record outgrows what the decoder accepts.
func (b *Backend) logBytes(r *region, a pm.Addr, data []byte) {
	r.markDirty(uint64(a-r.base), uint64(len(data)))
	b.npend++
	b.stats.Persists++
	if b.buf == nil {
		b.buf = b.plog.takeBuf() // the room of a record written since
	}
	for len(data) > 0 {
		n := min(len(data), maxEntryBytes)
		b.buf, b.lastEnt = appendEntry(b.buf, b.lastEnt, a, data[:n])
		a, data = a.Add(uint64(n)), data[n:]
		switch {
		case b.atomic > 0 && len(b.buf)-b.atomicAt > b.batchBytes:
			// More than AtomicDeferBytes: one record would be too
			// large to stage beside others, and the visible image
			// already holds the persists, so the promise is broken.
			b.fail(fmt.Errorf("%w: DeferAtomic made more than %d bytes of persists", ErrIO, b.batchBytes))
			return
		case b.atomic == 0 && len(b.buf) >= b.batchBytes:
			b.commit() // an error is sticky: the caller's durability point reports it
		}
	}
}

// Op logs persists. In log mode ordering verbs cost nothing: the log is in
// issue order, which every model's persist order is contained in.
func (b *Backend) Op(a *pm.Agent, op *pm.Op) {
	if b.closed || b.err != nil {
		return
	}
	if b.mode == ModeDAX {
		b.daxOp(a, op)
		return
	}
	if !op.Persists() {
		return
	}
	r := b.regionAt(op.Addr)
	if r == nil {
		return
	}
	if op.Data != nil {
		b.logBytes(r, op.Addr, op.Data)
	} else {
		var v [8]byte
		pm.PutLE(v[:op.Size], op.Value)
		b.logBytes(r, op.Addr, v[:op.Size])
	}
	if b.atomic == 0 && b.npend >= b.opts.MaxPending {
		b.commit() // an error is sticky: Begin, End and Commit report it
	}
}

// durabilityVerb reports whether a verb of kind k is a durability point
// in log mode: a verb that some persistency model the backend promises
// to be at least as strong as (SBRP, scoped persist barriers, x86,
// COSPlay) makes durable on return.
func (b *Backend) durabilityVerb(k pm.OpKind) bool {
	switch k {
	case pm.OpDFence, pm.OpEpochBarrier, pm.OpSFence, pm.OpCFence, pm.OpJoinStrand:
		return true
	case pm.OpPRel:
		return !b.opts.SBRPReleases
	}
	return false
}

// WaitDurable implements pm.Durability: in log mode, outside Defer, a
// durability verb (DFence, EpochBarrier, a PRel unless
// Options.SBRPReleases, SFence, CFence, JoinStrand) issued while
// persists are pending must wait for MakeDurable before its thread goes
// on. With nothing pending it returns at once: what it covers is durable.
func (b *Backend) WaitDurable(_ *pm.Agent, op *pm.Op) bool {
	if b.mode != ModeLog || b.closed || b.err != nil || b.defers > 0 || !b.durabilityVerb(op.Kind) {
		return false
	}
	return len(b.buf) > 0 || !b.plog.idle()
}

// MakeDurable implements pm.Durability: a durability point in the middle
// of a launch or CPU run. It writes the pending persists to the log as
// one record and syncs it, one sync for every thread that waits at a
// durability verb (the executor calls it once for all of them), shared
// with concurrent commits of other goroutines. An error wraps ErrIO and
// is sticky: the launch fails with it.
func (b *Backend) MakeDurable() error {
	if b.mode != ModeLog || b.defers > 0 {
		return nil
	}
	return b.commit()
}

// Sync passes barrier epochs on in dax mode; log mode needs nothing.
func (b *Backend) Sync(group []*pm.Agent) {
	if b.closed || b.mode != ModeDAX {
		return
	}
	b.daxSync(group)
}

// Step is not called: the backend asks for no batches.
func (b *Backend) Step(int) uint64 { return 0 }

// End ends a launch or CPU run: a durability point. Every persist of the
// run is durable when it returns nil. An error (wrapping ErrIO) means
// the run's persists may or may not be durable: Open recovers a prefix of
// them, in issue order.
func (b *Backend) End() (pm.Stats, error) {
	if b.closed {
		return pm.Stats{}, ErrClosed
	}
	switch b.mode {
	case ModeLog:
		if b.defers == 0 {
			b.commit()
		}
	case ModeDAX:
		b.flush()
	}
	err := b.err
	if !errors.Is(err, ErrIO) {
		b.err = nil // ErrNotStored is reported once per run
	}
	return pm.Stats{Persists: b.stats.Persists}, err
}

// Commit makes every persist and host write so far durable: a durability
// point of its own, for a data structure's commit between launches. It
// costs one sync of the log, or none when nothing is pending. Like every
// method that the machine calls, it is called from the machine's
// goroutine; the log below it is what shares a sync among concurrent
// callers (group commit).
func (b *Backend) Commit() error {
	if err := b.usable(); err != nil {
		return err
	}
	switch b.mode {
	case ModeLog:
		return b.commit()
	case ModeDAX:
		b.flush()
	}
	return nil
}

// Defer runs fn, which uses the machine on this backend, with its
// durability points deferred to fn's end: inside fn, a host write, a
// durability verb in a launch (DFence, PRel, ...) or a launch's end
// appends to the log without syncing it, and when fn returns one sync
// makes all of it durable (log mode; dax mode flushes, and
// unsafe-nosync just runs fn). It is for a data structure whose commit
// takes several host writes and launches and that needs only their order
// until it returns, which the log keeps: a crash inside fn recovers a
// prefix of fn's persists in issue order, as if each step had synced.
// Defer returns fn's error, or else the sync's. Calls nest; the outermost
// one syncs.
func (b *Backend) Defer(fn func() error) error {
	wait, err := b.DeferAsync(fn)
	if wait != nil {
		if werr := wait(); err == nil {
			err = werr
		}
	}
	return err
}

// AtomicDeferBytes returns the most bytes of persists a DeferAtomic call
// may make and keep its promise, each write (an op's or a host write's)
// counted as its bytes rounded up to 8 plus 16: 64 MiB in log mode; 0 in
// dax mode, where persists reach the region files as they are made, and
// in unsafe-nosync mode, which promises nothing.
func (b *Backend) AtomicDeferBytes() int {
	if b.mode != ModeLog {
		return 0
	}
	return b.batchBytes
}

// DeferAtomic is Defer whose persists, where AtomicDeferBytes is not 0,
// are durable all together or not at all: they are one record of the log,
// which recovery replays whole or, torn, not at all (Defer's persists are
// cut into records of 64 MiB, or of Options.MaxPending persists, and a
// crash keeps a prefix of them; neither cuts a DeferAtomic call's). A call
// that makes more than AtomicDeferBytes fails the backend with ErrIO. So
// does one whose fn returns an error after making persists: none of them
// is made durable, and since the visible image holds them, the backend
// takes nothing more (reopen the directory for the state before the
// call); fn's error before any persist is only returned. Elsewhere it is
// Defer. A data structure whose batch is atomic this way needs no undo
// log of its own for it.
func (b *Backend) DeferAtomic(fn func() error) error {
	outer := b.atomic == 0
	if outer {
		b.atomicAt = len(b.buf)
	}
	b.atomic++
	defer func() { b.atomic-- }()
	return b.Defer(func() error {
		err := fn()
		if err != nil && outer && b.mode == ModeLog && len(b.buf) > b.atomicAt {
			// Failing the backend keeps the persists from the log:
			// Defer stages nothing once it is unusable.
			return b.fail(fmt.Errorf("%w: DeferAtomic's function failed after making persists, which are dropped: %w", ErrIO, err))
		}
		return err
	})
}

// DeferAsync is Defer without the wait: it runs fn, hands fn's persists
// to the log and returns a function that waits until they are durable.
// The caller may hand the machine to another goroutine (under its own
// lock) before it waits; wait is safe to call from any goroutine, and
// waits that overlap share syncs of the log (group commit, as a WAL's
// committers do). Nested in another Defer, wait returns nil at once: the
// outer call syncs. fn's persists are staged even when fn fails; the
// error is returned with the waiter.
func (b *Backend) DeferAsync(fn func() error) (wait func() error, err error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	b.defers++
	err = func() error {
		defer func() { b.defers-- }()
		return fn()
	}()
	if b.defers > 0 || b.mode != ModeLog {
		if b.mode == ModeDAX && b.defers == 0 {
			b.flush()
		}
		return func() error { return nil }, err
	}
	if uerr := b.usable(); uerr != nil {
		return nil, errors.Join(err, uerr)
	}
	my := b.plog.stage(b.buf) // the log takes b.buf
	b.buf, b.lastEnt, b.npend = nil, -1, 0
	if b.plog.size() > b.opts.CheckpointBytes {
		if cerr := b.startCheckpoint(); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
	}
	return func() error { return b.plog.wait(my) }, err
}

// commit writes the pending entries as one log record and syncs it, then
// starts a background checkpoint if the log has grown past
// Options.CheckpointBytes.
func (b *Backend) commit() error {
	if b.mode != ModeLog {
		return nil
	}
	if err := b.usable(); err != nil {
		return err
	}
	err := b.plog.commit(b.buf)
	b.buf, b.lastEnt, b.npend = b.buf[:0], -1, 0
	if err != nil {
		return b.fail(err)
	}
	if b.plog.size() > b.opts.CheckpointBytes {
		return b.startCheckpoint()
	}
	return nil
}

// writeRegions writes every dirty page of every region from memory to its
// file and, if sync, syncs the file.
func (b *Backend) writeRegions(sync bool) error {
	for _, r := range b.regs {
		wrote := false
		for i, w := range r.dirty {
			for w != 0 {
				p := uint64(i*64 + bits.TrailingZeros64(w))
				// A run of dirty pages from p.
				q := p
				for q+1 < uint64(len(r.dirty))*64 && r.dirty[(q+1)/64]&(1<<((q+1)%64)) != 0 {
					q++
				}
				lo, hi := p*pageSize, min((q+1)*pageSize, r.size)
				if _, err := r.f.WriteAt(r.data[lo:hi], int64(HeaderSize+lo)); err != nil {
					return b.fail(fmt.Errorf("%w: write region %s: %w", ErrIO, r.name, err))
				}
				wrote = true
				for k := p; k <= q; k++ {
					r.dirty[k/64] &^= 1 << (k % 64)
				}
				w = r.dirty[i]
			}
		}
		if wrote && sync {
			if err := r.f.Sync(); err != nil {
				return b.fail(fmt.Errorf("%w: sync region %s: %w", ErrIO, r.name, err))
			}
		}
	}
	return nil
}

// checkpoint writes the regions from memory and restarts the log: the
// region files then hold everything the log held. A crash between the two
// replays the old log over the new files, which gives the same bytes.
func (b *Backend) checkpoint() error {
	if err := b.waitCheckpoint(); err != nil {
		return err
	}
	if err := b.usable(); err != nil {
		return err
	}
	if b.mode == ModeLog {
		// Sync what DeferAsync staged: waiters then find their batches
		// done, and the new log starts empty.
		if err := b.plog.commit(nil); err != nil {
			return b.fail(err)
		}
	}
	if err := b.writeRegions(b.mode != ModeUnsafeNoSync); err != nil {
		return err
	}
	if b.mode != ModeLog {
		return nil
	}
	b.plog.mu.Lock()
	for b.plog.syncing {
		b.plog.cond.Wait()
	}
	gen, empty := b.plog.gen, b.plog.off == logHeaderSize
	b.plog.mu.Unlock()
	if empty {
		return nil // nothing logged since the last checkpoint
	}
	b.stats.Checkpoints++
	if err := b.plog.create(b.dir, gen+1); err != nil {
		return b.fail(err)
	}
	return nil
}

// bgCheckpoint is a checkpoint running in the background.
type bgCheckpoint struct {
	done chan struct{}
	err  error  // valid once done is closed
	free string // where it leaves its log for the next log to reuse
}

// ckptRegion is what a background checkpoint needs of a region.
type ckptRegion struct {
	name string
	base pm.Addr
	size uint64
	f    File
}

// startCheckpoint begins a background checkpoint. In the foreground,
// everything staged is synced (one sync, none if nothing is staged), and
// the log is renamed LOG.old while a new, empty LOG of the next
// generation takes its place (the new log synced, the directory synced
// once for both renames); every page written so far is then in LOG.old.
// A goroutine writes LOG.old's entries to the region files, syncs them,
// removes LOG.old and syncs the directory; durability points go on
// meanwhile on the new log. Recovery replays LOG.old, if it is still
// there, before LOG. A checkpoint already running is left to finish,
// unless the log has grown past twice Options.CheckpointBytes: then the
// caller waits for it (the log stays bounded) and starts the next. An
// error of a background checkpoint becomes the sticky error once it has
// finished (see pollCheckpoint): the next call that writes, or Close,
// returns it.
func (b *Backend) startCheckpoint() error {
	if err := b.pollCheckpoint(); err != nil {
		return err
	}
	if b.ckpt != nil {
		if b.plog.size() <= 2*b.opts.CheckpointBytes {
			return nil
		}
		if err := b.waitCheckpoint(); err != nil {
			return err
		}
	}
	if err := b.plog.commit(nil); err != nil {
		return b.fail(err)
	}
	b.plog.mu.Lock()
	for b.plog.syncing {
		b.plog.cond.Wait()
	}
	gen, empty := b.plog.gen, b.plog.off == logHeaderSize
	b.plog.mu.Unlock()
	if empty {
		return nil
	}
	oldPath := filepath.Join(b.dir, oldLogName)
	if err := b.plog.rotate(b.dir, gen+1, oldPath); err != nil {
		return b.fail(err)
	}
	b.stats.Checkpoints++
	regs := make(map[uint64]ckptRegion, len(b.regs))
	for _, r := range b.regs {
		clear(r.dirty) // LOG.old holds every write to them so far
		regs[uint64(r.base)>>pm.OffsetBits] = ckptRegion{name: r.name, base: r.base, size: r.size, f: r.f}
	}
	ck := &bgCheckpoint{done: make(chan struct{})}
	b.ckpt = ck
	fs, dir := b.fs, b.dir
	ck.free = filepath.Join(b.dir, freeLogName)
	go func() {
		defer close(ck.done)
		ck.err = writeFromLog(fs, dir, oldPath, ck.free, regs, scanPiece, ckptPass)
	}()
	return nil
}

// writeFromLog writes the entries of the log at path to the region files
// (what they leave in log order), syncs the files it wrote, then removes
// the log (or renames it to keep, when not empty) and syncs the
// directory. It reads the log a piece (piece bytes) at a time, indexing
// where its entries go (16 bytes an entry); when pass entries are
// indexed it drops those that a later entry rewrites whole (a store's
// hot words, written again and again), and only if more than half
// remain does it write them out as a pass: their bytes read again,
// merged (overlapping and adjacent entries, and entries less than a page
// apart with the region file's bytes between them, one write; each byte
// written once a pass) into a buffer of at most ckptBatch bytes, refilled
// as often as the merged bytes need. So it holds a fraction of the log in
// memory and its index, sort and extents (about 40 bytes an entry at
// their peak) a bounded amount, whatever the log's size, and writes a
// place once when the log rewrites it in place (gpKVS's table: passes of
// every entry cost it 2.4x the checkpoint's CPU, pwrite calls 6.6x); a
// place written in several passes is written once each, in log order. It
// runs without the backend: regs are the regions the log's entries may
// touch.
func writeFromLog(fs FS, dir, path, keep string, regs map[uint64]ckptRegion, piece, pass int) error {
	f, size, err := openLog(fs, path)
	if err != nil {
		return fmt.Errorf("%w: checkpoint: open %s: %w", ErrIO, path, err)
	}
	defer f.Close()
	// The entries of the pass, in log order, per region, as places in the
	// log (no pointers for the collector to scan), each region's in a
	// mapping with room for every entry the log can hold (maxEntries), of
	// which a pass touches at most pass.
	writes := map[uint64][]logWrite{}
	var releases []func() error
	defer func() {
		for _, rel := range releases {
			_ = rel()
		}
	}()
	indexed := 0
	// flush writes the pass's entries to the region files.
	flush := func() error {
		for _, i := range slices.Sorted(maps.Keys(writes)) {
			ws := writes[i]
			if len(ws) == 0 {
				continue
			}
			r := regs[i]
			rw := mergeIO{
				fill: func(off uint64, b []byte) error {
					_, err := readAtFull(r.f, b, int64(HeaderSize+off), int64(HeaderSize+r.size))
					return err
				},
				write: func(off uint64, data []byte) error {
					_, err := r.f.WriteAt(data, int64(HeaderSize+off))
					return err
				},
			}
			err := writeMerged(f, size, ws, ckptBatch, piece, ckptHole, rw)
			if err != nil {
				return fmt.Errorf("%w: checkpoint: write region %s: %w", ErrIO, r.name, err)
			}
			writes[i] = ws[:0]
		}
		indexed = 0
		return nil
	}
	_, _, _, err = scanLogAt(f, size, piece, func(e logEntry) error {
		i := uint64(e.addr) >> pm.OffsetBits
		r, ok := regs[i]
		if !ok || e.addr < r.base || uint64(e.addr-r.base)+uint64(len(e.data)) > r.size {
			return fmt.Errorf("%w: checkpoint: log entry of %d bytes at %v outside every region", pm.ErrCorrupt, len(e.data), e.addr)
		}
		if len(e.data) == 0 {
			return nil
		}
		ws, ok := writes[i]
		if !ok {
			all, rel, err := mapped[logWrite](maxEntries(size))
			if err != nil {
				return err
			}
			releases = append(releases, rel)
			ws = all[:0]
		}
		writes[i] = append(ws, newLogWrite(uint64(e.addr-r.base), uint64(e.pos), uint64(len(e.data))))
		if indexed++; indexed < pass {
			return nil
		}
		// Full: drop the entries a later one rewrites whole; write the
		// pass out only if that leaves more than half of it.
		indexed = 0
		for _, i := range slices.Sorted(maps.Keys(writes)) {
			ws, err := dropRewritten(writes[i])
			if err != nil {
				return err
			}
			writes[i] = ws
			indexed += len(ws)
		}
		if indexed > pass/2 {
			return flush()
		}
		return nil
	}, nil)
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("checkpoint from %s: %w", path, err)
	}
	wrote := slices.Sorted(maps.Keys(writes))
	for _, i := range wrote {
		if err := regs[i].f.Sync(); err != nil {
			return fmt.Errorf("%w: checkpoint: sync region %s: %w", ErrIO, regs[i].name, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: checkpoint: close %s: %w", ErrIO, path, err)
	}
	if keep != "" {
		if err := fs.Rename(path, keep); err != nil {
			return fmt.Errorf("%w: checkpoint: rename %s: %w", ErrIO, path, err)
		}
	} else if err := fs.Remove(path); err != nil {
		return fmt.Errorf("%w: checkpoint: remove %s: %w", ErrIO, path, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: checkpoint: sync directory %s: %w", ErrIO, dir, err)
	}
	return nil
}

// dropRewritten removes from ws (in log order) every entry that a later
// one of the same offset and length rewrites, keeping the order of the
// rest; what ws leaves applied in order is unchanged.
func dropRewritten(ws []logWrite) ([]logWrite, error) {
	if len(ws) < 2 {
		return ws, nil
	}
	order, release, err := sortByOffset(ws)
	if err != nil {
		return nil, err
	}
	// Ties are in log order: among the entries at one offset, walked from
	// the newest, one whose length a newer one had is rewritten. A dropped
	// entry's length becomes 0 (no entry has 0).
	var lens []uint64 // the lengths seen at the offset
	for j := len(order) - 1; j >= 0; j-- {
		w := &ws[order[j]]
		if j == len(order)-1 || ws[order[j+1]].off != w.off {
			lens = lens[:0]
		}
		if slices.Contains(lens, w.n()) {
			w.posLen &^= 1<<21 - 1
		} else {
			lens = append(lens, w.n())
		}
	}
	if err := release(); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ws, func(w logWrite) bool { return w.n() == 0 }), nil
}

// maxEntries bounds the entries a log of size bytes holds: each takes at
// least its header and 8 bytes of (padded) data.
func maxEntries(size int64) int { return int(size/(entHeaderSize+8)) + 1 }

// ckptBatch bounds the merged bytes a checkpoint holds at once. With
// scanPiece it is most of a checkpoint's memory beside its index: 4 MiB
// each held about 10 MiB more at the B+tree's peak (1M keys) than 1 MiB
// each, for no measured change in a checkpoint's CPU (gpKVS's host
// batches, which checkpoint their table's words again and again).
const ckptBatch = 1 << 20

// ckptPass bounds the entries a checkpoint indexes at once (writeFromLog's
// passes): about 5 MiB of index, sort and extents. Indexing a whole 64 MiB
// log of B+tree batches (about a million entries) at once held 27-45 MiB
// of mappings at its peak.
const ckptPass = 1 << 17

// logWrite is a log entry's n bytes at log offset pos, for offset off of
// its region, in 16 bytes (a checkpoint holds one per entry of its log).
type logWrite struct {
	off    uint64
	posLen uint64 // pos<<21 | n: n <= maxEntryBytes < 1<<21
}

func newLogWrite(off, pos, n uint64) logWrite { return logWrite{off, pos<<21 | n} }
func (w logWrite) pos() uint64                { return w.posLen >> 21 }
func (w logWrite) n() uint64                  { return w.posLen & (1<<21 - 1) }

// extent is a range [lo, hi) of region offsets; holes says that some of
// its bytes lie between writes (planExtents' hole).
type extent struct {
	lo, hi uint64
	holes  bool
}

// ckptHole is the longest run of bytes no write of a checkpoint's pass
// covers that a merged write still spans (its bytes read from the region
// file and written back unchanged): one write a run of a B+tree's nodes
// or a gpKVS table's words instead of one a node or word. pwrite calls
// of single nodes were 43% of the CPU of loading a million keys into a
// B+tree (pprof). Under a page, it dirties no page the writes themselves
// do not: a run shorter than a page contains none.
const ckptHole = 4095

// mergeIO is what writeMerged reads and writes the target through: fill
// reads the target's bytes at off into b (for a merged extent's holes),
// and write writes data at off (data is valid until it returns).
type mergeIO struct {
	fill  func(off uint64, b []byte) error
	write func(off uint64, data []byte) error
}

// sortByOffset returns the indices of ws in ascending order of offset,
// ties in log order, and the function that unmaps them. It radix-sorts
// packed keys (the offset above the index) in two mappings of 8 bytes a
// write, then packs the sorted indices into the front of the one holding
// them and unmaps the other: 16 bytes a write at its peak, 8 after.
func sortByOffset(ws []logWrite) ([]uint32, func() error, error) {
	n := len(ws)
	keys, relKeys, err := mapped[uint64](n)
	if err != nil {
		return nil, nil, err
	}
	scratch, relScratch, err := mapped[uint64](n)
	if err != nil {
		return nil, nil, cmp.Or(relKeys(), err)
	}
	shift := uint(bits.Len(uint(n)))
	var maxOff uint64
	for _, w := range ws {
		maxOff = max(maxOff, w.off)
	}
	if width := uint(bits.Len64(maxOff)) + shift; width > 64 {
		// Offsets too large to pack (never for a region's offsets):
		// sort the indices by comparison.
		order := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(keys))), n)
		for i := range order {
			order[i] = uint32(i)
		}
		slices.SortStableFunc(order, func(a, b uint32) int { return cmp.Compare(ws[a].off, ws[b].off) })
		if err := relScratch(); err != nil {
			return nil, nil, cmp.Or(relKeys(), err)
		}
		return order, relKeys, nil
	}
	for i, w := range ws {
		keys[i] = w.off<<shift | uint64(i)
	}
	sorted := radix.SortFrom(keys, scratch, shift, uint(bits.Len64(maxOff))+shift) // the indices ascend already
	rel, other := relKeys, relScratch
	if unsafe.SliceData(sorted) != unsafe.SliceData(keys) {
		rel, other = relScratch, relKeys
	}
	// order[j] lies in sorted[j/2], which the loop has read by then.
	order := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(sorted))), n)
	for j, k := range sorted {
		order[j] = uint32(k & (1<<shift - 1))
	}
	if err := other(); err != nil {
		return nil, nil, cmp.Or(rel(), err)
	}
	return order, rel, nil
}

// planExtents returns the extents that the writes ws cover, in ascending
// order, the writes that overlap, touch or lie at most hole bytes apart
// merged into one, the extent of each write, and release, which unmaps
// them (see mapped): call it once done with them, also after an error.
func planExtents(ws []logWrite, hole uint64) (ext []extent, extOf []uint32, release func() error, err error) {
	// Every array is a transient one of len(ws) (see mapped).
	var rels []func() error
	release = func() error {
		var err error
		for _, rel := range rels {
			err = cmp.Or(err, rel())
		}
		return err
	}
	order, rel, err := sortByOffset(ws)
	if err != nil {
		return nil, nil, release, err
	}
	rels = append(rels, rel)
	ext, rel, err = mapped[extent](len(ws)) // at most one an entry
	if err != nil {
		return nil, nil, release, err
	}
	rels = append(rels, rel)
	ext = ext[:0]
	if extOf, rel, err = mapped[uint32](len(ws)); err != nil {
		return nil, nil, release, err
	}
	rels = append(rels, rel)
	for _, i := range order {
		w := ws[i]
		end := w.off + w.n()
		if n := len(ext); n > 0 && w.off <= ext[n-1].hi+hole {
			ext[n-1].holes = ext[n-1].holes || w.off > ext[n-1].hi
			ext[n-1].hi = max(ext[n-1].hi, end)
		} else {
			ext = append(ext, extent{lo: w.off, hi: end})
		}
		extOf[i] = uint32(len(ext) - 1)
	}
	return ext, extOf, release, nil
}

// writeMerged calls rw.write with the bytes that the writes ws (entries
// of the log in r, its first size bytes, in log order), applied in order
// to the target, leave: extents in ascending order, later bytes over
// earlier ones, so that writing them (in any order) writes what writing
// ws in order would. Writes that overlap, touch or lie at most hole bytes
// apart are merged into one extent, whose bytes that no write wrote are
// the target's own (rw.fill), and which is cut into parts of at most
// batch bytes; with hole 0 no byte that no write wrote is written. It
// holds batch bytes and reads the log a piece at a time, once for each
// batch of merged bytes.
func writeMerged(r io.ReaderAt, size int64, ws []logWrite, batch, piece int, hole uint64, rw mergeIO) error {
	ext, extOf, release, err := planExtents(ws, hole)
	defer func() { _ = release() }()
	if err != nil {
		return err
	}
	var total uint64
	for _, x := range ext {
		total += x.hi - x.lo
	}
	// buf and win are transient too (see mapped).
	buf, relBuf, err := mapped[byte](int(min(uint64(batch), total)))
	if err != nil {
		return err
	}
	defer func() { _ = relBuf() }()
	buf = buf[:0]
	win, winAt := []byte(nil), int64(0) // the log bytes read last, from winAt
	relWin := func() error { return nil }
	defer func() { _ = relWin() }()
	// from is where the next batch starts: an offset in extent e.
	for e, from := 0, uint64(0); e < len(ext); {
		from = max(from, ext[e].lo)
		// The batch: extents e0..e1 from offset lo, in buf at starts.
		e0, lo := e, from
		var starts []int
		buf = buf[:0]
		for e < len(ext) && len(buf) < batch {
			from = max(from, ext[e].lo)
			starts = append(starts, len(buf))
			n := min(ext[e].hi-from, uint64(batch-len(buf)))
			buf = buf[:len(buf)+int(n)]
			if from += n; from == ext[e].hi {
				e++
			}
		}
		e1, hi := e0+len(starts)-1, from // the batch ends at hi in extent e1
		// part returns the batch's k-th part, of extent x: where it
		// starts in the region and its bytes in buf.
		part := func(k, x int) (uint64, []byte) {
			segLo, end := ext[x].lo, len(buf)
			if x == e0 {
				segLo = lo
			}
			if k+1 < len(starts) {
				end = starts[k+1]
			}
			return segLo, buf[starts[k]:end]
		}
		for k, x := 0, e0; x <= e1; k, x = k+1, x+1 {
			if ext[x].holes {
				if err := rw.fill(part(k, x)); err != nil {
					return err
				}
			}
		}
		for i, w := range ws {
			x := int(extOf[i])
			if x < e0 || x > e1 {
				continue
			}
			a, b := max(w.off, ext[x].lo), min(w.off+w.n(), ext[x].hi)
			if x == e0 {
				a = max(a, lo)
			}
			if x == e1 {
				b = min(b, hi)
			}
			if a >= b {
				continue
			}
			p := int64(w.pos() + a - w.off) // the log offset of byte a
			if p < winAt || p+int64(b-a) > winAt+int64(len(win)) {
				if need := max(min(piece, int(size-p)), int(b-a)); cap(win) < need {
					if err := relWin(); err != nil {
						return err
					}
					if win, relWin, err = mapped[byte](need); err != nil {
						relWin = func() error { return nil }
						return err
					}
				}
				win = win[:cap(win)]
				n, err := readAtFull(r, win, p, size)
				if err != nil {
					return err
				}
				win, winAt = win[:n], p
				if n < int(b-a) {
					return fmt.Errorf("%w: log entry at %d past the log's end", pm.ErrCorrupt, p)
				}
			}
			segLo := ext[x].lo
			if x == e0 {
				segLo = lo
			}
			at := starts[x-e0] + int(a-segLo)
			copy(buf[at:at+int(b-a)], win[p-winAt:])
		}
		for k, x := 0, e0; x <= e1; k, x = k+1, x+1 {
			if err := rw.write(part(k, x)); err != nil {
				return err
			}
		}
	}
	return nil
}

// pollCheckpoint collects a background checkpoint that has finished: its
// error, if any, becomes the sticky error and is returned.
func (b *Backend) pollCheckpoint() error {
	if b.ckpt == nil {
		return nil
	}
	select {
	case <-b.ckpt.done:
	default:
		return nil
	}
	err, free := b.ckpt.err, b.ckpt.free
	b.ckpt = nil
	if err != nil {
		return b.fail(err)
	}
	b.plog.free = free
	return nil
}

// waitCheckpoint waits for the background checkpoint, if one runs, and
// collects it.
func (b *Backend) waitCheckpoint() error {
	if b.ckpt == nil {
		return nil
	}
	<-b.ckpt.done
	return b.pollCheckpoint()
}

// WaitCheckpoint waits until the background checkpoint, if one runs, has
// written the region files and removed its log, and returns the sticky
// error, which its failure sets (wrapping ErrIO): the backend then
// refuses writes until it is reopened, and Open recovers from the logs.
func (b *Backend) WaitCheckpoint() error {
	if b.closed {
		return ErrClosed
	}
	if err := b.waitCheckpoint(); err != nil {
		return err
	}
	return b.usable()
}

// Crash makes what is pending durable (as a launch's end would), returns
// the durable image and closes the backend without a checkpoint, as a
// crash would leave it. In log mode the image is read back from the files
// and the log as Open would recover them. The files stay; Open the
// directory again to recover. (In unsafe-nosync mode, whose crash loses
// everything since Open, Crash writes the regions as Close does.)
func (b *Backend) Crash() (*pm.Image, error) {
	if b.closed {
		return nil, ErrClosed
	}
	switch b.mode {
	case ModeLog:
		err := b.commit()
		if werr := b.waitCheckpoint(); err == nil {
			err = werr // the region files are not in flux when read
		}
		if err != nil {
			b.release()
			return nil, err
		}
		img, err := b.recovered()
		b.release()
		return img, err
	case ModeDAX:
		b.flush()
	}
	img := b.durable()
	err := b.Close()
	return img, err
}

// durable returns the regions' bytes: in dax mode the mappings'; in log
// mode memory, equal to the files plus the log after a commit; in
// unsafe-nosync mode memory, which Close writes.
func (b *Backend) durable() *pm.Image {
	img := &pm.Image{}
	for _, r := range b.regs {
		img.Regions = append(img.Regions, pm.RegionImage{Name: r.name, Base: r.base, Data: slices.Clone(r.data)})
	}
	return img
}

// recovered reads the region files and replays the log onto them: the
// image Open would recover now.
func (b *Backend) recovered() (*pm.Image, error) {
	img := &pm.Image{}
	for _, r := range b.regs {
		d := make([]byte, r.size)
		if n, err := r.f.ReadAt(d, HeaderSize); err != nil && !(errors.Is(err, io.EOF) && uint64(n) == r.size) {
			return nil, fmt.Errorf("%w: read region %s: %w", ErrIO, r.name, err)
		}
		img.Regions = append(img.Regions, pm.RegionImage{Name: r.name, Base: r.base, Data: d})
	}
	for _, p := range []string{filepath.Join(b.dir, oldLogName), b.plog.path} {
		f, size, err := openLog(b.fs, p)
		if errors.Is(err, os.ErrNotExist) && p != b.plog.path {
			continue // no checkpoint left its log behind
		}
		if err != nil {
			return nil, fmt.Errorf("%w: read log: %w", ErrIO, err)
		}
		_, _, _, err = scanLogAt(f, size, scanPiece, func(e logEntry) error { return img.Write(e.addr, e.data) }, nil)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return img, nil
}

// Close makes what is pending durable, writes the region files from memory
// (a checkpoint), closes every file and releases the directory. It returns
// the sticky I/O error, if any, and then writes nothing: what the failed
// call left is recovered by the next Open. Every later call on the backend,
// or through a machine on it, returns ErrClosed (reads of the visible image
// keep working).
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	var err error
	switch b.mode {
	case ModeLog:
		if err = b.commit(); err == nil {
			err = b.checkpoint()
		}
	case ModeUnsafeNoSync:
		// Kernels' stores are not reported in this mode: write it all.
		for _, r := range b.regs {
			r.markDirty(0, r.size)
		}
		err = b.writeRegions(false)
	case ModeDAX:
		b.flush()
	}
	if err == nil && b.err != nil && errors.Is(b.err, ErrIO) {
		err = b.err
	}
	if err == nil && b.plog != nil && b.plog.free != "" {
		// Nothing in it is needed; Open would remove it.
		if rerr := b.fs.Remove(b.plog.free); rerr != nil {
			err = fmt.Errorf("%w: remove %s: %w", ErrIO, b.plog.free, rerr)
		}
		b.plog.free = ""
	}
	b.release()
	return err
}

// release closes every file and marks the backend closed.
func (b *Backend) release() {
	if b.ckpt != nil {
		<-b.ckpt.done // it writes the region files about to be closed
		b.ckpt = nil
	}
	if b.mem != nil {
		b.mem.ClosePM(ErrClosed) // no access reaches the images once they are unmapped
	}
	b.unmapAll()
	if b.plog != nil {
		b.plog.close()
	}
	b.closed = true
	if b.lock != nil {
		b.lock.Close()
	}
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
		r.mapping = nil
	}
	if err := freeImage(r.image); err != nil && b.err == nil {
		b.err = fmt.Errorf("%w: %s", err, r.name)
	}
	r.image, r.data, r.shadow = nil, nil, nil
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
