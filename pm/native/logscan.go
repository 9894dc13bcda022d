//go:build unix

package native

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/scopedpm/scopedpm/pm"
)

// scanPiece is how much of a log replay and checkpoints read at a time:
// they hold about this much of a log in memory (or its largest record),
// not the whole file.
const scanPiece = 1 << 20

// readAtFull reads len(p) bytes at off, or fewer at the end of r's size
// bytes; it returns how many it read.
func readAtFull(r io.ReaderAt, p []byte, off, size int64) (int, error) {
	p = p[:max(0, min(int64(len(p)), size-off))]
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // the file is shorter than it said
	}
	return n, err
}

// plausibleLen reports whether l can be a record's length field.
func plausibleLen(l uint32) bool {
	return l >= recHeaderSize && l%8 == 0 && l <= maxRecordBytes
}

// scanLogAt is scanLog over the first size bytes of r, read piece bytes
// at a time (more for a record larger than a piece), so that it holds
// about one piece in memory. The entries apply gets alias a buffer that
// is reused once flush has returned: flush, when not nil, is called with
// the bytes decoded since its last call and the log offset of their first
// byte, after apply has had all their entries and before they are
// dropped. An entry's pos is its log offset. A read error wraps ErrIO.
func scanLogAt(r io.ReaderAt, size int64, piece int, apply func(e logEntry) error, flush func(b []byte, at int64) error) (gen uint64, end int64, records int, err error) {
	hdr := make([]byte, min(size, logHeaderSize))
	if _, err := readAtFull(r, hdr, 0, size); err != nil {
		return 0, 0, 0, fmt.Errorf("%w: read log header: %w", ErrIO, err)
	}
	if gen, err = decodeLogHeader(hdr); err != nil {
		return 0, 0, 0, err
	}
	// The pieces live in a mapping (see mapped): a checkpoint's scan
	// would otherwise hold a piece of garbage-collected heap while it
	// runs, which raises the collector's goal by twice as much.
	buf, release, err := mapped[byte](int(min(int64(piece), size)))
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		if rerr := release(); err == nil && rerr != nil {
			err = rerr
		}
	}()
	buf = buf[:0]
	var (
		base = int64(logHeaderSize) // log offset of buf[0]
		cur  int                    // start of the next record in buf
		ents []logEntry
		want = uint64(1)
	)
	done := func() error {
		if flush == nil || cur == 0 {
			return nil
		}
		return flush(buf[:cur], base)
	}
	// fill makes buf hold at least n bytes from cur, or every byte of the
	// log after it: it flushes and drops what is decoded, then reads a
	// piece or more.
	fill := func(n int) error {
		have := len(buf) - cur
		left := size - base - int64(len(buf))
		if have >= n || left == 0 {
			return nil
		}
		if err := done(); err != nil {
			return err
		}
		copy(buf, buf[cur:])
		buf, base, cur = buf[:have], base+int64(cur), 0
		more := int(min(int64(max(n, piece)-have), left))
		if cap(buf) < have+more {
			nb, nrel, err := mapped[byte](have + more)
			if err != nil {
				return err
			}
			copy(nb, buf[:have])
			if err := release(); err != nil {
				_ = nrel()
				return err
			}
			buf, release = nb[:have], nrel
		}
		buf = buf[:have+more]
		if _, err := readAtFull(r, buf[have:], base+int64(have), size); err != nil {
			return fmt.Errorf("%w: read log: %w", ErrIO, err)
		}
		return nil
	}
	for base+int64(cur) < size {
		if err := fill(recHeaderSize); err != nil {
			return 0, 0, 0, err
		}
		if rem := buf[cur:]; len(rem) >= recHeaderSize {
			l := binary.LittleEndian.Uint32(rem[4:])
			if plausibleLen(l) && binary.LittleEndian.Uint64(rem[8:]) == gen {
				if err := fill(int(l)); err != nil {
					return 0, 0, 0, err
				}
			}
		}
		var n int
		var seq uint64
		n, seq, ents, err = decodeRecordInto(buf[cur:], gen, ents)
		off := base + int64(cur)
		if errors.Is(err, errBadRecord) {
			o, found, err := validRecordAfter(r, size, off, gen, piece)
			if err != nil {
				return 0, 0, 0, err
			}
			if found {
				return 0, 0, 0, fmt.Errorf("%w: log record at offset %d is damaged but a valid record follows at %d", pm.ErrCorrupt, off, o)
			}
			if err := done(); err != nil {
				return 0, 0, 0, err
			}
			return gen, off, records, nil
		}
		if err != nil {
			return 0, 0, 0, err
		}
		if seq != want {
			return 0, 0, 0, fmt.Errorf("%w: log record at offset %d has sequence number %d, want %d", pm.ErrCorrupt, off, seq, want)
		}
		for _, e := range ents {
			e.pos += int(off)
			if err := apply(e); err != nil {
				return 0, 0, 0, err
			}
		}
		want++
		records++
		cur += n
	}
	if err := done(); err != nil {
		return 0, 0, 0, err
	}
	return gen, base + int64(cur), records, nil
}

// validRecordAfter reports whether a valid record of generation gen
// starts at an 8-aligned offset after off in the first size bytes of r,
// and where: a bad record before a good one is damage, not a torn tail.
func validRecordAfter(r io.ReaderAt, size, off int64, gen uint64, piece int) (int64, bool, error) {
	// No larger than what follows off (often only a zeroed tail).
	piece = int(min(int64(piece), (size-off+7)&^7))
	piece = max(piece&^7, 2*recHeaderSize)
	step := int64(piece - recHeaderSize) // pieces overlap by a header
	b := make([]byte, piece)
	for s := off + 8; s+recHeaderSize <= size; s += step {
		n, err := readAtFull(r, b, s, size)
		if err != nil {
			return 0, false, fmt.Errorf("%w: read log: %w", ErrIO, err)
		}
		for p := 0; p+recHeaderSize <= n && int64(p) < step; p += 8 {
			h := b[p:]
			l := binary.LittleEndian.Uint32(h[4:])
			if !plausibleLen(l) || binary.LittleEndian.Uint64(h[8:]) != gen || s+int64(p)+int64(l) > size {
				continue
			}
			rec := h
			if p+int(l) > n {
				rec = make([]byte, l)
				if _, err := readAtFull(r, rec, s+int64(p), size); err != nil {
					return 0, false, fmt.Errorf("%w: read log: %w", ErrIO, err)
				}
			}
			if _, _, _, err := decodeRecord(rec, gen); err == nil {
				return s + int64(p), true, nil
			}
		}
	}
	return 0, false, nil
}

// zeroFrom reports whether the bytes of r from off to size are all zero.
func zeroFrom(r io.ReaderAt, off, size int64) (bool, error) {
	b := make([]byte, min(scanPiece, max(0, size-off)))
	for ; off < size; off += int64(len(b)) {
		n, err := readAtFull(r, b, off, size)
		if err != nil {
			return false, fmt.Errorf("%w: read log: %w", ErrIO, err)
		}
		if !allZero(b[:n]) {
			return false, nil
		}
	}
	return true, nil
}

// openLog opens the log at path for reading and returns it with its
// size; a missing log is an error wrapping os.ErrNotExist.
func openLog(fs FS, path string) (File, int64, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}
