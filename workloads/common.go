package workloads

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// ErrConfig is returned for a workload configuration that cannot run (a
// non-positive size, a shape the algorithm does not support).
var ErrConfig = errors.New("workloads: bad configuration")

// ErrFull is returned when the hashmap cannot place a key: both of its
// buckets are full and no eviction chain within the limit frees a slot.
var ErrFull = errors.New("workloads: hash table full")

// mustWorkload turns a constructor's error for a built-in size into a panic:
// the registered sizes are fixed and valid, so an error there is a broken
// internal invariant, not bad user input.
func mustWorkload[W any](w W, err error) W {
	if err != nil {
		panic(fmt.Sprintf("workloads: built-in size rejected: %v", err))
	}
	return w
}

// createFilled creates the PM region name of size bytes with every byte set
// to fill, and returns its base.
func createFilled(m *pm.Machine, name string, size int, fill byte) (pm.Addr, error) {
	rg, err := m.CreateRegion(name, uint64(size))
	if err != nil {
		return 0, err
	}
	if fill != 0 {
		b := make([]byte, size)
		for i := range b {
			b[i] = fill
		}
		if err := m.CopyIn(rg.Base, b); err != nil {
			return 0, err
		}
	}
	return rg.Base, nil
}

// createWords creates PM region name holding words, little-endian, 8
// bytes each.
func createWords(m *pm.Machine, name string, ws ...uint64) error {
	b := words(ws...)
	rg, err := m.CreateRegion(name, uint64(len(b)))
	if err != nil {
		return err
	}
	return m.CopyIn(rg.Base, b)
}

// words encodes little-endian 8-byte words.
func words(vs ...uint64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return b
}

// openRegions returns the bases of the named PM regions.
func openRegions(m *pm.Machine, names ...string) ([]pm.Addr, error) {
	out := make([]pm.Addr, len(names))
	for i, n := range names {
		rg, err := m.OpenRegion(n)
		if err != nil {
			return nil, err
		}
		out[i] = rg.Base
	}
	return out, nil
}

// readWords copies n little-endian words of size bytes (4 or 8) at a out of
// m's visible memory.
func readWords(m *pm.Machine, a pm.Addr, n, size int) ([]uint64, error) {
	buf := make([]byte, n*size)
	if err := m.Memory().Read(a, buf); err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = pm.GetLE(buf[i*size : (i+1)*size])
	}
	return out, nil
}

// errWord is a device-memory word a kernel sets (first writer wins) to
// 1+thread id when it finds the durable state inconsistent; the launch goes
// on so that no thread waits forever, and the host reports it afterwards.
type errWord struct{ a pm.Addr }

func newErrWord(m *pm.Machine) (errWord, error) {
	a, err := m.Alloc(pm.DeviceMem, 4)
	return errWord{a}, err
}

// set records that thread t found an inconsistency.
func (e errWord) set(t *scope.Thread) { t.AtomicCAS32(e.a, 0, uint32(t.ID()+1), pm.Device) }

// check returns an ErrInconsistent error naming the first thread that set
// the word, or nil.
func (e errWord) check(m *pm.Machine, what string) error {
	v, err := m.Memory().Load(e.a, 4)
	if err != nil {
		return err
	}
	if v != 0 {
		return fmt.Errorf("%w: %s (found by thread %d)", ErrInconsistent, what, v-1)
	}
	return nil
}

// mix64 is a 64-bit finaliser (splitmix64's): a deterministic hash for
// keys and log checksums.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// blocksFor returns the number of blocks of threads threads that cover n.
func blocksFor(n, threads int) int { return (n + threads - 1) / threads }
