package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// The persistency re-study's figures (a GPGPU-Sim 4.0 re-study of
// "Exploring Memory Persistency Models for GPUs"): each kernel of a
// category under the nvm baseline and under the schemes of the figure, on
// the volta preset (the re-study's Table I), as execution time normalised
// to the baseline. Every scheme runs the same kernel code
// (workloads.Persister places its verbs) on the write-back GPU of hwmodel's
// WriteBackADR and WriteBackPCT models.

func init() {
	for _, e := range []Experiment{
		{Name: "lin-fig1", Paper: "re-study", Presets: []string{"volta"}, Figure: "Fig. 1", Description: "persistency re-study Fig. 1: short-running (S) kernels under SP_wt, SP_clwb, SP_clwb_pct, EP_K, EP_K_pct, execution time normalised to the nvm baseline, volta preset", Run: linFig(1, "S", linFig1Schemes())},
		{Name: "lin-fig2", Paper: "re-study", Presets: []string{"volta"}, Figure: "Fig. 2", Description: "persistency re-study Fig. 2: long-running kernels with short CTAs (LS) under SP and EP_C (wt, clwb, l2wb), normalised to the nvm baseline, volta preset", Run: linFig(2, "LS", linFig2Schemes())},
		{Name: "lin-fig3", Paper: "re-study", Presets: []string{"volta"}, Figure: "Fig. 3", Description: "persistency re-study Fig. 3: long-running kernels with short CTAs (LS) under durable transactions (undo logging with CTA-level epochs, write-through or CLWB, with and without the idempotency analysis), normalised to the nvm baseline, volta preset", Run: linFig(3, "LS", workloads.UndoSchemes()[2:6])},
		{Name: "lin-fig4", Paper: "re-study", Presets: []string{"volta"}, Figure: "Fig. 4", Description: "persistency re-study Fig. 4: long-running kernels with long CTAs (LL) under SP and EP_L (wt, clwb, clwb_pct), normalised to the nvm baseline, volta preset", Run: linFig(4, "LL", linFig4Schemes())},
		{Name: "lin-fig5", Paper: "re-study", Presets: []string{"volta"}, Figure: "Fig. 5", Description: "persistency re-study Fig. 5: Mega-KV search, insert and delete kernels on a PM hash table under SP, EP_K and EP_K_pct, normalised to the nvm baseline, volta preset", Run: linFig(5, "KV", linFig1Schemes())},
		{Name: "lin-table5", Paper: "re-study", Presets: []string{"volta"}, Figure: "Table V", Description: "persistency re-study Table V by measurement: per kernel, the cheapest persistency scheme and the cheapest durable transaction (undo logging, +idem) of its category that the crash checker accepts (tiny size, 2000 states, seed 1), with their overheads over the nvm baseline", Run: runLinTable5},
		{Name: "lin-fig6", Paper: "re-study", Presets: []string{"volta"}, Figure: "Fig. 6", Description: "persistency re-study Fig. 6: ProgPOW-like DAG generation and search kernels under SP and EP_C, normalised to the nvm baseline, volta preset", Run: linFig(6, "PoW", linFig2Schemes())},
	} {
		Register(e)
	}
}

func linFig1Schemes() []workloads.Scheme {
	return append(append([]workloads.Scheme(nil), workloads.StrictSchemes()...), workloads.KernelSchemes()...)
}

func linFig2Schemes() []workloads.Scheme {
	return append(append([]workloads.Scheme(nil), workloads.StrictSchemes()...), workloads.CTASchemes()...)
}

func linFig4Schemes() []workloads.Scheme {
	return append(append([]workloads.Scheme(nil), workloads.StrictSchemes()...), workloads.LoopSchemes()...)
}

// linRun runs re-study workload name under scheme s on a fresh volta
// machine and returns the time of each of its kernels (see
// workloads.KernelCycles; they add up to the cycles from the end of Setup
// until every launch has ended and its write-backs are acknowledged).
func linRun(name string, s workloads.Scheme, o Options) ([]workloads.KernelCycles, error) {
	size := workloads.Paper
	if o.Quick {
		size = workloads.Quick
	}
	w, err := workloads.NewRestudy(name, size, s)
	if err != nil {
		return nil, err
	}
	m, _, err := o.machine("volta", s.Model(), nil)
	if err != nil {
		return nil, err
	}
	if err := w.Setup(m); err != nil {
		return nil, fmt.Errorf("%s setup: %w", name, err)
	}
	if err := w.Run(m); err != nil {
		return nil, fmt.Errorf("%s under %v: %w", name, s, err)
	}
	if err := w.Check(m); err != nil {
		return nil, fmt.Errorf("%s under %v: %w", name, s, err)
	}
	return w.Kernels(), nil
}

