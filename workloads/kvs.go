package workloads

import (
	"fmt"
	"maps"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
)

func init() {
	register("gpkvs", "gpKVS (GPM §5.2, SBRP §5.1): batched SETs into an 8-way PM hash table, undo-logged in HCL with an OFence before each in-place update, a transaction flag, a recovery kernel",
		func(s Size) crash.Workload { return NewKVS(KVSShapeFor(s), kvs.LogHCL, true) })
	register("gpkvs-conv", "gpKVS with a conventional log (partitions appended under locks) instead of HCL",
		func(s Size) crash.Workload { return NewKVS(KVSShapeFor(s), kvs.LogConv, true) })
	register("gpkvs-no-ofence", "gpKVS with the OFence between logging a pair and updating it removed: a persistency bug the checker must find",
		func(s Size) crash.Workload { return NewKVS(KVSShapeFor(s), kvs.LogHCL, false) })
}

// KVSShape sizes a gpKVS workload.
type KVSShape struct {
	Buckets      int // 128-byte buckets of the table
	BlockThreads int // threads per block of the batch kernels
	Preload      int // keys inserted by Setup
	Batch        int // requests (threads) per batch of Run
	Batches      int // batches of Run
	// Updates is how many requests of each batch update a preloaded key;
	// the rest insert new keys.
	Updates int
}

// KVSShapeFor returns the shape of a size. Paper is the SBRP artifact's
// gpKVS: 65,536 inserts, 16,384 threads at a time (four batches of one
// thread per insert), into a 128 MB table (1,048,576 buckets).
func KVSShapeFor(s Size) KVSShape {
	switch s {
	case Tiny:
		return KVSShape{Buckets: 8, BlockThreads: 4, Preload: 4, Batch: 4, Batches: 1, Updates: 2}
	case Quick:
		return KVSShape{Buckets: 1024, BlockThreads: 128, Preload: 256, Batch: 512, Batches: 2, Updates: 128}
	}
	return KVSShape{Buckets: 1 << 20, BlockThreads: 256, Batch: 16384, Batches: 4}
}

// KVS is gpKVS as a crash-checkable workload. Setup creates the store and
// preloads it; Run applies Batches SET batches, each updating Updates
// preloaded keys and inserting new ones; Recover opens the store and runs
// its recovery kernel; Check requires the store's invariant (every key in
// one of its buckets, no duplicates) and contents equal to the state after
// some whole number of batches: a batch is all or nothing.
type KVS struct {
	Shape  KVSShape
	Log    kvs.LogKind
	OFence bool // false: the seeded bug

	preKeys []uint32
	preVals []uint64
	keys    [][]uint32
	vals    [][]uint64
	states  []map[uint32]uint64 // after Setup, after each batch
}

// NewKVS returns the workload; its keys and values come from a fixed seed.
func NewKVS(shape KVSShape, log kvs.LogKind, ofence bool) *KVS {
	w := &KVS{Shape: shape, Log: log, OFence: ofence}
	rng := rand.New(rand.NewPCG(0x6b7673, uint64(shape.Batch)))
	used := map[uint32]bool{}
	fresh := func() uint32 {
		for {
			if k := rng.Uint32(); k != 0 && !used[k] {
				used[k] = true
				return k
			}
		}
	}
	state := map[uint32]uint64{}
	for range shape.Preload {
		k, v := fresh(), rng.Uint64()
		w.preKeys, w.preVals = append(w.preKeys, k), append(w.preVals, v)
		state[k] = v
	}
	w.states = append(w.states, maps.Clone(state))
	for b := range shape.Batches {
		var ks []uint32
		var vs []uint64
		for i := range shape.Batch {
			var k uint32
			if i < shape.Updates && len(w.preKeys) > 0 {
				k = w.preKeys[(b*shape.Updates+i)%len(w.preKeys)]
			} else {
				k = fresh()
			}
			v := rng.Uint64()
			ks, vs = append(ks, k), append(vs, v)
			state[k] = v
		}
		w.keys, w.vals = append(w.keys, ks), append(w.vals, vs)
		w.states = append(w.states, maps.Clone(state))
	}
	return w
}

