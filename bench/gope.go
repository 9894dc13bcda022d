package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

func init() {
	for _, e := range []Experiment{
		{Name: "gope-fig5", Paper: "scoped persist barrier paper", Presets: []string{"gope"}, Figure: "Fig. 5", Description: "scoped persist barrier paper Fig. 5: B+tree batch insertion time of Algorithm 1 (kernel scope) and Algorithm 2 (workgroup scope) normalised to the DRAM-only baseline, over tree sizes up to 13.17 MB, gope preset; also the workgroup scope with DRAM latencies on the NV region (footnote 5) and the kernel scope over Algorithm 1 without persistence; the paper gives neither workgroup size, batch size nor node order (its §7.2.1 says only that the workitems, one a key, grow in proportion to the tree, so the batch is a fixed share of it): 64-item workgroups (one wavefront), a batch of a tenth of the tree's keys, order-15 copy-on-write nodes; each bar is five random batches (three at quick size), each into its own tree: their total time over the baseline's total, with the least and the greatest batch's ratio (min_time_norm, max_time_norm), since one batch's ratio moves by up to 20% from batch to batch", Run: runGopeFig5},
		{Name: "gope-fig7", Paper: "scoped persist barrier paper", Presets: []string{"gope"}, Figure: "Fig. 7", Sweeps: []string{"persist.nvw_fifo_l1", "persist.nvw_fifo_l2"}, Description: "scoped persist barrier paper Fig. 7: the same, largest tree, NVW-FIFO sizes (L1/L2) 16/64, 64/256, 256/1024 (the same batches' total time over the baseline's)", Run: runGopeFig7},
		{Name: "gope-table3", Paper: "scoped persist barrier paper", Presets: []string{"gope"}, Figure: "Table 3", Description: "scoped persist barrier paper Table 3: NV writes a crash at each level (leaf .. leaf-5) makes the insertion write again, per scope, largest tree", Run: runGopeTable3},
	} {
		Register(e)
	}
}

// The experiments' B+tree. The paper gives the tree sizes (up to 13.17 MB)
// and the machine (Table 2); the rest is ours and fixed here: nodes of the
// default order (15 entries, 256 bytes: four 64-byte lines), workgroups of
// one 64-wide wavefront, a tree built by random batches, then one timed
// batch of random keys, a tenth as many as the tree then holds (Fig. 5 and
// Fig. 7 time several such trees and batches: gopeBatches).
const (
	gopeBlock      = 64
	gopeBatchShare = 10 // the timed batch is 1/gopeBatchShare of the keys
	gopePaperBytes = 13.17e6
	gopeBuildBatch = 1 << 15
)

// gopeSizes are the target tree sizes in bytes: the paper's 13.17 MB and
// halvings (quick: a 64th of each).
func gopeSizes(quick bool) []float64 {
	sizes := []float64{gopePaperBytes / 8, gopePaperBytes / 4, gopePaperBytes / 2, gopePaperBytes}
	if quick {
		for i := range sizes {
			sizes[i] /= 64
		}
	}
	return sizes
}

// gopeTree is a built tree (the durable image) and the batch to insert.
type gopeTree struct {
	img        *pm.Image
	keys, vals []uint64
	bytes      uint64 // tree size after the batch
}

// bytesPerKey is what a tree built by random batches of default-order
// nodes takes per key; gopeBuild uses it to aim at a size and reports the
// size it got. It is measured by gopeCalibrate, not assumed.
func gopeCalibrate() (float64, error) {
	tr, err := gopeBuildN(20000, 1)
	if err != nil {
		return 0, err
	}
	return float64(tr.bytes) / float64(20000+20000/gopeBatchShare), nil
}

func gopeBuild(size, perKey float64, seed uint64) (*gopeTree, error) {
	n := int(size / perKey * gopeBatchShare / (gopeBatchShare + 1))
	g, err := gopeBuildN(n, seed)
	if err != nil {
		return nil, err
	}
	// One correction if the size missed by more than 2%: bytes per key
	// drift with the tree's size.
	if got := float64(g.bytes); got < size*0.98 || got > size*1.02 {
		return gopeBuildN(int(float64(n)*size/got), seed)
	}
	return g, nil
}

