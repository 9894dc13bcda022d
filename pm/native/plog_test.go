//go:build unix

package native

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

func TestRecordRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		ents []logEntry
	}{
		{"one word", []logEntry{{addr: 1<<pm.OffsetBits + 8, data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}},
		{"odd sizes", []logEntry{{addr: 1<<pm.OffsetBits + 3, data: []byte{9}}, {addr: 2 << pm.OffsetBits, data: []byte("abcdefghijk")}}},
		{"coalesced", []logEntry{{addr: 1 << pm.OffsetBits, data: []byte("0123")}, {addr: 1<<pm.OffsetBits + 4, data: []byte("4567")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p []byte
			last := -1
			for _, e := range c.ents {
				p, last = appendEntry(p, last, e.addr, e.data)
			}
			rec := encodeRecord(nil, 7, 3, p)
			require.Zero(t, len(rec)%8)
			n, seq, ents, err := decodeRecord(rec, 7)
			require.NoError(t, err)
			require.Equal(t, len(rec), n)
			require.Equal(t, uint64(3), seq)
			img := map[pm.Addr]byte{}
			for _, e := range ents {
				for i, x := range e.data {
					img[e.addr.Add(uint64(i))] = x
				}
			}
			for _, e := range c.ents {
				for i, x := range e.data {
					require.Equal(t, x, img[e.addr.Add(uint64(i))])
				}
			}
			if c.name == "coalesced" {
				require.Len(t, ents, 1)
			}
			_, _, _, err = decodeRecord(rec, 8)
			require.ErrorIs(t, err, errBadRecord, "another generation")
			for i := range rec {
				bad := append([]byte(nil), rec...)
				bad[i] ^= 0x40
				_, _, _, err := decodeRecord(bad, 7)
				require.Error(t, err, "flipped byte %d", i)
			}
		})
	}
}

// FuzzLogRecord: any bytes, as one record or as a whole log file, decode
// without a panic to entries inside the input or to an error; a record
// that decodes re-encodes to the same bytes.
func FuzzLogRecord(f *testing.F) {
	p, _ := appendEntry(nil, -1, 1<<pm.OffsetBits, []byte("persist!"))
	good := encodeRecord(nil, 1, 1, p)
	f.Add(good)
	f.Add(good[:20])
	f.Add(append(encodeLogHeader(1), good...))
	three := encodeLogHeader(1)
	for seq := uint64(1); seq <= 3; seq++ {
		three = encodeRecord(three, 1, seq, p)
	}
	f.Add(append(three, make([]byte, 40)...))
	f.Add(three[:len(three)-5])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, seq, ents, err := decodeRecord(b, 1)
		if err == nil {
			require.LessOrEqual(t, n, len(b))
			var payload []byte
			last := -1
			for _, e := range ents {
				require.NotEmpty(t, e.data)
				payload, last = appendEntry(payload, last, e.addr, e.data)
				last = -1 // no coalescing: reproduce the entries as they are
			}
			require.Equal(t, b[:n], encodeRecord(nil, 1, seq, payload))
		}
		type ent struct {
			addr pm.Addr
			data string
			pos  int
		}
		var whole []ent
		gen, end, records, err := scanLog(b, func(e logEntry) error {
			require.NotEmpty(t, e.data)
			require.Equal(t, string(b[e.pos:e.pos+len(e.data)]), string(e.data), "pos is the log offset")
			whole = append(whole, ent{e.addr, string(e.data), e.pos})
			return nil
		})
		if err == nil {
			require.LessOrEqual(t, end, len(b))
		}
		// Read in small pieces, the log decodes to the same entries,
		// prefix and error, and the pieces flushed cover what was decoded.
		for _, piece := range []int{1, 24, 40, 200} {
			var got []ent
			covered := int64(logHeaderSize)
			g, e, n, err2 := scanLogAt(bytes.NewReader(b), int64(len(b)), piece, func(e logEntry) error {
				got = append(got, ent{e.addr, string(e.data), e.pos})
				return nil
			}, func(p []byte, at int64) error {
				require.Equal(t, covered, at, "pieces in order, none skipped")
				require.Equal(t, b[at:at+int64(len(p))], p)
				covered += int64(len(p))
				return nil
			})
			require.Equal(t, err == nil, err2 == nil, "piece %d: %v / %v", piece, err, err2)
			if err == nil {
				require.Equal(t, []any{gen, int64(end), records, whole}, []any{g, e, n, got}, "piece %d", piece)
				require.Equal(t, e, covered, "piece %d: flushed up to the end", piece)
			}
		}
	})
}