// Name returns "gpkvs", "gpkvs-conv" or "gpkvs-no-ofence".
func (w *KVS) Name() string {
	switch {
	case !w.OFence:
		return "gpkvs-no-ofence"
	case w.Log == kvs.LogConv:
		return "gpkvs-conv"
	}
	return "gpkvs"
}

func (w *KVS) opts() []kvs.Option {
	if w.OFence {
		return nil
	}
	return []kvs.Option{kvs.WithoutOFence()}
}

// Config returns the store configuration the workload creates.
func (w *KVS) Config() kvs.Config {
	return kvs.Config{Buckets: w.Shape.Buckets, MaxBatch: max(w.Shape.Batch, 1), BlockThreads: w.Shape.BlockThreads, Log: w.Log}
}

// Setup creates the store and inserts the preloaded keys.
func (w *KVS) Setup(m *pm.Machine) error {
	st, err := kvs.Create(m, w.Config(), w.opts()...)
	if err != nil {
		return err
	}
	for i := 0; i < len(w.preKeys); i += st.MaxBatch() {
		j := min(i+st.MaxBatch(), len(w.preKeys))
		if _, err := st.SetBatch(w.preKeys[i:j], w.preVals[i:j]); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	return st.Close()
}

// Run applies the batches.
func (w *KVS) Run(m *pm.Machine) error {
	st, err := kvs.Open(m, "gpkvs", w.opts()...)
	if err != nil {
		return err
	}
	for b := range w.keys {
		if _, err := st.SetBatch(w.keys[b], w.vals[b]); err != nil {
			return fmt.Errorf("batch %d: %w", b, err)
		}
	}
	return st.Close()
}

// CommitPoint returns the store's transaction flag (crash.CommitPointer).
func (w *KVS) CommitPoint(m *pm.Machine) (pm.Addr, error) {
	st, err := kvs.Open(m, "gpkvs", w.opts()...)
	if err != nil {
		return 0, err
	}
	a := st.CommitAddr()
	return a, st.Close()
}

// Recover opens the store and recovers it.
func (w *KVS) Recover(m *pm.Machine) error {
	st, err := kvs.Open(m, "gpkvs", w.opts()...)
	if err != nil {
		return err
	}
	if _, err := st.Recover(); err != nil {
		return err
	}
	return st.Close()
}

// Check requires the invariant and the contents after a whole number of
// batches.
func (w *KVS) Check(m *pm.Machine) error {
	st, err := kvs.Open(m, "gpkvs")
	if err != nil {
		return err
	}
	got, err := st.Contents()
	if err != nil {
		return err
	}
	for _, s := range w.states {
		if maps.Equal(got, s) {
			return nil
		}
	}
	// Name a difference from the nearest state, for the report.
	best, bestDiff := 0, -1
	for i, s := range w.states {
		d := 0
		for k, v := range s {
			if g, ok := got[k]; !ok || g != v {
				d++
			}
		}
		d += max(len(got)-len(s), 0)
		if bestDiff < 0 || d < bestDiff {
			best, bestDiff = i, d
		}
	}
	for k, v := range w.states[best] {
		if g, ok := got[k]; !ok {
			return fmt.Errorf("%w: gpKVS holds no whole number of batches: key %d missing (nearest: after %d batches)", ErrInconsistent, k, best)
		} else if g != v {
			return fmt.Errorf("%w: gpKVS holds no whole number of batches: key %d = %#x, want %#x (nearest: after %d batches)", ErrInconsistent, k, g, v, best)
		}
	}
	for k := range got {
		if _, ok := w.states[best][k]; !ok {
			return fmt.Errorf("%w: gpKVS holds no whole number of batches: key %d present (nearest: after %d batches)", ErrInconsistent, k, best)
		}
	}
	return fmt.Errorf("%w: gpKVS contents match no state", ErrInconsistent)
}