// gopeBuildN builds a tree of n random keys on the functional backend (in
// batches; untimed) and draws the timed batch.
func gopeBuildN(n int, seed uint64) (*gopeTree, error) {
	rng := rand.New(rand.NewPCG(seed, 0x607e))
	batch := max(1, n/gopeBatchShare)
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	if err != nil {
		return nil, err
	}
	capacity := (n+batch)/3 + 4*batch + 1024
	tr, err := btree.Create(m, "btree", btree.Options{Capacity: capacity, MaxBatch: max(gopeBuildBatch, batch), MaxLanes: max(gopeBuildBatch, batch)})
	if err != nil {
		return nil, err
	}
	for done := 0; done < n; {
		k := min(gopeBuildBatch, n-done)
		ks, vs := make([]uint64, k), make([]uint64, k)
		for i := range ks {
			ks[i], vs[i] = rng.Uint64(), rng.Uint64()
		}
		if _, err := tr.InsertBatch(ks, vs, btree.BatchOptions{BlockThreads: gopeBlock}); err != nil {
			return nil, fmt.Errorf("building the tree: %w", err)
		}
		done += k
	}
	g := &gopeTree{keys: make([]uint64, batch), vals: make([]uint64, batch)}
	for i := range g.keys {
		g.keys[i], g.vals[i] = rng.Uint64(), rng.Uint64()
	}
	if g.img, err = m.Crash(); err != nil {
		return nil, err
	}
	// The size after the batch, measured on a functional copy.
	m2, err := pm.Reopen(g.img.Clone(), functional.New(pm.GPULimits{}))
	if err != nil {
		return nil, err
	}
	tr2, err := btree.Open(m2, "btree")
	if err != nil {
		return nil, err
	}
	if _, err := tr2.InsertBatch(g.keys, g.vals, btree.BatchOptions{BlockThreads: gopeBlock}); err != nil {
		return nil, err
	}
	g.bytes = tr2.Bytes()
	return g, nil
}

// gopeConfig is one bar: an algorithm on the gope machine under a model,
// with overrides.
type gopeConfig struct {
	name  string
	alg   btree.Alg
	model hwmodel.Model // ScopedBarrier; None on the DRAM-only machine (pmAsDRAM)
	edit  edit          // the bar's change to the gope preset (nil: none)
}

// pmAsDRAM makes the machine the DRAM-only baseline: PM timed as device
// memory, no persist work. Only the None model runs on it (hwmodel.New
// refuses another, hwmodel.ErrPMAsDRAM).
func pmAsDRAM(c *hwmodel.Config) { c.Persist.None = true }

var (
	gopeDRAM   = gopeConfig{"dram-only", btree.Alg2, hwmodel.None, pmAsDRAM}
	gopeKernel = gopeConfig{"kernel-scope", btree.Alg1, hwmodel.ScopedBarrier, nil}
	gopeWG     = gopeConfig{"workgroup-scope", btree.Alg2, hwmodel.ScopedBarrier, nil}
	// gopeDRAMAlg1 is Algorithm 1 without persistence: what its structure
	// (a kernel-wide barrier per level) costs on its own.
	gopeDRAMAlg1 = gopeConfig{"dram-only-alg1", btree.Alg1, hwmodel.None, pmAsDRAM}
	// gopeWGDRAMLat is the workgroup scope with DRAM latencies on the NV
	// region (the paper's footnote 5).
	gopeWGDRAMLat = gopeConfig{"workgroup-scope/dram-latency", btree.Alg2, hwmodel.ScopedBarrier, func(c *hwmodel.Config) {
		c.NVM.ReadLatencyCycles, c.NVM.WriteLatencyCycles = c.DRAM.ReadLatencyCycles, c.DRAM.WriteLatencyCycles
	}}
)

// gopeRun is one timed batch.
type gopeRun struct {
	cycles uint64
	res    btree.BatchResult
	stats  hwmodel.Stats
}

// runGope inserts the batch of g into a copy of its tree on the gope
// machine under c's model (ScopedBarrier, or None on the DRAM-only
// machine) with c's overrides, and times it until its
// persists are durable.
func runGope(g *gopeTree, c gopeConfig, o Options) (gopeRun, error) {
	be, err := o.timingBackend("gope", c.model, c.edit) // nothing crashes this run
	if err != nil {
		return gopeRun{}, err
	}
	m, err := pm.Reopen(g.img.Clone(), be)
	if err != nil {
		return gopeRun{}, err
	}
	tr, err := btree.Open(m, "btree")
	if err != nil {
		return gopeRun{}, err
	}
	before, t0 := be.Stats(), be.Now()
	res, err := tr.InsertBatch(g.keys, g.vals, btree.BatchOptions{Alg: c.alg, BlockThreads: gopeBlock})
	if err != nil {
		return gopeRun{}, fmt.Errorf("%s: %w", c.name, err)
	}
	after := be.Stats()
	r := gopeRun{cycles: be.Now() - t0, res: res, stats: after}
	r.stats.Persists = after.Persists - before.Persists
	return r, tr.Check()
}