// writeLog writes a log file of generation 1 whose records each set one
// word of region index 1, and returns the records' offsets.
func writeLog(t *testing.T, path string, vals ...uint64) []int {
	t.Helper()
	b := encodeLogHeader(1)
	var offs []int
	for i, v := range vals {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], v)
		p, _ := appendEntry(nil, -1, pm.Addr(1<<pm.OffsetBits+8*uint64(i)), w[:])
		offs = append(offs, len(b))
		b = encodeRecord(b, 1, uint64(i+1), p)
	}
	f, err := OSFS().OpenFile(path, 0o2|0o100|0o1000, 0o644) // O_RDWR|O_CREATE|O_TRUNC
	require.NoError(t, err)
	_, err = f.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return offs
}

// Open replays the log's valid prefix: a torn or damaged last record is
// dropped, a damaged record with a valid one after it is corruption.
func TestLogRecovery(t *testing.T) {
	cases := []struct {
		name   string
		damage func(b []byte, offs []int) []byte
		want   []uint64 // recovered words, or nil for an error
		errs   []error
	}{
		{"intact", func(b []byte, _ []int) []byte { return b }, []uint64{11, 22, 33}, nil},
		{"zeroed chunk after the records", func(b []byte, _ []int) []byte { return append(b, make([]byte, 4096)...) }, []uint64{11, 22, 33}, nil},
		{"torn last record in a zeroed chunk", func(b []byte, offs []int) []byte { clear(b[offs[2]+16:]); return append(b, make([]byte, 4096)...) }, []uint64{11, 22, 0}, nil},
		{"torn last record", func(b []byte, offs []int) []byte { return b[:offs[2]+20] }, []uint64{11, 22, 0}, nil},
		{"last record's payload flipped", func(b []byte, offs []int) []byte { b[offs[2]+30] ^= 1; return b }, []uint64{11, 22, 0}, nil},
		{"zeroed tail", func(b []byte, offs []int) []byte { clear(b[offs[1]:]); return b }, []uint64{11, 0, 0}, nil},
		{"middle record flipped", func(b []byte, offs []int) []byte { b[offs[1]+30] ^= 1; return b }, nil, []error{pm.ErrCorrupt}},
		{"middle record's length flipped", func(b []byte, offs []int) []byte { b[offs[1]+4] ^= 8; return b }, nil, []error{pm.ErrCorrupt}},
		{"bad log header", func(b []byte, _ []int) []byte { b[17] ^= 1; return b }, nil, []error{pm.ErrCorrupt}},
		{"foreign log", func(b []byte, _ []int) []byte { copy(b, "%PDF-1.7"); return b }, nil, []error{pm.ErrCorrupt, ErrForeign}},
		{"empty log file", func([]byte, []int) []byte { return nil }, nil, []error{pm.ErrCorrupt}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			be, err := Open(dir, Options{Mode: ModeLog})
			require.NoError(t, err)
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			r, err := m.CreateRegion("r", 64)
			require.NoError(t, err)
			require.Equal(t, pm.Addr(1<<pm.OffsetBits), r.Base)
			require.NoError(t, be.Close())
			path := filepath.Join(dir, logName)
			offs := writeLog(t, path, 11, 22, 33)
			raw, err := readAll(OSFS(), path)
			require.NoError(t, err)
			f, err := OSFS().OpenFile(path, 0o2|0o1000, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(c.damage(raw, offs), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())

			be, err = Open(dir, Options{Mode: ModeLog})
			if c.want == nil {
				require.Error(t, err)
				for _, e := range c.errs {
					require.ErrorIs(t, err, e)
				}
				t.Log(err)
				return
			}
			require.NoError(t, err)
			defer be.Close()
			d := be.region("r").data
			for i, w := range c.want {
				require.Equal(t, w, binary.LittleEndian.Uint64(d[8*i:]), "word %d", i)
			}
			// The log was replayed into the region file and restarted.
			require.Equal(t, int64(logHeaderSize), be.plog.size())
		})
	}
}

