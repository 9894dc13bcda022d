//go:build unix

package native

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/scopedpm/scopedpm/internal/seal"
	"github.com/scopedpm/scopedpm/pm"
)

// The persist log is the file LOG of the directory: a header, then records
// appended one per sync. All integers are little-endian and every record
// starts 8-byte aligned.
//
//	header (logHeaderSize bytes)
//	0   8  magic "SCPMLOG\x00"
//	8   4  format version (1)
//	12  4  zero
//	16  8  generation (bumped by every checkpoint)
//	24  4  CRC-32C of bytes 0..23
//	28  4  zero
//
//	record
//	0   4  CRC-32C of bytes 4..length-1
//	4   4  length in bytes, header included (a multiple of 8, >= 24)
//	8   8  generation (the header's)
//	16  8  sequence number (1, 2, ... within a generation)
//	24  .. entries: address (8), byte count n (4), zero (4), n bytes, zero
//	       padding to a multiple of 8
//
// A record is written and synced before the next one is written, so only
// the last record can be torn by a power failure. The file grows by
// zeroed chunks of logChunk bytes, written with the record that first
// needs them; zeros after the last record are not a record (generation
// 0 is never used), nor are the records of older generations that a
// recycled log (freeLogName) holds after its last record.
const (
	logName    = "LOG"
	oldLogName = "LOG.old" // a log a background checkpoint is writing to the region files
	// freeLogName: a log whose checkpoint finished, kept for the next log
	// to write over (as Pebble recycles its WAL files): that log's syncs
	// then overwrite written blocks and change no file size, which on a
	// journaling filesystem costs a journal commit each time the file
	// grows. Nothing in it is needed: Open removes it, and its records
	// are of older generations, which replay never takes for the new
	// log's.
	freeLogName    = "LOG.free"
	logMagic       = "SCPMLOG\x00"
	logVersion     = 1
	logHeaderSize  = 32
	recHeaderSize  = 24
	entHeaderSize  = 16
	maxRecordBytes = 1 << 30
	maxEntryBytes  = 1 << 20  // an entry's bytes, at most
	maxBatchBytes  = 64 << 20 // a record's payload is committed once it reaches this
	// logChunk: the log file grows by zeroed chunks of this size.
	logChunk = 256 << 10
)

// errBadRecord: the bytes at an offset are not a valid record (torn,
// corrupt or absent); replay decides which.
var errBadRecord = errors.New("native: bad log record")

func encodeLogHeader(gen uint64) []byte {
	b := make([]byte, logHeaderSize)
	copy(b, logMagic)
	binary.LittleEndian.PutUint32(b[8:], logVersion)
	binary.LittleEndian.PutUint64(b[16:], gen)
	binary.LittleEndian.PutUint32(b[24:], seal.Checksum(b[:24]))
	return b
}