// gopeBatches is how many random batches gope-fig5 and gope-fig7 time at
// each tree size: each batch inserts into a tree of its own, built from
// its own seed. One batch's time over the DRAM-only baseline's moves by
// up to 8% from batch to batch with the workgroup scope (paper size,
// 3.27 MB, five seeds: 1.135 to 1.222; 1.08 to 1.29 when every workgroup
// ran at once, before the grid ran in waves at its device barriers): the
// insertion ends when its slowest workgroup does, and which one that is,
// and by how much, changes with the keys. So the experiments report the
// batches' total time over the baseline's total, and the least and the
// greatest batch's ratio beside it.
func gopeBatches(o Options) int {
	if o.Quick {
		return 3
	}
	return 5
}

// gopeSweep builds batches trees per size (seed b of size i is
// 1+i+1000*b, so the first is the one a single batch always used) and
// runs every config on each, in parallel; shards split the sizes.
// trees[i][b] and runs[i][b][j] are size i's batch b and its run of
// config j; trees[i] is nil for a size of another shard.
func gopeSweep(ctx context.Context, o Options, sizes []float64, configs []gopeConfig, batches int) ([][]*gopeTree, [][][]gopeRun, error) {
	perKey, err := gopeCalibrate()
	if err != nil {
		return nil, nil, err
	}
	trees := make([][]*gopeTree, len(sizes))
	runs := make([][][]gopeRun, len(sizes))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	// The whole sweep is announced before any of it runs (g.Go blocks at
	// the limit), so that a progress bar never moves backwards.
	n := 0
	for i := range sizes {
		if o.mine(i) {
			n++
		}
	}
	o.progress(n*batches*len(configs), 0)
	for i, size := range sizes {
		if !o.mine(i) {
			continue
		}
		trees[i] = make([]*gopeTree, batches)
		runs[i] = make([][]gopeRun, batches)
		for b := range batches {
			runs[i][b] = make([]gopeRun, len(configs))
			g.Go(func() error {
				tr, err := gopeBuild(size, perKey, uint64(1+i+1000*b))
				if err != nil {
					return err
				}
				trees[i][b] = tr
				for j, c := range configs {
					if err := ctx.Err(); err != nil {
						return err
					}
					if runs[i][b][j], err = runGope(tr, c, o); err != nil {
						return err
					}
					o.progress(0, 1)
				}
				return nil
			})
		}
	}
	return trees, runs, g.Wait()
}

// gopeTotals sums each config's cycles over a size's batches.
func gopeTotals(runs [][]gopeRun) []float64 {
	tot := make([]float64, len(runs[0]))
	for _, br := range runs {
		for j, r := range br {
			tot[j] += float64(r.cycles)
		}
	}
	return tot
}

// gopeRange returns the least and the greatest over a size's batches of
// config j's cycles over config k's.
func gopeRange(runs [][]gopeRun, j, k int) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, br := range runs {
		r := float64(br[j].cycles) / float64(br[k].cycles)
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, hi
}

// gopeMean returns the mean over a size's batches of f of config j's run.
func gopeMean(runs [][]gopeRun, j int, f func(gopeRun) float64) float64 {
	var sum float64
	for _, br := range runs {
		sum += f(br[j])
	}
	return sum / float64(len(runs))
}

func mb(b uint64) string { return fmt.Sprintf("%.2fMB", float64(b)/1e6) }