// Commits from concurrent goroutines share syncs: while one sync runs
// (slowed down here), every caller that arrives waits for the next one,
// which covers them all; every payload is durable afterwards.
func TestGroupCommitConcurrent(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	syncs := 0
	fs := InjectFS(OSFS(), InjectorFunc(func(op FSOp, path string) error {
		if op == FSSync && strings.HasPrefix(filepath.Base(path), logName) { // LOG.tmp, renamed to LOG
			mu.Lock()
			syncs++
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}))
	l := newPlog(fs, filepath.Join(dir, logName))
	require.NoError(t, l.create(dir, 1))
	mu.Lock()
	syncs = 0
	mu.Unlock()
	const callers = 16
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], uint64(i+1))
			p, _ := appendEntry(nil, -1, pm.Addr(1<<pm.OffsetBits+8*uint64(i)), w[:])
			errs[i] = l.commit(p)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "caller %d", i)
	}
	require.NoError(t, l.close())
	t.Logf("%d concurrent commits, %d syncs of the log", callers, syncs)
	require.Less(t, syncs, callers/2, "callers must share syncs")
	require.GreaterOrEqual(t, syncs, 1)
	raw, err := readAll(OSFS(), filepath.Join(dir, logName))
	require.NoError(t, err)
	got := map[pm.Addr]uint64{}
	_, end, records, err := scanLog(raw, func(e logEntry) error {
		got[e.addr] = binary.LittleEndian.Uint64(e.data)
		return nil
	})
	require.NoError(t, err)
	require.True(t, allZero(raw[end:]), "only zeros after the records")
	require.Equal(t, syncs, records, "one record per sync")
	for i := range callers {
		require.Equal(t, uint64(i+1), got[pm.Addr(1<<pm.OffsetBits+8*uint64(i))], fmt.Sprint("caller ", i))
	}
}

// readAll reads a whole file through fs.
func readAll(fs FS, path string) ([]byte, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b, nil
}

// stage takes a payload's buffer (without copying it when nothing is
// pending), and takeBuf hands back buffers the log has written from: a
// writer that waits before it builds the next payload uses one buffer, one
// that builds the next payload before it waits for the last (as
// DeferAsync's callers may) two. Some writers commit a buffer of their
// own, which the log must not keep. No writer may get a buffer the log
// still writes from or another writer fills.
func TestStageBuffers(t *testing.T) {
	word := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	addr := func(g, round int) pm.Addr { return pm.Addr(1<<pm.OffsetBits + 8*uint64(g*1000+round)) }
	for _, tc := range []struct {
		writers  int
		pipeline bool // build the next payload before waiting for the last
		commits  bool // every third round of each writer is a commit of its own buffer
		arrays   int  // the most buffers one writer may use in steady state (0: any)
	}{{1, false, false, 1}, {1, true, false, 2}, {4, true, false, 0}, {4, true, true, 0}, {4, false, true, 0}} {
		t.Run(fmt.Sprintf("writers=%d,pipeline=%v,commits=%v", tc.writers, tc.pipeline, tc.commits), func(t *testing.T) {
			dir := t.TempDir()
			l := newPlog(OSFS(), filepath.Join(dir, logName))
			require.NoError(t, l.create(dir, 1))
			const rounds = 200
			arrays := make([]map[*byte]bool, tc.writers)
			errs := make([]error, tc.writers)
			var wg sync.WaitGroup
			for g := range tc.writers {
				arrays[g] = map[*byte]bool{}
				wg.Go(func() {
					var own []byte
					wait := func() error { return nil }
					for round := range rounds {
						entry := word(uint64(g<<32 | round))
						if tc.commits && round%3 == 2 {
							own, _ = appendEntry(own[:0], -1, addr(g, round), entry)
							if err := l.commit(own); err != nil {
								errs[g] = err
								return
							}
							own = append(own[:0], make([]byte, 64)...) // the caller's again
							continue
						}
						buf, _ := appendEntry(l.takeBuf(), -1, addr(g, round), entry)
						if round >= rounds/2 { // the steady state: appends have grown the buffers
							arrays[g][&buf[:1][0]] = true
						}
						my := l.stage(buf)
						if !tc.pipeline {
							if err := l.wait(my); err != nil {
								errs[g] = err
								return
							}
							continue
						}
						if err := wait(); err != nil {
							errs[g] = err
							return
						}
						wait = func() error { return l.wait(my) }
					}
					errs[g] = wait()
				})
			}
			wg.Wait()
			for g, err := range errs {
				require.NoError(t, err, "writer %d", g)
			}
			if tc.arrays > 0 {
				require.LessOrEqual(t, len(arrays[0]), tc.arrays, "payload buffers of one writer")
			}
			require.NoError(t, l.close())
			raw, err := readAll(OSFS(), filepath.Join(dir, logName))
			require.NoError(t, err)
			got := map[pm.Addr]uint64{}
			_, _, _, err = scanLog(raw, func(e logEntry) error {
				got[e.addr] = binary.LittleEndian.Uint64(e.data)
				return nil
			})
			require.NoError(t, err)
			require.Len(t, got, tc.writers*rounds)
			for g := range tc.writers {
				for round := range rounds {
					require.Equal(t, uint64(g<<32|round), got[addr(g, round)], "writer %d round %d", g, round)
				}
			}
		})
	}
}

