package btree

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
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
	total := 0
	for _, b := range w.batches {
		total += len(b)
	}
	tr, err := Create(m, "bt", Options{Order: w.order, Capacity: 4*total + 64, MaxBatch: total})
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
	_, err = tr.Resume(o)
	return err
}

func (w *crashWL) Recover(m *pm.Machine) error {
	tr, err := Open(m, "bt")
	if err != nil {
		return err
	}
	// The commit recovery made kept the bitmap and count incrementally.
	return tr.verifyDerived()
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

func TestCrashExplore(t *testing.T) {
	seed := testSeed(t)
	states := 3000
	if testing.Short() {
		states = 500
	}
	tests := []struct {
		name   string
		opts   BatchOptions
		broken bool
	}{
		{"alg2", BatchOptions{Alg: Alg2}, false},
		{"alg1", BatchOptions{Alg: Alg1}, false},
		{"alg2-level-thread", BatchOptions{Alg: Alg2, Scopes: &Scopes{Level: pm.Thread, Top: pm.Device}}, true},
		{"alg2-top-block", BatchOptions{Alg: Alg2, Scopes: &Scopes{Level: pm.Block, Top: pm.Block}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newCrashWL(seed, 4, 8, 24, 12)
			w.opts = tc.opts
			rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: crash.ScopedBarrier, States: states, Seed: seed, Shrink: true})
			require.NoError(t, err)
			t.Logf("%s: %d persists, %s", tc.name, rep.Persists, rep.Summary())
			if !tc.broken {
				for _, v := range rep.Violations {
					t.Log(v.Explanation)
				}
				require.Empty(t, rep.Violations)
				require.GreaterOrEqual(t, rep.Checked, min(states, 100))
				return
			}
			// A seed may draw a shape where the narrow scope happens to
			// suffice (one writer per workgroup); the registered workloads
			// use a shape where it does not. Here require only that any
			// violation names a lost persist.
			for _, v := range rep.Violations {
				require.NotEmpty(t, v.Dropped)
			}
		})
	}
}

// TestNarrowBarrierCaught fixes a shape where Algorithm 2's workgroups have
// several writers per level: narrowing either barrier must be caught.
func TestNarrowBarrierCaught(t *testing.T) {
	for _, sc := range []Scopes{{pm.Thread, pm.Device}, {pm.Block, pm.Block}} {
		t.Run(fmt.Sprintf("%s-%s", sc.Level, sc.Top), func(t *testing.T) {
			found := false
			for seed := uint64(1); seed <= 5 && !found; seed++ {
				w := newCrashWL(seed, 4, 8, 24, 12)
				w.opts = BatchOptions{Alg: Alg2, Scopes: &sc}
				rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: crash.ScopedBarrier, States: 2000, Seed: seed, Shrink: true})
				require.NoError(t, err)
				if len(rep.Violations) > 0 {
					t.Logf("seed %d: %s\n%s", seed, rep.Summary(), rep.Violations[0].Explanation)
					found = true
				}
			}
			require.True(t, found, "narrowed barrier %+v never caught", sc)
		})
	}
}

// TestTimedCrashes crashes hwmodel's gope machine under ScopedBarrier at
// many cycles of the batch: every image recovers to a checked tree with
// exactly the committed batches.
func TestTimedCrashes(t *testing.T) {
	seed := testSeed(t)
	for _, alg := range []Alg{Alg1, Alg2} {
		t.Run(alg.String(), func(t *testing.T) {
			w := newCrashWL(seed, 5, 16, 300, 120)
			w.opts = BatchOptions{Alg: alg}
			cfg, err := hwmodel.Preset("gope")
			require.NoError(t, err)
			newBE := func() (crash.TimedBackend, error) { return hwmodel.New(cfg, hwmodel.ScopedBarrier) }
			rep, err := crash.CheckTimed(w, newBE, cfg.GPULimits(), 150, seed)
			require.NoError(t, err)
			t.Log(rep.Summary())
			for _, v := range rep.Violations {
				t.Log(v.Explanation)
			}
			require.Empty(t, rep.Violations)
			require.Greater(t, rep.Checked, 100)
		})
	}
}

