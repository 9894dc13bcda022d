// Package writerkeys checks what concurrent test writers left in an
// ordered uint64 store: writer w puts keys w<<32|1, w<<32|2, ... in order,
// each with its low half as the value, so a store that keeps whole writes
// in order holds a prefix of each writer's keys.
package writerkeys

import (
	"fmt"
	"math"
)

// Scan is an ordered store's scan of the keys in [lo, hi], as btree.DB's.
type Scan func(lo, hi uint64, fn func(k, v uint64) bool) error

// Prefixes returns how many of each of writers' keys scan holds; it fails
// unless they are each writer's first keys, each with its value, and no
// key of another writer.
func Prefixes(scan Scan, writers int) ([]uint64, error) {
	n := make([]uint64, writers)
	var bad error
	err := scan(0, math.MaxUint64, func(k, v uint64) bool {
		w, i := k>>32, k&math.MaxUint32
		if w >= uint64(writers) || i != n[w]+1 || v != i {
			bad = fmt.Errorf("key %d:%d (value %d) after %d keys of writer %d", w, i, v, n[min(w, uint64(writers)-1)], w)
			return false
		}
		n[w]++
		return true
	})
	if err == nil {
		err = bad
	}
	return n, err
}