// Concurrent writers whose payloads, merged, would pass a record's
// limit (lowered here to 400 bytes) get records of at most that much,
// each payload whole in one of them, and every payload replays. A payload
// over the limit on its own fails the log instead of writing a record that
// replay would drop.
func TestRecordLimit(t *testing.T) {
	const writers, rounds, limit = 4, 100, 400
	dir := t.TempDir()
	l := newPlog(OSFS(), filepath.Join(dir, logName))
	l.maxPayload = limit
	require.NoError(t, l.create(dir, 1))
	addr := func(g, round, k int) pm.Addr {
		return pm.Addr(1<<pm.OffsetBits + 8*uint64(g*100_000+round*10+k))
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for g := range writers {
		wg.Go(func() {
			for round := range rounds {
				// 3 entries of 40 bytes: 120 a payload, so that
				// at most 3 fit a record.
				var p []byte
				last := -1
				for k := range 3 {
					data := make([]byte, 24)
					binary.LittleEndian.PutUint64(data, uint64(g<<32|round<<8|k))
					p, last = appendEntry(p, last, addr(g, round, 2*k), data)
				}
				if errs[g] = l.wait(l.stage(p)); errs[g] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for g, err := range errs {
		require.NoError(t, err, "writer %d", g)
	}
	require.NoError(t, l.close())
	raw, err := readAll(OSFS(), filepath.Join(dir, logName))
	require.NoError(t, err)
	records, merged := 0, 0
	for pos := logHeaderSize; pos < len(raw); {
		n, _, ents, err := decodeRecord(raw[pos:], 1)
		if err != nil {
			break // the zeroed end
		}
		require.LessOrEqual(t, n-recHeaderSize, limit, "record %d", records)
		require.Zero(t, len(ents)%3, "record %d: a payload cut", records)
		records++
		if len(ents) > 3 {
			merged++
		}
		pos += n
	}
	got := 0
	_, _, _, err = scanLog(raw, func(e logEntry) error {
		got++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, writers*rounds*3, got, "every entry replays")
	t.Logf("%d records, %d of several payloads", records, merged)

	// A payload over the limit alone: the log fails, and writes nothing.
	l2 := newPlog(OSFS(), filepath.Join(t.TempDir(), logName))
	l2.maxPayload = 16
	require.NoError(t, l2.create(filepath.Dir(l2.path), 1))
	p, _ := appendEntry(nil, -1, addr(0, 0, 0), make([]byte, 8))
	p, _ = appendEntry(p, -1, addr(0, 0, 2), make([]byte, 8))
	require.ErrorIs(t, l2.commit(p), ErrIO)
	require.NoError(t, l2.close())
}

// encodeRecord returns the record of payload for generation gen and
// sequence number seq, as plog writes it (header, then payload).
func encodeRecord(dst []byte, gen, seq uint64, payload []byte) []byte {
	h := recordHeader(gen, seq, payload)
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}