// TestRecoveryResumesLanes crashes Algorithm 2 half-way on hwmodel and
// checks that recovery redoes only the workgroups whose marks are not
// durable (Table 3's point), and ends with the whole batch.
func TestRecoveryResumesLanes(t *testing.T) {
	seed := testSeed(t)
	w := newCrashWL(seed, 5, 16, 2000, 600)
	cfg, err := hwmodel.Preset("gope")
	require.NoError(t, err)
	be, err := hwmodel.New(cfg, hwmodel.ScopedBarrier)
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	require.NoError(t, w.Setup(m))
	tr, err := openNoRecover(m, "bt")
	require.NoError(t, err)
	full, err := tr.Resume(BatchOptions{BlockThreads: w.threads})
	require.NoError(t, err)
	require.Greater(t, full.Lanes, 2)
	var fullWrites uint64
	for _, l := range full.Writes {
		for _, x := range l {
			fullWrites += x
		}
	}
	lo, hi := be.LastStart(), be.Now()
	partial := 0
	for c := lo + (hi-lo)/40; c < hi; c += (hi - lo) / 40 {
		img, err := be.CrashAt(c)
		require.NoError(t, err)
		m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
		require.NoError(t, err)
		tr2, err := openNoRecover(m2, "bt")
		require.NoError(t, err)
		res, err := tr2.Recover(BatchOptions{BlockThreads: w.threads})
		require.NoError(t, err)
		require.NoError(t, w.Check(m2))
		done := 0
		for _, l := range res.LaneLevels {
			if l == full.Levels-full.Depth {
				done++
			}
		}
		var redo uint64
		for _, l := range res.Writes {
			for _, x := range l {
				redo += x
			}
		}
		t.Logf("crash at %d/%d: %d of %d workgroups durable, top %d; recovery wrote %d of %d words", c-lo, hi-lo, done, res.Lanes, res.TopLevels, redo, fullWrites)
		if done > 0 && done < res.Lanes {
			partial++
			require.Less(t, redo, fullWrites)
		}
	}
	require.Positive(t, partial, "no crash point found some workgroups durable and others not")
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

// TestCrashBeforeEachLevel crashes hwmodel's gope machine one cycle before
// each level of a batch became durable everywhere, with more blocks than
// the GPU holds (device barriers preempt), and recovers.
func TestCrashBeforeEachLevel(t *testing.T) {
	seed := testSeed(t)
	for _, alg := range []Alg{Alg1, Alg2} {
		t.Run(alg.String(), func(t *testing.T) {
			w := newCrashWL(seed, 5, 4, 3000, 1500)
			w.opts = BatchOptions{Alg: alg}
			be, err := hwmodel.New(hwmodel.PresetGOPE(), hwmodel.ScopedBarrier)
			require.NoError(t, err)
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			require.NoError(t, w.Setup(m))
			tr, err := openNoRecover(m, "bt")
			require.NoError(t, err)
			full, err := tr.Resume(BatchOptions{BlockThreads: w.threads})
			require.NoError(t, err)
			t.Logf("%d blocks, %d preempted", full.Launch.Blocks, full.Launch.Preempted)
			lo, hi := be.LastStart(), be.Now()
			for lv := 0; lv <= full.Levels; lv++ {
				a, b := lo, hi
				for a < b {
					mid := a + (b-a)/2
					img, err := be.CrashAt(mid)
					require.NoError(t, err)
					p, ok, err := Progress(img, "bt")
					require.NoError(t, err)
					if ok && p.Done(lv) {
						b = mid
					} else {
						a = mid + 1
					}
				}
				img, err := be.CrashAt(max(a, lo+1) - 1)
				require.NoError(t, err)
				p, _, _ := Progress(img, "bt")
				m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
				require.NoError(t, err)
				tr2, err := openNoRecover(m2, "bt")
				require.NoError(t, err)
				_, err = tr2.Recover(BatchOptions{BlockThreads: w.threads})
				require.NoError(t, err, "level %d, crash at %d of %d..%d, top %d", lv, a-1, lo, hi, p.Top)
				require.NoError(t, w.Check(m2))
			}
		})
	}
}

// TestCrashLosesOneMark drops, one at a time, each epoch status mark of a
// batch (and, as the model requires, everything ordered after it) while
// every other persist of the batch stays durable: the next level's writes,
// which share the mark's epoch, are durable without it. Recovery then redoes
// the level the lost mark covered, so that level's input, the piece records
// of the level below, must still be intact. The tree is tall enough (four
// levels, depth d >= 2 for Algorithm 2) for three internal levels to follow
// each other.
func TestCrashLosesOneMark(t *testing.T) {
	const seed = 3
	t.Logf("seed = %d", seed)
	for _, alg := range []Alg{Alg1, Alg2} {
		t.Run(alg.String(), func(t *testing.T) {
			w := newCrashWL(seed, 4, 8, 160, 48)
			w.opts = BatchOptions{Alg: alg}
			rec, err := crash.Record(w, pm.DefaultGPU())
			require.NoError(t, err)
			p, ok, err := Progress(rec.Base, "bt")
			require.NoError(t, err)
			require.True(t, ok)
			require.GreaterOrEqual(t, p.Levels, 4, "the tree is too short to show the bug")
			require.GreaterOrEqual(t, p.Depth, 2, "too few levels above d")
			r, ok := rec.Base.Region("bt")
			require.True(t, ok)
			g, err := decodeHeader(r.Data)
			require.NoError(t, err)
			graph := crash.Build(rec.Events, crash.ScopedBarrier)
			marks := 0
			for i, n := range graph.Persists {
				off := uint64(graph.Nodes[n].Persist.Addr - r.Base)
				if off < g.marksOff() || off >= g.lanesOff() {
					continue
				}
				marks++
				s, err := graph.Dropped(len(graph.Events), []int{i})
				require.NoError(t, err)
				img, err := graph.Image(rec.Base, s)
				require.NoError(t, err)
				m, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
				require.NoError(t, err)
				require.NoError(t, w.Recover(m), "mark %d (persist %d) lost", (off-g.marksOff())/8, i)
				require.NoError(t, w.Check(m), "mark %d (persist %d) lost", (off-g.marksOff())/8, i)
			}
			t.Logf("%d levels, d = %d, %d lanes: %d marks dropped one at a time", p.Levels, p.Depth, len(p.Lanes), marks)
			require.NotZero(t, marks)
		})
	}
}

// The crash checker finds the bug TestCrashLosesOneMark pins, on the
// layout before its fix (internal depths alternating between two piece
// buffers), within a budget of 1,000 states: its single drops lose each
// level mark alone while the pieces written after it stay, which random
// states almost never draw among hundreds of persists. On the fixed layout
// the same exploration finds nothing.
func TestCrashCheckerFindsOneLostMark(t *testing.T) {
	if testing.Short() {
		// The race run: 35 s under -race, for a checker whose concurrency
		// the crash package's own tests race.
		t.Skip("explores 4,000 crash states; the race run (-short) races the checker in package crash")
	}
	const seed = 3
	t.Logf("seed = %d", seed)
	for _, bufs := range []int{2, pieceBufs - 1} {
		for _, alg := range []Alg{Alg1, Alg2} {
			t.Run(fmt.Sprintf("%d-buffers/%v", bufs, alg), func(t *testing.T) {
				defer func(old int) { innerBufs = old }(innerBufs)
				innerBufs = bufs
				w := newCrashWL(seed, 4, 8, 160, 48)
				w.opts = BatchOptions{Alg: alg}
				rep, err := crash.Check(w, pm.DefaultGPU(), crash.Config{Model: crash.ScopedBarrier, States: 1000, Seed: seed, Shrink: true})
				require.NoError(t, err)
				t.Logf("%d persists, %s", rep.Persists, rep.Summary())
				if bufs == pieceBufs-1 {
					require.Empty(t, rep.Violations)
					return
				}
				require.NotEmpty(t, rep.Violations, "the old layout's lost-mark bug went unseen")
				v := rep.Violations[0]
				require.Len(t, v.Dropped, 1, "one lost persist suffices")
				t.Log(v.Explanation)
			})
		}
	}
}