// runGopeFig5 times both algorithms and the DRAM-only baseline at each
// tree size. Beside the paper's bars (time_norm, over the DRAM-only
// baseline, which runs Algorithm 2's structure), kernel-scope's
// over_alg1_dram divides it by Algorithm 1 run without persistence, to
// show what the persist barriers cost apart from Algorithm 1's own
// structure, and workgroup-scope/dram-latency is the workgroup scope with
// DRAM latencies on the NV region (the paper's footnote 5).
func runGopeFig5(ctx context.Context, o Options) ([]Row, error) {
	configs := []gopeConfig{gopeDRAM, gopeKernel, gopeWG, gopeWGDRAMLat, gopeDRAMAlg1}
	trees, runs, err := gopeSweep(ctx, o, gopeSizes(o.Quick), configs, gopeBatches(o))
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, trs := range trees {
		if trs == nil {
			continue
		}
		// The bars are named by the first batch's tree (gopeBuild aims
		// every batch's tree at the same size, correcting a miss of more
		// than 2% once).
		w := mb(trs[0].bytes)
		tot := gopeTotals(runs[i])
		for j, c := range configs[1:4] {
			lo, hi := gopeRange(runs[i], j+1, 0)
			rows = append(rows,
				Row{"gope-fig5", w, c.name, "time_norm", tot[j+1] / tot[0]},
				Row{"gope-fig5", w, c.name, "min_time_norm", lo},
				Row{"gope-fig5", w, c.name, "max_time_norm", hi})
		}
		rows = append(rows, Row{"gope-fig5", w, gopeKernel.name, "over_alg1_dram", tot[1] / tot[4]})
		keys := 0.0
		for _, tr := range trs {
			keys += float64(len(tr.keys)) / float64(len(trs))
		}
		mean := func(j int, f func(gopeRun) float64) float64 { return gopeMean(runs[i], j, f) }
		for j, c := range configs {
			rows = append(rows,
				Row{"gope-fig5", w, c.name, "cycles", tot[j] / float64(len(trs))},
				Row{"gope-fig5", w, c.name, "keys", keys},
				Row{"gope-fig5", w, c.name, "workgroups", mean(j, func(r gopeRun) float64 { return float64(r.res.Lanes) })},
				Row{"gope-fig5", w, c.name, "depth_d", mean(j, func(r gopeRun) float64 { return float64(r.res.Depth) })},
				Row{"gope-fig5", w, c.name, "persists", mean(j, func(r gopeRun) float64 { return float64(r.stats.Persists) })},
				Row{"gope-fig5", w, c.name, "nvw_full_stall", mean(j, func(r gopeRun) float64 { return float64(r.stats.Stalls.NVWFull) })},
				Row{"gope-fig5", w, c.name, "pbarrier_stall", mean(j, func(r gopeRun) float64 { return float64(r.stats.Stalls.PBarrier) })},
				Row{"gope-fig5", w, c.name, "barrier_stall", mean(j, func(r gopeRun) float64 { return float64(r.stats.Stalls.Barrier) })},
				Row{"gope-fig5", w, c.name, "memory_stall", mean(j, func(r gopeRun) float64 { return float64(r.stats.Stalls.Memory) })})
		}
	}
	return rows, nil
}

func runGopeFig7(ctx context.Context, o Options) ([]Row, error) {
	var configs []gopeConfig
	configs = append(configs, gopeDRAM)
	fifos := [][2]int{{16, 64}, {64, 256}, {256, 1024}}
	for _, f := range fifos {
		fifo := func(c *hwmodel.Config) { c.Persist.NVWFIFOL1, c.Persist.NVWFIFOL2 = f[0], f[1] }
		configs = append(configs,
			gopeConfig{fmt.Sprintf("workgroup-scope/%d-%d", f[0], f[1]), btree.Alg2, hwmodel.ScopedBarrier, fifo},
			gopeConfig{fmt.Sprintf("kernel-scope/%d-%d", f[0], f[1]), btree.Alg1, hwmodel.ScopedBarrier, fifo})
	}
	sizes := gopeSizes(o.Quick)
	trees, runs, err := gopeSweep(ctx, o, sizes[len(sizes)-1:], configs, gopeBatches(o))
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, trs := range trees {
		if trs == nil {
			continue
		}
		w := mb(trs[0].bytes)
		tot := gopeTotals(runs[i])
		for j, c := range configs[1:] {
			rows = append(rows, Row{"gope-fig7", w, c.name, "time_norm", tot[j+1] / tot[0]})
		}
		for j, c := range configs[1:] {
			rows = append(rows, Row{"gope-fig7", w, c.name, "nvw_full_stall", gopeMean(runs[i], j+1, func(r gopeRun) float64 { return float64(r.stats.Stalls.NVWFull) })})
		}
	}
	return rows, nil
}