func decodeLogHeader(b []byte) (uint64, error) {
	if len(b) < logHeaderSize {
		return 0, fmt.Errorf("%w: log header truncated: %d bytes", pm.ErrCorrupt, len(b))
	}
	if string(b[:8]) != logMagic {
		return 0, fmt.Errorf("%w: %w: log magic %q", pm.ErrCorrupt, ErrForeign, b[:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[24:]), seal.Checksum(b[:24]); got != want {
		return 0, fmt.Errorf("%w: log header checksum %#08x, computed %#08x", pm.ErrCorrupt, got, want)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != logVersion {
		return 0, fmt.Errorf("%w: %w: log version %d", pm.ErrCorrupt, ErrVersion, v)
	}
	return binary.LittleEndian.Uint64(b[16:]), nil
}

// logEntry is one decoded entry: n bytes at an address.
type logEntry struct {
	addr pm.Addr
	data []byte // aliases the record
	pos  int    // where data starts in the bytes decoded (scanLog: the log's)
}

// appendEntry appends an entry of data at a to a record payload. When
// the payload's last entry (at lastOff, or -1) ends at a, data extends it
// instead; it returns the offset of the entry that holds data.
func appendEntry(p []byte, lastOff int, a pm.Addr, data []byte) ([]byte, int) {
	if lastOff >= 0 {
		la := pm.Addr(binary.LittleEndian.Uint64(p[lastOff:]))
		ln := int(binary.LittleEndian.Uint32(p[lastOff+8:]))
		if la.Add(uint64(ln)) == a && ln+len(data) <= maxEntryBytes {
			p = p[:lastOff+entHeaderSize+ln] // drop the padding
			p = append(p, data...)
			binary.LittleEndian.PutUint32(p[lastOff+8:], uint32(ln+len(data)))
			return pad8(p), lastOff
		}
	}
	off := len(p)
	var h [entHeaderSize]byte
	binary.LittleEndian.PutUint64(h[:], uint64(a))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(data)))
	p = append(p, h[:]...)
	p = append(p, data...)
	return pad8(p), off
}

func pad8(p []byte) []byte {
	for len(p)%8 != 0 {
		p = append(p, 0)
	}
	return p
}

// recordHeader returns the header of payload's record for generation gen
// and sequence number seq: with the payload after it, the record.
func recordHeader(gen, seq uint64, payload []byte) [recHeaderSize]byte {
	var h [recHeaderSize]byte
	binary.LittleEndian.PutUint32(h[4:], uint32(recHeaderSize+len(payload)))
	binary.LittleEndian.PutUint64(h[8:], gen)
	binary.LittleEndian.PutUint64(h[16:], seq)
	binary.LittleEndian.PutUint32(h[0:], seal.Update(seal.Checksum(h[4:]), payload))
	return h
}

// decodeRecord decodes the record at the start of b for generation gen.
// It returns the record's length, sequence number and entries. Bytes that
// are not a whole record with a good checksum and generation give
// errBadRecord; a record whose checksum holds but whose entries do not
// parse is corrupt (pm.ErrCorrupt). It never panics and never returns an
// entry outside b.
func decodeRecord(b []byte, gen uint64) (n int, seq uint64, ents []logEntry, err error) {
	return decodeRecordInto(b, gen, nil)
}

// decodeRecordInto is decodeRecord appending the entries to ents[:0].
func decodeRecordInto(b []byte, gen uint64, ents []logEntry) (n int, seq uint64, _ []logEntry, err error) {
	ents = ents[:0]
	if len(b) < recHeaderSize {
		return 0, 0, nil, errBadRecord
	}
	l := binary.LittleEndian.Uint32(b[4:])
	if l < recHeaderSize || l%8 != 0 || uint64(l) > uint64(len(b)) || l > maxRecordBytes {
		return 0, 0, nil, errBadRecord
	}
	n = int(l)
	// The generation first: it is cheap, and scanLog tries every offset
	// of a damaged tail.
	if binary.LittleEndian.Uint64(b[8:]) != gen {
		return 0, 0, nil, errBadRecord
	}
	if binary.LittleEndian.Uint32(b) != seal.Checksum(b[4:n]) {
		return 0, 0, nil, errBadRecord
	}
	seq = binary.LittleEndian.Uint64(b[16:])
	p := b[recHeaderSize:n]
	pos := recHeaderSize
	for len(p) > 0 {
		if len(p) < entHeaderSize {
			return 0, 0, nil, fmt.Errorf("%w: log record %d: truncated entry", pm.ErrCorrupt, seq)
		}
		a := pm.Addr(binary.LittleEndian.Uint64(p))
		m := uint64(binary.LittleEndian.Uint32(p[8:]))
		if binary.LittleEndian.Uint32(p[12:]) != 0 || m == 0 || m > maxEntryBytes {
			return 0, 0, nil, fmt.Errorf("%w: log record %d: bad entry header", pm.ErrCorrupt, seq)
		}
		padded := (m + 7) &^ 7
		if padded > uint64(len(p)-entHeaderSize) {
			return 0, 0, nil, fmt.Errorf("%w: log record %d: entry of %d bytes overruns the record", pm.ErrCorrupt, seq, m)
		}
		ents = append(ents, logEntry{addr: a, data: p[entHeaderSize : entHeaderSize+m], pos: pos + entHeaderSize})
		p = p[entHeaderSize+padded:]
		pos += entHeaderSize + int(padded)
	}
	return n, seq, ents, nil
}

// scanLog decodes the records of a log file's contents (header included)
// and calls apply for each entry of each valid record, in order. A bad
// record with no valid record of the generation after it is a torn or
// corrupt tail, dropped: scanLog returns the offset where the valid prefix
// ends. A bad record followed by a valid one means a record that was synced
// has changed since: an error wrapping pm.ErrCorrupt. It is scanLogAt over
// bytes in memory.
func scanLog(b []byte, apply func(e logEntry) error) (gen uint64, end int, records int, err error) {
	gen, e, records, err := scanLogAt(bytes.NewReader(b), int64(len(b)), len(b), apply, nil)
	return gen, int(e), records, err
}

// plog writes the persist log. Commit is safe for concurrent use: callers
// that arrive while a sync is under way share the next one (group commit).
type plog struct {
	fs   FS
	path string

	mu      sync.Mutex
	cond    sync.Cond
	f       File
	gen     uint64
	off     int64  // end of the records written
	zeroEnd int64  // end of the file: from off to here zeros, or older generations' records (a recycled log)
	free    string // a log to recycle at the next rotate (freeLogName's path), or ""
	seq     uint64 // sequence number of the last record written
	pend    []byte // payload of the next record
	pendN   uint64 // batch number of the pending payload
	done    uint64 // every batch <= done is durable
	syncing bool
	err     error    // sticky: set by the first failed write or sync
	bufs    [][]byte // empty buffers for payloads (putBuf)
	syncs   uint64
	bytes   uint64
	onSync  func(off int64, rec []byte) // journal hook, called with mu held
	// maxPayload bounds a record's payload (maxRecordBytes less its
	// header, which replay accepts at most); tests lower it.
	maxPayload int
}

func newPlog(fs FS, path string) *plog {
	l := &plog{fs: fs, path: path, pendN: 1, bufs: make([][]byte, 0, 2), maxPayload: maxRecordBytes - recHeaderSize}
	l.cond.L = &l.mu
	return l
}

// create writes a new, empty log of generation gen under the log's name:
// a temporary file, synced, renamed over the old log, and the directory
// synced. The old log stays in place until the rename.
func (l *plog) create(dir string, gen uint64) error { return l.rotate(dir, gen, "") }

// rotate is create, except that when keep is not empty the old log is
// first renamed to keep instead of being replaced (both renames made
// durable by one sync of the directory): a background checkpoint then
// writes the region files from it and removes it, or leaves it as the
// free log, which the next rotate with keep reuses as the new log.
func (l *plog) rotate(dir string, gen uint64, keep string) error {
	tmp := l.path + ".tmp"
	var f File
	var size int64
	if keep != "" && l.free != "" {
		var err error
		if f, size, err = l.reuse(gen); err != nil {
			return err
		}
		tmp, l.free = l.free, ""
	}
	if f == nil {
		var err error
		f, err = l.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("%w: create log: %w", ErrIO, err)
		}
		first := append(encodeLogHeader(gen), make([]byte, logChunk-logHeaderSize)...)
		if _, err := f.WriteAt(first, 0); err != nil {
			f.Close()
			return fmt.Errorf("%w: write %s: %w", ErrIO, tmp, err)
		}
		size = logChunk
	}
	fail := func(what string, err error) error {
		f.Close()
		return fmt.Errorf("%w: %s %s: %w", ErrIO, what, tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fail("sync", err)
	}
	if keep != "" {
		if err := l.fs.Rename(l.path, keep); err != nil {
			return fail("rename", err)
		}
	}
	if err := l.fs.Rename(tmp, l.path); err != nil {
		return fail("rename", err)
	}
	if err := l.fs.SyncDir(dir); err != nil {
		f.Close()
		return fmt.Errorf("%w: sync directory %s: %w", ErrIO, dir, err)
	}
	l.mu.Lock()
	old := l.f
	l.f, l.gen, l.off, l.zeroEnd, l.seq = f, gen, logHeaderSize, size, 0
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// reuse opens the free log and writes the header of generation gen over
// its own; the records after it, of older generations, stay until the new
// log's records overwrite them. It returns the file and its size.
func (l *plog) reuse(gen uint64) (File, int64, error) {
	f, err := l.fs.OpenFile(l.free, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: open free log: %w", ErrIO, err)
	}
	st, err := f.Stat()
	if err == nil && st.Size() < logChunk {
		err = fmt.Errorf("%d bytes, shorter than a chunk", st.Size())
	}
	if err == nil {
		_, err = f.WriteAt(encodeLogHeader(gen), 0)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("%w: reuse free log %s: %w", ErrIO, l.free, err)
	}
	return f, st.Size() &^ 7, nil
}

// commit appends payload and returns when it and everything added before
// it are durable: one write and one sync of the log, shared by every
// caller that arrives while the previous sync runs. It returns the sticky
// error of the first failed write or sync.
func (l *plog) commit(payload []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.makeRoom(len(payload))
	if !l.syncing && len(l.pend) == 0 && len(payload) > 0 {
		// No sync under way and nothing pending: this caller leads, and
		// its payload is the whole record (no copy into pend).
		return l.waitLocked(l.pendN, payload)
	}
	return l.waitLocked(l.stageLocked(payload), nil)
}

// stage appends payload to the pending batch without writing it and
// returns the number of the batch that will hold it (when nothing is
// pending, the last batch, which may be in flight): wait for it. The log
// takes payload's buffer: when nothing is pending it becomes the pending
// batch (no copy), else its bytes are copied and the log keeps its room.
// The caller takes a buffer for its next payload with takeBuf once it needs
// one, by when a writer that waited has its record's buffer back: one
// writer's payloads take turns in one buffer, or two when it builds the
// next while the last is written (a copy at each step held three).
func (l *plog) stage(payload []byte) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.makeRoom(len(payload))
	if len(l.pend) == 0 && len(payload) > 0 {
		l.putBuf(l.pend)
		l.pend = payload
		return l.pendN
	}
	my := l.stageLocked(payload)
	l.putBuf(payload)
	return my
}

// makeRoom writes the pending batch first (and waits for it) when a
// payload of n bytes would make it larger than a record may be: replay
// takes a longer record for a torn one and drops it with every record
// after it. Each payload stays whole in one record, which DeferAtomic
// needs. Only many concurrent writers of near-64 MiB payloads get here.
func (l *plog) makeRoom(n int) {
	for len(l.pend) > 0 && len(l.pend)+n > l.maxPayload && l.err == nil {
		_ = l.waitLocked(l.pendN, nil) // an error is sticky: the caller's wait reports it
	}
}

// takeBuf returns an empty buffer for a payload: one the log has written
// from, or nil.
func (l *plog) takeBuf() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.getBuf()
}

