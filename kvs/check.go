package kvs

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxProblems bounds the problems Contents reports.
const maxProblems = 32

// Contents reads the whole table from the host and returns its pairs after
// checking the store's invariant: no batch is active and the log is empty
// (else ErrNeedsRecovery); every key sits in one of its two candidate
// buckets, so a lookup finds it; and no key is stored twice (else
// ErrCorrupt, listing the problems found). On a closed store it returns
// ErrClosed.
func (s *Store) Contents() (map[uint32]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contents()
}

// contents is Contents; the caller holds s.mu.
func (s *Store) contents() (map[uint32]uint64, error) {
	if s.closed {
		return nil, s.closedErr()
	}
	ok, err := s.clean()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: a batch is active or the log holds entries", ErrNeedsRecovery)
	}
	const chunk = 8192
	buf := make([]byte, chunk*BucketBytes)
	out := map[uint32]uint64{}
	where := map[uint32]uint64{}
	var errs []error
	for b0 := uint64(0); b0 < s.h.buckets && len(errs) < maxProblems; b0 += chunk {
		n := min(chunk, s.h.buckets-b0)
		if err := s.m.CopyOut(s.bucketAddr(b0), buf[:n*BucketBytes]); err != nil {
			return nil, err
		}
		for i := range n {
			bk := buf[i*BucketBytes : (i+1)*BucketBytes]
			b := b0 + i
			for w := range Ways {
				key := binary.LittleEndian.Uint32(bk[sigOff+4*w:])
				if key == 0 {
					continue
				}
				val := binary.LittleEndian.Uint64(bk[valOff+8*w:])
				if c1, c2 := candidates(key, s.h.buckets); b != c1 && b != c2 {
					errs = append(errs, fmt.Errorf("%w: key %d in bucket %d way %d, not in its buckets %d or %d", ErrCorrupt, key, b, w, c1, c2))
				}
				if prev, dup := where[key]; dup {
					errs = append(errs, fmt.Errorf("%w: key %d twice, in buckets %d and %d", ErrCorrupt, key, prev, b))
				}
				where[key], out[key] = b, val
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Check verifies the store's invariant (see Contents).
func (s *Store) Check() error {
	_, err := s.Contents()
	return err
}

// Len returns the number of keys stored.
func (s *Store) Len() (int, error) {
	c, err := s.Contents()
	return len(c), err
}
