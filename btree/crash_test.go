package btree

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// crashWL is a small crash workload: a first batch in Setup, more in Run.
type crashWL struct {
	order, threads int
	batches        [][]uint64
	opts           BatchOptions
}

func newCrashWL(seed uint64, order, threads int, sizes ...int) *crashWL {
	rng := rand.New(rand.NewPCG(seed, 7))
	w := &crashWL{order: order, threads: threads}
	for _, n := range sizes {
		ks := make([]uint64, n)
		for i := range ks {
			ks[i] = 1 + rng.Uint64N(uint64(4*n+40))
		}
		w.batches = append(w.batches, ks)
	}
	return w
}

func (w *crashWL) Name() string { return fmt.Sprintf("btree-test(%s)", w.opts.Alg) }

func (w *crashWL) vals(b int) []uint64 {
	vs := make([]uint64, len(w.batches[b]))
	for i, k := range w.batches[b] {
		vs[i] = k*31 + uint64(b)
	}
	return vs
}

func (w *crashWL) Setup(m *pm.Machine) error {
	tr, err := Create(m, "bt", Options{Order: w.order, Capacity: 2000, MaxBatch: 500})
	if err != nil {
		return err
	}
	if _, err = tr.InsertBatch(w.batches[0], w.vals(0), BatchOptions{BlockThreads: w.threads}); err != nil {
		return err
	}
	o := w.opts
	o.BlockThreads = w.threads
	return tr.Stage(w.batches[1], w.vals(1), o)
}

func (w *crashWL) Run(m *pm.Machine) error {
	tr, err := openNoRecover(m, "bt")
	if err != nil {
		return err
	}
	o := w.opts
	o.BlockThreads = w.threads
	_, err = tr.Recover(o)
	return err
}

func (w *crashWL) Recover(m *pm.Machine) error {
	_, err := Open(m, "bt")
	return err
}

func (w *crashWL) want(committed uint64) map[uint64]uint64 {
	want := map[uint64]uint64{}
	for b := 0; b < len(w.batches) && uint64(b)+2 <= committed; b++ {
		for i, v := range w.vals(b) {
			want[w.batches[b][i]] = v
		}
	}
	return want
}

func (w *crashWL) Check(m *pm.Machine) error {
	tr, err := openNoRecover(m, "bt")
	if err != nil {
		return err
	}
	if err := tr.Check(); err != nil {
		return err
	}
	want := w.want(tr.Batches())
	if tr.Len() != len(want) {
		return fmt.Errorf("%w: %d keys, want %d", ErrCorrupt, tr.Len(), len(want))
	}
	for k, v := range tr.All() {
		if want[k] != v {
			return fmt.Errorf("%w: key %d = %d, want %d", ErrCorrupt, k, v, want[k])
		}
	}
	return nil
}

func dump(t *testing.T, tr *Tree, root uint32, height int) {
	level := []uint32{root}
	for d := range height {
		var next []uint32
		for _, id := range level {
			n, err := tr.readNode(id)
			if err != nil {
				t.Logf("  %d: %v", id, err)
				continue
			}
			t.Logf("  depth %d node %d leaf=%v next=%d keys=%v vals=%v", d, id, n.leaf, n.next, n.keys, n.vals)
			if !n.leaf {
				for _, c := range n.vals {
					next = append(next, uint32(c))
				}
			}
		}
		level = next
	}
}

func TestCrashDebug(t *testing.T) {
	var w *crashWL
	var rec *crash.Recording
	var g *crash.Graph
	var rep *crash.Report
	for seed := range uint64(40) {
		w = newCrashWL(seed, 4, 4, 24, 10)
		var err error
		rec, err = crash.Record(w, pm.DefaultGPU)
		require.NoError(t, err)
		g = crash.Build(rec.Events, crash.ScopedBarrier)
		rep, err = rec.Explore(w, g, crash.Config{Model: crash.ScopedBarrier, States: 300, Strategy: crash.Prefixes})
		require.NoError(t, err)
		if len(rep.Violations) > 0 {
			t.Logf("seed %d", seed)
			break
		}
	}
	for _, v := range rep.Violations {
		t.Logf("point %d: %v", v.State.Point, v.Err)
		img, err := g.Image(rec.Base, v.State)
		require.NoError(t, err)
		m, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
		require.NoError(t, err)
		tr, err := openNoRecover(m, "bt")
		require.NoError(t, err)
		r, _, _ := tr.pending()
		rb := make([]byte, line)
		require.NoError(t, tr.read(tr.r.Base.Add(recordOff), rb))
		_, derr := decodeRecord(rb, tr.g)
		t.Logf("record decode: %v %x", derr, rb[:64])
		t.Logf("before: %+v rec %+v", tr.cur, r)
		dump(t, tr, r.oldRoot, int(r.oldHeight))
		res, err := tr.Recover(BatchOptions{})
		t.Logf("recover %+v %v", res, err)
		dump(t, tr, tr.cur.root, int(tr.cur.height))
	}
}