func (l *plog) stageLocked(payload []byte) uint64 {
	if l.pend == nil && len(payload) > 0 {
		l.pend = l.getBuf()
	}
	l.pend = append(l.pend, payload...)
	if len(l.pend) == 0 {
		return l.pendN - 1
	}
	return l.pendN
}

// putBuf keeps b's room for a later payload (at most two such buffers).
func (l *plog) putBuf(b []byte) {
	if cap(b) > 0 && len(l.bufs) < cap(l.bufs) {
		l.bufs = append(l.bufs, b[:0])
	}
}

// getBuf returns a kept empty buffer, or nil.
func (l *plog) getBuf() []byte {
	n := len(l.bufs)
	if n == 0 {
		return nil
	}
	b := l.bufs[n-1]
	l.bufs[n-1] = nil
	l.bufs = l.bufs[:n-1]
	return b
}

// wait returns when batch my is durable, leading a sync when none is
// under way; callers that wait together share syncs. It returns the
// sticky error of the first failed write or sync.
func (l *plog) wait(my uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waitLocked(my, nil)
}

// waitLocked is wait with l.mu held; direct, if not nil, is the payload
// of the next record instead of pend (commit's lone caller).
func (l *plog) waitLocked(my uint64, direct []byte) error {
	for l.done < my && l.err == nil {
		if l.syncing {
			l.cond.Wait()
			continue
		}
		l.syncing = true
		batch := l.pendN
		l.pendN++
		l.seq++
		payload, fromPend := direct, direct == nil
		if fromPend {
			payload, l.pend = l.pend, nil // a stage after this takes a buffer
		}
		direct = nil
		h := recordHeader(l.gen, l.seq, payload)
		f, off, zeroEnd := l.f, l.off, l.zeroEnd
		n := int64(recHeaderSize + len(payload))
		l.mu.Unlock()
		var err error
		if len(payload) > l.maxPayload {
			// Never written: replay would drop it and what follows.
			err = fmt.Errorf("a record of %d bytes, more than %d", len(payload), l.maxPayload)
		} else {
			err = writeRecord(f, off, h[:], payload, &zeroEnd)
		}
		if err != nil {
			err = fmt.Errorf("%w: write log %s: %w", ErrIO, l.path, err)
		} else if err = f.Sync(); err != nil {
			err = fmt.Errorf("%w: sync log %s: %w", ErrIO, l.path, err)
		}
		l.mu.Lock()
		l.syncing = false
		if err != nil {
			l.err = err
		} else {
			l.off += n
			l.zeroEnd = zeroEnd
			l.done = batch
			l.syncs++
			l.bytes += uint64(n)
			if l.onSync != nil {
				l.onSync(off, append(h[:], payload...))
			}
		}
		if fromPend {
			l.putBuf(payload)
		}
		l.cond.Broadcast()
	}
	return l.err
}

