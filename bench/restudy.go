package bench

import (
	"context"
	"fmt"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/workloads"
)

// The persistency re-study's figures (a GPGPU-Sim 4.0 re-study of
// "Exploring Memory Persistency Models for GPUs"): each kernel of a
// category under the nvm baseline and under the schemes of the figure, on
// the volta preset (the re-study's Table I), as execution time normalised
// to the baseline. Every scheme runs the same kernel code
// (workloads.Persister places its verbs) on the write-back GPU of hwmodel's
// Restudy and RestudyPCT models.

func init() {
	for _, e := range []Experiment{
		{Name: "lin-fig1", Paper: "re-study", Figure: "Fig. 1", Description: "persistency re-study Fig. 1: short-running (S) kernels under SP_wt, SP_clwb, SP_clwb_pct, EP_K, EP_K_pct, execution time normalised to the nvm baseline, volta preset", Run: linFig(1, "S", linFig1Schemes())},
		{Name: "lin-fig2", Paper: "re-study", Figure: "Fig. 2", Description: "persistency re-study Fig. 2: long-running kernels with short CTAs (LS) under SP and EP_C (wt, clwb, l2wb), normalised to the nvm baseline, volta preset", Run: linFig(2, "LS", linFig2Schemes())},
		{Name: "lin-fig3", Paper: "re-study", Figure: "Fig. 3", Description: "persistency re-study Fig. 3: long-running kernels with short CTAs (LS) under durable transactions (undo logging with CTA-level epochs, write-through or CLWB, with and without the idempotency analysis), normalised to the nvm baseline, volta preset", Run: linFig(3, "LS", persistency.UndoSchemes[2:6])},
		{Name: "lin-fig4", Paper: "re-study", Figure: "Fig. 4", Description: "persistency re-study Fig. 4: long-running kernels with long CTAs (LL) under SP and EP_L (wt, clwb, clwb_pct), normalised to the nvm baseline, volta preset", Run: linFig(4, "LL", linFig4Schemes())},
		{Name: "lin-fig5", Paper: "re-study", Figure: "Fig. 5", Description: "persistency re-study Fig. 5: Mega-KV search, insert and delete kernels on a PM hash table under SP, EP_K and EP_K_pct, normalised to the nvm baseline, volta preset", Run: linFig(5, "KV", linFig1Schemes())},
		{Name: "lin-table5", Paper: "re-study", Figure: "Table V", Description: "persistency re-study Table V by measurement: per kernel, the cheapest persistency scheme and the cheapest durable transaction (undo logging, +idem) of its category that the crash checker accepts (tiny size, 2000 states, seed 1), with their overheads over the nvm baseline", Run: runLinTable5},
		{Name: "lin-fig6", Paper: "re-study", Figure: "Fig. 6", Description: "persistency re-study Fig. 6: ProgPOW-like DAG generation and search kernels under SP and EP_C, normalised to the nvm baseline, volta preset", Run: linFig(6, "PoW", linFig2Schemes())},
	} {
		Register(e)
	}
}

func linFig1Schemes() []persistency.Scheme {
	return append(append([]persistency.Scheme(nil), persistency.StrictSchemes...), persistency.KernelSchemes...)
}

func linFig2Schemes() []persistency.Scheme {
	return append(append([]persistency.Scheme(nil), persistency.StrictSchemes...), persistency.CTASchemes...)
}

func linFig4Schemes() []persistency.Scheme {
	return append(append([]persistency.Scheme(nil), persistency.StrictSchemes...), persistency.LoopSchemes...)
}

// linRun runs re-study workload name under scheme s on a fresh volta
// machine and returns the cycles from the end of Setup until every launch
// has ended and its write-backs are acknowledged.
func linRun(name string, s persistency.Scheme, o Options) (uint64, error) {
	size := workloads.Paper
	if o.Quick {
		size = workloads.Quick
	}
	w, err := workloads.NewRestudy(name, size, s)
	if err != nil {
		return 0, err
	}
	cfg := hwmodel.PresetVolta()
	if err := cfg.Set(o.Set...); err != nil {
		return 0, err
	}
	be, err := hwmodel.New(cfg, s.Model())
	if err != nil {
		return 0, err
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		return 0, err
	}
	if err := w.Setup(m); err != nil {
		return 0, fmt.Errorf("%s setup: %w", name, err)
	}
	t0 := be.Now()
	if err := w.Run(m); err != nil {
		return 0, fmt.Errorf("%s under %v: %w", name, s, err)
	}
	c := be.Now() - t0
	if err := w.Check(m); err != nil {
		return 0, fmt.Errorf("%s under %v: %w", name, s, err)
	}
	return c, nil
}