// linKernel is one kernel of a figure: its workload and its index among
// the workload's kernels.
type linKernel struct {
	workload int // index into workloads.RestudyWorkloads()
	kernel   int
	info     workloads.RestudyKernel
}

// linKernels returns the kernels of category cat (every kernel if cat is
// empty), in the order of the workloads and their kernels, and the indices
// of the workloads that have any, in order.
func linKernels(cat string) ([]linKernel, []int) {
	var ks []linKernel
	var ws []int
	for i, w := range workloads.RestudyWorkloads() {
		for j, k := range w.Kernels {
			if cat != "" && k.Category != cat {
				continue
			}
			if len(ws) == 0 || ws[len(ws)-1] != i {
				ws = append(ws, i)
			}
			ks = append(ks, linKernel{i, j, k})
		}
	}
	return ks, ws
}

// linFig returns the runner of re-study figure fig: the kernels of
// category cat (a row each, named as in the re-study: histo2, sad1, ...)
// under the nvm baseline and schemes. A workload runs once per scheme and
// each of its kernels of the category is timed in that run. Rows: per
// kernel and scheme, "cycles", "normalized_time" and "overhead_pct"; per
// scheme, the arithmetic mean of overhead_pct over the kernels that stand
// for the re-study's (RestudyKernel.InPaper: not our accumulation) as
// workload "average" (the re-study averages overheads arithmetically;
// over its own kernels, of which we have a subset: see
// bench/paper/values.csv).
func linFig(fig int, cat string, schemes []workloads.Scheme) func(context.Context, Options) ([]Row, error) {
	exp := fmt.Sprintf("lin-fig%d", fig)
	return func(ctx context.Context, o Options) ([]Row, error) {
		infos := workloads.RestudyWorkloads()
		kernels, ws := linKernels(cat)
		all := append([]workloads.Scheme{workloads.NVM()}, schemes...)
		// times[i][j]: the kernel times of workload ws[i] under all[j].
		times := make([][][]workloads.KernelCycles, len(ws))
		// Announce all the work before any is done: a progress bar never
		// moves backwards.
		total := 0
		for i := range ws {
			if o.mine(i) {
				total += len(all)
			}
		}
		o.progress(total, 0)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(runtime.GOMAXPROCS(0))
		for i, wi := range ws {
			if !o.mine(i) {
				continue
			}
			times[i] = make([][]workloads.KernelCycles, len(all))
			for j, s := range all {
				g.Go(func() error {
					if err := gctx.Err(); err != nil {
						return err
					}
					kc, err := linRun(infos[wi].Name, s, o)
					times[i][j] = kc
					o.progress(0, 1)
					return err
				})
			}
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		var rows []Row
		sum := make([]float64, len(all))
		n := 0
		for _, k := range kernels {
			i := slices.Index(ws, k.workload)
			if times[i] == nil {
				continue
			}
			if k.info.InPaper() {
				n++
			}
			base := float64(times[i][0][k.kernel].Cycles)
			for j, s := range all {
				c := float64(times[i][j][k.kernel].Cycles)
				norm := c / base
				rows = append(rows,
					Row{exp, k.info.Name, s.String(), "cycles", c},
					Row{exp, k.info.Name, s.String(), "normalized_time", norm},
					Row{exp, k.info.Name, s.String(), "overhead_pct", 100 * (norm - 1)})
				if k.info.InPaper() {
					sum[j] += 100 * (norm - 1)
				}
			}
		}
		if n > 0 && o.Shards <= 1 {
			for j, s := range all {
				rows = append(rows, Row{exp, "average", s.String(), "overhead_pct", sum[j] / float64(n)})
			}
		}
		return rows, nil
	}
}

// linCandidates returns the persistency schemes the re-study's figure of
// category cat compares, then the durable transactions of its granularity.
func linCandidates(cat string) []workloads.Scheme {
	u := workloads.UndoSchemes()
	switch cat {
	case "S", "KV":
		return append(linFig1Schemes(), u[0:2]...)
	case "LL":
		return append(linFig4Schemes(), u[6:8]...)
	}
	return append(linFig2Schemes(), u[2:6]...)
}

// linAccepted reports whether the crash checker finds no violation of
// re-study workload name under scheme s at tiny size, and how many states
// it checked.
func linAccepted(name string, s workloads.Scheme) (bool, int, error) {
	w, err := workloads.NewRestudy(name, workloads.Tiny, s)
	if err != nil {
		return false, 0, err
	}
	rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: s.Model(), States: 2000, Seed: 1})
	if err != nil {
		return false, 0, err
	}
	return len(rep.Violations) == 0, rep.Checked, nil
}