// zeros is what a log grows by (logChunk bytes at most a write).
var zeros [logChunk]byte

// writeRecord writes a record, its header h and then its payload, at off
// in f. When it ends past *zeroEnd it also writes zeroed chunks up to the
// next multiple of logChunk and moves *zeroEnd there: later records then
// overwrite written blocks, whose sync need not change the file's size or
// extents.
func writeRecord(f File, off int64, h, payload []byte, zeroEnd *int64) error {
	if _, err := f.WriteAt(h, off); err != nil {
		return err
	}
	if _, err := f.WriteAt(payload, off+int64(len(h))); err != nil {
		return err
	}
	end := off + int64(len(h)+len(payload))
	if end <= *zeroEnd {
		return nil
	}
	grown := (end + logChunk - 1) / logChunk * logChunk
	if grown > end {
		if _, err := f.WriteAt(zeros[:grown-end], end); err != nil {
			return err
		}
	}
	*zeroEnd = grown
	return nil
}

// idle reports whether every batch staged so far is durable: nothing
// pending, no sync under way.
func (l *plog) idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pend) == 0 && l.done+1 >= l.pendN
}

// failed returns the sticky error.
func (l *plog) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// size returns the bytes of the log file so far.
func (l *plog) size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.off
}

func (l *plog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.syncing {
		l.cond.Wait()
	}
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