// linFig returns the runner of re-study figure fig: the workloads of
// category cat under the nvm baseline and schemes. Rows: per workload and
// scheme, "cycles", "normalized_time" and "overhead_pct"; per scheme, the
// arithmetic mean of overhead_pct over the workloads as workload "average"
// (the re-study averages overheads arithmetically).
func linFig(fig int, cat string, schemes []persistency.Scheme) func(context.Context, Options) ([]Row, error) {
	exp := fmt.Sprintf("lin-fig%d", fig)
	return func(ctx context.Context, o Options) ([]Row, error) {
		var names []string
		for _, w := range workloads.RestudyWorkloads() {
			if w.Category == cat {
				names = append(names, w.Name)
			}
		}
		all := append([]persistency.Scheme{persistency.NVM}, schemes...)
		cycles := make([][]uint64, len(names))
		// Announce all the work before any is done: a progress bar never
		// moves backwards.
		total := 0
		for i := range names {
			if o.mine(i) {
				total += len(all)
			}
		}
		o.progress(total, 0)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(runtime.GOMAXPROCS(0))
		for i, name := range names {
			if !o.mine(i) {
				continue
			}
			cycles[i] = make([]uint64, len(all))
			for j, s := range all {
				g.Go(func() error {
					if err := gctx.Err(); err != nil {
						return err
					}
					c, err := linRun(name, s, o)
					cycles[i][j] = c
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
		for i, name := range names {
			if cycles[i] == nil {
				continue
			}
			n++
			base := float64(cycles[i][0])
			for j, s := range all {
				norm := float64(cycles[i][j]) / base
				rows = append(rows,
					Row{exp, name, s.String(), "cycles", float64(cycles[i][j])},
					Row{exp, name, s.String(), "normalized_time", norm},
					Row{exp, name, s.String(), "overhead_pct", 100 * (norm - 1)})
				sum[j] += 100 * (norm - 1)
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
func linCandidates(cat string) []persistency.Scheme {
	u := persistency.UndoSchemes
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
func linAccepted(name string, s persistency.Scheme) (bool, int, error) {
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

// runLinTable5 measures every candidate scheme of each workload (the nvm
// baseline included, which the checker must reject), checks each for crash
// consistency, and picks the cheapest accepted one. Rows per workload and
// candidate: overhead_pct, accepted (1 or 0), states; per workload, the
// persistency pick as config "PM=<scheme>" and the durable-transaction
// pick as "DT=<scheme>" with their overhead_pct; and the averages of the
// picks' overheads (configs "PM" and "DT").
func runLinTable5(ctx context.Context, o Options) ([]Row, error) {
	const exp = "lin-table5"
	type result struct {
		cycles   uint64
		accepted bool
		states   int
	}
	infos := workloads.RestudyWorkloads()
	res := make([][]result, len(infos))
	cands := make([][]persistency.Scheme, len(infos))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, w := range infos {
		if !o.mine(i) {
			continue
		}
		cands[i] = append([]persistency.Scheme{persistency.NVM}, linCandidates(w.Category)...)
		res[i] = make([]result, len(cands[i]))
		for j, s := range cands[i] {
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				c, err := linRun(w.Name, s, o)
				if err != nil {
					return err
				}
				ok, n, err := linAccepted(w.Name, s)
				res[i][j] = result{c, ok, n}
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
	for i, w := range infos {
		if res[i] == nil {
			continue
		}
		base := float64(res[i][0].cycles)
		best, bestDT := -1, -1
		for j, s := range cands[i] {
			r := res[i][j]
			ov := 100 * (float64(r.cycles)/base - 1)
			acc := 0.0
			if r.accepted {
				acc = 1
				b := &best
				if s.Undo {
					b = &bestDT
				}
				if *b < 0 || r.cycles < res[i][*b].cycles {
					*b = j
				}
			}
			rows = append(rows, Row{exp, w.Name, s.String(), "overhead_pct", ov},
				Row{exp, w.Name, s.String(), "accepted", acc},
				Row{exp, w.Name, s.String(), "states", float64(r.states)})
		}
		if bestDT < 0 {
			return nil, fmt.Errorf("%s: the crash checker accepts none of the transaction schemes of %v", w.Name, cands[i])
		}
		if best < 0 {
			// Persistency alone cannot make a non-idempotent kernel
			// recoverable: only a transaction does.
			rows = append(rows, Row{exp, w.Name, "PM=none", "accepted", 0})
		} else {
			ov := 100 * (float64(res[i][best].cycles)/base - 1)
			rows = append(rows, Row{exp, w.Name, "PM=" + cands[i][best].String(), "overhead_pct", ov})
			sum += ov
			n++
		}
		dt := 100 * (float64(res[i][bestDT].cycles)/base - 1)
		rows = append(rows, Row{exp, w.Name, "DT=" + cands[i][bestDT].String(), "overhead_pct", dt})
		sumDT += dt
		nDT++
	}
	if nDT > 0 && o.Shards <= 1 {
		rows = append(rows, Row{exp, "average", "PM", "overhead_pct", sum / float64(max(n, 1))},
			Row{exp, "average", "DT", "overhead_pct", sumDT / float64(nDT)})
	}
	return rows, nil
}
