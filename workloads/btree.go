package workloads

import (
	"fmt"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

func init() {
	register("btree", "persistent B+tree, batched insertion by Algorithm 2 of the scoped persist barrier paper: block-scope persist barrier per level of each workgroup's subtree, device scope above",
		func(s Size) crash.Workload { return NewBTree(s, btree.BatchOptions{Alg: btree.Alg2}) })
	register("btree-alg1", "persistent B+tree, batched insertion by Algorithm 1: a device-scope persist barrier per level",
		func(s Size) crash.Workload { return NewBTree(s, btree.BatchOptions{Alg: btree.Alg1}) })
	register("btree-narrow", "the B+tree's Algorithm 2 with its per-level persist barrier narrowed to thread scope: a scoped persistency bug",
		func(s Size) crash.Workload {
			return NewBTree(s, btree.BatchOptions{Alg: btree.Alg2, Scopes: &btree.Scopes{Level: pm.Thread, Top: pm.Device}})
		})
	register("btree-narrow-top", "the B+tree's Algorithm 2 with its persist barriers above depth d narrowed to block scope: a scoped persistency bug",
		func(s Size) crash.Workload {
			return NewBTree(s, btree.BatchOptions{Alg: btree.Alg2, Scopes: &btree.Scopes{Level: pm.Block, Top: pm.Block}})
		})
}

// BTree is the persistent B+tree (package btree) as a crash-checkable
// workload. Setup creates the tree, inserts a first batch and stages a
// second (its record and keys durable, as the host writes them before the
// launch); Run runs the second batch's insertion kernel with Opts and
// commits it. After a crash, Recover opens the tree, which resumes the
// batch from its workgroups' epoch status marks, and Check requires a
// tree that passes btree's Check and holds exactly the batches it says it
// committed.
//
// Run holds one batch because the recorder of crash does not see host
// writes made during Run: a second staged batch would lose its record in
// every crash image while keeping its kernel's writes.
type BTree struct {
	Order, Initial, Batch, Threads int
	Opts                           btree.BatchOptions
	batches                        [][]uint64 // batch 0 is Setup's
}

// NewBTree returns the workload at size s.
func NewBTree(s Size, o btree.BatchOptions) *BTree {
	w := &BTree{Order: 4, Initial: 24, Batch: 12, Threads: 8, Opts: o}
	switch s {
	case Quick:
		w.Order, w.Initial, w.Batch, w.Threads = 8, 2000, 400, 32
	case Paper:
		w.Order, w.Initial, w.Batch, w.Threads = btree.DefaultOrder, 50000, 10000, 64
	}
	w.Opts.BlockThreads = w.Threads
	rng := rand.New(rand.NewPCG(12, 34))
	for b := range 2 {
		n := w.Batch
		if b == 0 {
			n = w.Initial
		}
		ks := make([]uint64, n)
		for i := range ks {
			ks[i] = 1 + rng.Uint64N(uint64(8*(w.Initial+w.Batch)))
		}
		w.batches = append(w.batches, ks)
	}
	return w
}

// Name returns the workload's name.
func (w *BTree) Name() string {
	if w.Opts.Scopes == nil {
		return fmt.Sprintf("btree(%s)", w.Opts.Alg)
	}
	return fmt.Sprintf("btree(%s,%s,%s)", w.Opts.Alg, w.Opts.Scopes.Level, w.Opts.Scopes.Top)
}

func (w *BTree) vals(b int) []uint64 {
	vs := make([]uint64, len(w.batches[b]))
	for i, k := range w.batches[b] {
		vs[i] = mix64(k) ^ uint64(b)
	}
	return vs
}

// Setup creates the tree, inserts the first batch and stages the second
// (host writes: the checker's recorder does not see host writes during
// Run, so they belong here).
func (w *BTree) Setup(m *pm.Machine) error {
	tr, err := btree.Create(m, "btree", btree.Options{Order: w.Order, Capacity: 6 * (w.Initial + w.Batch), MaxBatch: max(w.Initial, w.Batch)})
	if err != nil {
		return err
	}
	if _, err = tr.InsertBatch(w.batches[0], w.vals(0), btree.BatchOptions{BlockThreads: w.Threads}); err != nil {
		return err
	}
	return tr.Stage(w.batches[1], w.vals(1), w.Opts)
}

// Run runs the staged batch's kernel. It leaves the host's commit step
// to Recover (any later Open does it): hwmodel's timed crashes then cover
// the kernel, with no host write after it.
func (w *BTree) Run(m *pm.Machine) error {
	tr, err := btree.OpenPending(m, "btree")
	if err != nil {
		return err
	}
	_, err = tr.Resume(w.Opts)
	return err
}

// Recover opens the tree, finishing an interrupted batch.
func (w *BTree) Recover(m *pm.Machine) error {
	_, err := btree.Open(m, "btree")
	return err
}

// Want returns the tree's content after the first committed batches
// (Create commits batch 1, Setup's insert batch 2).
func (w *BTree) Want(committed uint64) map[uint64]uint64 {
	want := map[uint64]uint64{}
	for b := 0; b < len(w.batches) && uint64(b)+2 <= committed; b++ {
		for i, v := range w.vals(b) {
			want[w.batches[b][i]] = v
		}
	}
	return want
}

// Check runs the tree's Check and compares its content with the batches
// it committed (after finishing, on a copy, a batch Run left unfinished).
// It writes nothing.
func (w *BTree) Check(m *pm.Machine) error {
	// Check writes nothing: a batch Run left unfinished is finished on a
	// copy of the visible image (the in-place leaf links of an unfinished
	// batch already point into it).
	m2, err := pm.Reopen(m.Memory().Snapshot(), functional.New(pm.GPULimits{}))
	if err != nil {
		return err
	}
	tr, err := btree.Open(m2, "btree")
	if err != nil {
		return err
	}
	if err := tr.Check(); err != nil {
		return err
	}
	want := w.Want(tr.Batches())
	if tr.Batches() < 2 || tr.Batches() > 3 || tr.Len() != len(want) {
		return fmt.Errorf("%w: %d keys after batch %d, want %d", ErrInconsistent, tr.Len(), tr.Batches(), len(want))
	}
	n := 0
	for k, v := range tr.All() {
		if wv, ok := want[k]; !ok || wv != v {
			return fmt.Errorf("%w: key %d holds %d, want %d (present %v)", ErrInconsistent, k, v, wv, ok)
		}
		n++
	}
	if n != len(want) {
		return fmt.Errorf("%w: scan found %d keys, want %d", ErrInconsistent, n, len(want))
	}
	return nil
}

func openTree(m *pm.Machine) (*btree.Tree, error) { return btree.Open(m, "btree") }
