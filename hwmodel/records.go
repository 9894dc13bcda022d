package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// record is one line's part of a persist: where it goes, its size, and the
// flush entry that makes it durable. Its bytes' place in the log is kept
// beside it (recordLog.offs), only where the log keeps bytes: 16 bytes a
// record, not 24, in the millions of records a timing run logs.
type record struct {
	addr  pm.Addr
	size  uint32
	entry int32 // -1 until the instruction is timed
}

// Chunk sizes of a recordLog: 4,096 records (64 KiB) and 64 KiB of bytes.
const (
	recChunkBits  = 12
	dataChunkBits = 16
)

// recordLog is the append-only log of a launch's persist records and their
// bytes. It grows by whole chunks, which it keeps across reset, so that
// appending never copies what is already logged (a launch logs millions of
// records at paper scale; a slice grown by append would copy each about
// twice and leave the garbage collector the old arrays).
type recordLog struct {
	recs  [][]record
	offs  [][]uint32 // per record kept with its bytes, where they start in data
	n     int
	data  [][]byte
	dataN uint64 // offset of the next free byte: chunk<<dataChunkBits | offset
}

// len returns the number of records.
func (l *recordLog) len() int { return l.n }

// at returns record i, which must be below len.
func (l *recordLog) at(i int) *record {
	return &l.recs[i>>recChunkBits][i&(1<<recChunkBits-1)]
}

// add appends a record of the given bytes (at most a line, never more than
// a chunk) at addr; without keep it logs their size alone (bytes must not
// be asked for it: KeepNoImage).
func (l *recordLog) add(addr pm.Addr, b []byte, keep bool) {
	c, i := l.n>>recChunkBits, l.n&(1<<recChunkBits-1)
	if c == len(l.recs) {
		l.recs = append(l.recs, make([]record, 1<<recChunkBits))
	}
	l.recs[c][i] = record{addr: addr, size: uint32(len(b)), entry: -1}
	l.n++
	if !keep {
		return
	}
	for c >= len(l.offs) {
		l.offs = append(l.offs, nil)
	}
	if l.offs[c] == nil {
		l.offs[c] = make([]uint32, 1<<recChunkBits)
	}
	const chunk = 1 << dataChunkBits
	if l.dataN&(chunk-1)+uint64(len(b)) > chunk {
		l.dataN = (l.dataN>>dataChunkBits + 1) << dataChunkBits // next chunk
	}
	d := int(l.dataN >> dataChunkBits)
	if d == len(l.data) {
		l.data = append(l.data, make([]byte, chunk))
	}
	copy(l.data[d][l.dataN&(chunk-1):], b)
	l.offs[c][i] = uint32(l.dataN)
	l.dataN += uint64(len(b))
}

// bytes returns the bytes of record i, which the log must have kept.
func (l *recordLog) bytes(i int) []byte {
	off := l.offs[i>>recChunkBits][i&(1<<recChunkBits-1)]
	o := off & (1<<dataChunkBits - 1)
	return l.data[off>>dataChunkBits][o : o+l.at(i).size]
}

// reset empties the log and keeps its chunks for reuse.
func (l *recordLog) reset() { l.n, l.dataN = 0, 0 }

// entChunkBits sizes an entryLog's chunks: 4,096 entries (224 KiB).
const entChunkBits = 12

// entryLog is the append-only table of a launch's flush entries, grown by
// whole chunks that reset keeps, like recordLog: a paper-size run makes
// millions of entries (a CPU run one per write-back), and a slice grown by
// append would copy each about twice.
type entryLog struct {
	chunks [][]entry
	n      int
}

// len returns the number of entries.
func (l *entryLog) len() int { return l.n }

// at returns entry i, which must be below len.
func (l *entryLog) at(i int32) *entry {
	return &l.chunks[i>>entChunkBits][i&(1<<entChunkBits-1)]
}

// add appends e and returns its index.
func (l *entryLog) add(e entry) int32 {
	c := l.n >> entChunkBits
	if c == len(l.chunks) {
		l.chunks = append(l.chunks, make([]entry, 1<<entChunkBits))
	}
	l.chunks[c][l.n&(1<<entChunkBits-1)] = e
	l.n++
	return int32(l.n - 1)
}

// reset empties the table and keeps its chunks.
func (l *entryLog) reset() { l.n = 0 }