// runLinTable5 measures, for every kernel, the candidate schemes of its
// category (the nvm baseline included, which the checker must reject),
// checks each for crash consistency, and picks the cheapest accepted one.
// A workload runs and is checked once per scheme, all its kernels under
// that scheme: a scheme is accepted for a kernel when the whole workload
// recovers under it. Rows per kernel and candidate: overhead_pct, accepted
// (1 or 0), states; per kernel, the persistency pick as config
// "PM=<scheme>" and the durable-transaction pick as "DT=<scheme>" with
// their overhead_pct; and the averages of the picks' overheads over the
// re-study's kernels of the classes S, LS and LL (configs "PM" and "DT";
// like the re-study's, without the Mega-KV and ProgPOW kernels, and
// without our accumulation, which it does not have).
func runLinTable5(ctx context.Context, o Options) ([]Row, error) {
	const exp = "lin-table5"
	type result struct {
		kernels  []workloads.KernelCycles
		accepted bool
		states   int
	}
	infos := workloads.RestudyWorkloads()
	kernels, _ := linKernels("")
	res := make([]map[workloads.Scheme]result, len(infos))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, w := range infos {
		if !o.mine(i) {
			continue
		}
		res[i] = map[workloads.Scheme]result{}
		cands := []workloads.Scheme{workloads.NVM()}
		for _, cat := range w.Categories() {
			for _, s := range linCandidates(cat) {
				if !slices.Contains(cands, s) {
					cands = append(cands, s)
				}
			}
		}
		for _, s := range cands {
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				kc, err := linRun(w.Name, s, o)
				if err != nil {
					return err
				}
				ok, n, err := linAccepted(w.Name, s)
				mu.Lock()
				res[i][s] = result{kc, ok, n}
				mu.Unlock()
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var rows []Row
	var sum, sumDT float64
	n, nDT := 0, 0
	for _, k := range kernels {
		if res[k.workload] == nil {
			continue
		}
		name := k.info.Name
		// The re-study's Table V and its averages cover its Parboil
		// kernels (Table II's classes), not Mega-KV's or ProgPOW's.
		parboil := k.info.InPaper() && (k.info.Category == "S" || k.info.Category == "LS" || k.info.Category == "LL")
		cands := append([]workloads.Scheme{workloads.NVM()}, linCandidates(k.info.Category)...)
		cycles := func(s workloads.Scheme) float64 { return float64(res[k.workload][s].kernels[k.kernel].Cycles) }
		base := cycles(workloads.NVM())
		best, bestDT := -1, -1
		for j, s := range cands {
			r := res[k.workload][s]
			ov := 100 * (cycles(s)/base - 1)
			acc := 0.0
			if r.accepted {
				acc = 1
				b := &best
				if s.Undo {
					b = &bestDT
				}
				if *b < 0 || cycles(s) < cycles(cands[*b]) {
					*b = j
				}
			}
			rows = append(rows, Row{exp, name, s.String(), "overhead_pct", ov},
				Row{exp, name, s.String(), "accepted", acc},
				Row{exp, name, s.String(), "states", float64(r.states)})
		}
		if bestDT < 0 {
			return nil, fmt.Errorf("%s: the crash checker accepts none of the transaction schemes of %v", name, cands)
		}
		if best < 0 {
			// Persistency alone cannot make a non-idempotent kernel
			// recoverable: only a transaction does.
			rows = append(rows, Row{exp, name, "PM=none", "accepted", 0})
		} else {
			ov := 100 * (cycles(cands[best])/base - 1)
			rows = append(rows, Row{exp, name, "PM=" + cands[best].String(), "overhead_pct", ov})
			if parboil {
				sum += ov
				n++
			}
		}
		dt := 100 * (cycles(cands[bestDT])/base - 1)
		rows = append(rows, Row{exp, name, "DT=" + cands[bestDT].String(), "overhead_pct", dt})
		if parboil {
			sumDT += dt
			nDT++
		}
	}
	if nDT > 0 && o.Shards <= 1 {
		rows = append(rows, Row{exp, "average", "PM", "overhead_pct", sum / float64(max(n, 1))},
			Row{exp, "average", "DT", "overhead_pct", sumDT / float64(nDT)})
	}
	return rows, nil
}
