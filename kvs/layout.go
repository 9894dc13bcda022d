package kvs

import (
	"encoding/binary"
	"fmt"

	"github.com/scopedpm/scopedpm/internal/seal"
	"github.com/scopedpm/scopedpm/pm"
)

// Geometry of the table.
const (
	// Ways is the associativity: key-value pairs per bucket.
	Ways = 8
	// BucketBytes is the size and alignment of a bucket: one GPU cache
	// line holding Ways 4-byte signatures and Ways 8-byte values.
	BucketBytes = 128
	// MaxBuckets bounds the number of buckets of a table (a 32 GiB table).
	MaxBuckets = 1 << 28
	// MaxBatch bounds the requests of one batch.
	MaxBatch = 1 << 22

	sigOff    = 0           // signatures at the start of a bucket
	valOff    = 4 * Ways    // then the values
	headerOff = 0           // line 0 of the table region: the header
	flagOff   = BucketBytes // line 1: the transaction flag, alone on its line
	bucketOff = 2 * BucketBytes
	fullMask  = 1<<Ways - 1
)

// LogKind selects the undo log of a store.
type LogKind uint8

// Undo logs.
const (
	// LogHCL is GPM's hierarchical coalesced log: one lock-free slot per
	// thread of the batch grid.
	LogHCL LogKind = iota + 1
	// LogConv is a conventional log of partitions appended under locks.
	LogConv
)

// String returns "hcl" or "conv".
func (k LogKind) String() string {
	switch k {
	case LogHCL:
		return "hcl"
	case LogConv:
		return "conv"
	}
	return fmt.Sprintf("log(%d)", uint8(k))
}

// ParseLogKind returns the log kind named "hcl" or "conv".
func ParseLogKind(s string) (LogKind, error) {
	switch s {
	case "hcl":
		return LogHCL, nil
	case "conv":
		return LogConv, nil
	}
	return 0, fmt.Errorf("%w: log kind %q (want hcl or conv)", ErrBadArg, s)
}

// The header line: magic, then little-endian fields, then a CRC-32C of
// the bytes before it in the line's last 4 bytes. Written once, by Create.
const (
	magic      = "GPKVS\x00\x00\x01"
	nHeaderFld = 5
)

type header struct {
	buckets, batch, block, convParts uint64
	log                              LogKind
}

func (h header) encode() []byte {
	b := seal.New(magic, BucketBytes)
	seal.PutUint64s(b, 8, h.buckets, h.batch, h.block, h.convParts, uint64(h.log))
	seal.Seal(b)
	return b
}

func decodeHeader(b []byte) (header, error) {
	b, err := seal.Open(b, BucketBytes, magic)
	if err != nil {
		return header{}, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	f := seal.Uint64s(b, 8, nHeaderFld)
	h := header{buckets: f[0], batch: f[1], block: f[2], convParts: f[3], log: LogKind(f[4])}
	cfg := Config{Buckets: int(min(h.buckets, 1<<40)), MaxBatch: int(min(h.batch, 1<<40)), BlockThreads: int(min(h.block, 1<<40)),
		Log: h.log, ConvParts: int(min(h.convParts, 1<<40))}
	if err := cfg.validate(); err != nil {
		return header{}, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	return h, nil
}

// The transaction flag: the batch number in the high 63 bits and "active"
// in bit 0. Zero is a store that never ran a batch.
func flagWord(seq uint64, active bool) uint64 {
	w := seq << 1
	if active {
		w |= 1
	}
	return w
}

func flagActive(w uint64) bool { return w&1 == 1 }
func flagSeq(w uint64) uint64  { return w >> 1 }

// An undo entry: the bucket and way of the pair, its old signature and its
// old value (20 bytes; 7 HCL stripes with the log's trailer).
const entryBytes = 20

func encodeEntry(bucket uint32, way int, sig uint32, val uint64) []byte {
	return putEntry(make([]byte, entryBytes), bucket, way, sig, val)
}

// putEntry encodes an undo entry into b (entryBytes long) and returns b.
func putEntry(b []byte, bucket uint32, way int, sig uint32, val uint64) []byte {
	binary.LittleEndian.PutUint32(b, bucket)
	binary.LittleEndian.PutUint32(b[4:], uint32(way))
	binary.LittleEndian.PutUint32(b[8:], sig)
	binary.LittleEndian.PutUint64(b[12:], val)
	return b
}

func decodeEntry(b []byte, buckets uint64) (bucket uint32, way int, sig uint32, val uint64, err error) {
	if len(b) != entryBytes {
		return 0, 0, 0, 0, fmt.Errorf("%w: undo entry of %d bytes, want %d", ErrCorrupt, len(b), entryBytes)
	}
	bucket, w := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
	if uint64(bucket) >= buckets || w >= Ways {
		return 0, 0, 0, 0, fmt.Errorf("%w: undo entry for bucket %d way %d of %d buckets", ErrCorrupt, bucket, w, buckets)
	}
	return bucket, int(w), binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint64(b[12:]), nil
}

// mix is the splitmix64 finalizer: a cheap hash with full avalanche.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// candidates returns the two buckets of key in a table of n >= 2 buckets;
// they always differ.
func candidates(key uint32, n uint64) (uint64, uint64) {
	h := mix(uint64(key) + 0x9e3779b97f4a7c15)
	b1 := (h & 0xffffffff) % n
	b2 := (h >> 32) % n
	if b2 == b1 {
		b2 = (b1 + 1) % n
	}
	return b1, b2
}

func (s *Store) bucketAddr(b uint64) pm.Addr { return s.table.Base.Add(bucketOff + b*BucketBytes) }
func (s *Store) sigAddr(b uint64, w int) pm.Addr {
	return s.bucketAddr(b).Add(sigOff + 4*uint64(w))
}
func (s *Store) valAddr(b uint64, w int) pm.Addr {
	return s.bucketAddr(b).Add(valOff + 8*uint64(w))
}
func (s *Store) flagAddr() pm.Addr { return s.table.Base.Add(flagOff) }

func tableSize(buckets uint64) uint64 { return bucketOff + buckets*BucketBytes }

// CommitAddr returns the address of the store's one commit point: the
// 8-byte transaction flag whose persist completes a batch. A crash just
// before that persist is durable leaves the batch to be rolled back.
func (s *Store) CommitAddr() pm.Addr { return s.flagAddr() }