// gopeCrashRework runs the batch of g with c's algorithm on the gope
// machine and, for each level lv, crashes it one cycle before the last
// epoch of that level became durable, recovers on the functional backend
// and counts the level-lv NV writes the recovery made: what the crash made
// the insertion write again at that level.
func gopeCrashRework(g *gopeTree, c gopeConfig, o Options) ([]uint64, error) {
	be, err := o.backend("gope", c.model, c.edit)
	if err != nil {
		return nil, err
	}
	m, err := pm.Reopen(g.img.Clone(), be)
	if err != nil {
		return nil, err
	}
	tr, err := btree.Open(m, "btree")
	if err != nil {
		return nil, err
	}
	opts := btree.BatchOptions{Alg: c.alg, BlockThreads: gopeBlock}
	if err := tr.Stage(g.keys, g.vals, opts); err != nil {
		return nil, err
	}
	res, err := tr.Resume(opts)
	if err != nil {
		return nil, err
	}
	lo, hi := be.LastStart(), be.Now()
	done := func(at uint64, lv int) (bool, error) {
		img, err := be.CrashAt(at)
		if err != nil {
			return false, err
		}
		p, ok, err := btree.Progress(img, "btree")
		return ok && p.Done(lv), err
	}
	rework := make([]uint64, res.Levels)
	for lv := range rework {
		a, b := lo, hi // done(b), find the first such cycle
		for a < b {
			mid := a + (b-a)/2
			ok, err := done(mid, lv)
			if err != nil {
				return nil, err
			}
			if ok {
				b = mid
			} else {
				a = mid + 1
			}
		}
		img, err := be.CrashAt(max(a, lo+1) - 1)
		if err != nil {
			return nil, err
		}
		m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
		if err != nil {
			return nil, err
		}
		tr2, err := btree.OpenPending(m2, "btree")
		if err != nil {
			return nil, err
		}
		rr, err := tr2.Recover(opts)
		if err != nil {
			p, _, _ := btree.Progress(img, "btree")
			return nil, fmt.Errorf("%s: recovery after a crash at cycle %d (level %d, marks %+v): %w", c.name, a-1, lv, p, err)
		}
		for _, l := range rr.Writes {
			rework[lv] += l[lv]
		}
	}
	return rework, nil
}

// runGopeTable3 counts, per level from the leaves, the NV writes of the
// epoch a crash in that level loses and the insertion must write again
// (and measures it: the "/crash" rows crash the run just before the
// level's last epoch became durable and count what recovery rewrote at
// that level):
// with kernel scope (Algorithm 1) every level is one epoch of the whole
// kernel, so the level's writes over all workgroups; with workgroup scope
// (Algorithm 2) the levels up to d are epochs of one workgroup's subtree,
// so one workgroup's writes at that level (the mean and the largest over
// workgroups are both reported), and above d, as for the kernel, the
// level's writes.
func runGopeTable3(ctx context.Context, o Options) ([]Row, error) {
	configs := []gopeConfig{gopeKernel, gopeWG}
	sizes := gopeSizes(o.Quick)
	trees, runs, err := gopeSweep(ctx, o, sizes[len(sizes)-1:], configs, 1)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, trs := range trees {
		if trs == nil {
			continue
		}
		tr := trs[0]
		kr, wg := runs[i][0][0].res, runs[i][0][1].res
		levels := kr.Levels
		for lv := 0; lv < min(levels, 6); lv++ {
			name := "leaf"
			if lv > 0 {
				name = fmt.Sprintf("leaf-%d", lv)
			}
			var krw uint64
			for _, l := range kr.Writes {
				krw += l[lv]
			}
			rows = append(rows, Row{"gope-table3", name, "kernel-scope", "nv_writes", float64(krw)})
			top := len(wg.Writes) - 1
			if lv < levels-wg.Depth {
				var sum, most uint64
				for _, l := range wg.Writes[:top] {
					sum += l[lv]
					most = max(most, l[lv])
				}
				rows = append(rows,
					Row{"gope-table3", name, "workgroup-scope", "nv_writes", float64(sum) / float64(top)},
					Row{"gope-table3", name, "workgroup-scope-max", "nv_writes", float64(most)})
			} else {
				rows = append(rows,
					Row{"gope-table3", name, "workgroup-scope", "nv_writes", float64(wg.Writes[top][lv])},
					Row{"gope-table3", name, "workgroup-scope-max", "nv_writes", float64(wg.Writes[top][lv])})
			}
		}
		for j, c := range configs {
			rework, err := gopeCrashRework(tr, c, o)
			if err != nil {
				return nil, err
			}
			for lv := 0; lv < min(len(rework), 6); lv++ {
				name := "leaf"
				if lv > 0 {
					name = fmt.Sprintf("leaf-%d", lv)
				}
				rows = append(rows, Row{"gope-table3", name, configs[j].name + "/crash", "nv_writes", float64(rework[lv])})
			}
		}
		rows = append(rows, Row{"gope-table3", "tree", mb(tr.bytes), "workgroups", float64(wg.Lanes)},
			Row{"gope-table3", "tree", mb(tr.bytes), "depth_d", float64(wg.Depth)},
			Row{"gope-table3", "tree", mb(tr.bytes), "levels", float64(levels)})
	}
	return rows, nil
}
