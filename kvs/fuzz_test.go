package kvs

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeHeader: any bytes decode to a valid header or an error wrapping
// ErrCorrupt, never a panic, and a decoded header encodes back to the same
// magic and fields.
func FuzzDecodeHeader(f *testing.F) {
	f.Add(header{buckets: 64, batch: 32, block: 32, convParts: 4, log: LogHCL}.encode())
	f.Add(header{buckets: 1 << 20, batch: 1 << 10, block: 256, convParts: 64, log: LogConv}.encode())
	f.Add([]byte("GPKVS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		n := 8 + 8*nHeaderFld
		if !bytes.Equal(h.encode()[:n], b[:n]) {
			t.Fatalf("header %+v does not encode back to its fields", h)
		}
	})
}

// FuzzDecodeEntry: an undo entry decodes to a bucket and way in range or
// an error wrapping ErrCorrupt, and round-trips.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(3, 5, 0xabcd, 42), uint64(64))
	f.Add([]byte{1, 2, 3}, uint64(8))
	f.Fuzz(func(t *testing.T, b []byte, buckets uint64) {
		bucket, way, sig, val, err := decodeEntry(b, buckets)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if uint64(bucket) >= buckets || way < 0 || way >= Ways {
			t.Fatalf("entry for bucket %d way %d of %d buckets accepted", bucket, way, buckets)
		}
		if !bytes.Equal(encodeEntry(bucket, way, sig, val), b) {
			t.Fatal("entry does not encode back to its bytes")
		}
	})
}
