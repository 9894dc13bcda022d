package crash_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/record"
)

// cpuCommit is a CPU workload: each task writes a 64-byte record, writes it
// back (CLWB) unless skipFlush, fences, and then sets its commit flag.
// Recovery requires every committed record to be whole. With contexts, each
// task uses its own COSPlay context and fences only it (CFence).
type cpuCommit struct {
	tasks     int
	skipFlush bool
	contexts  bool
	noFence   bool // no fence between the record and the flag
	wrongCtx  bool // with contexts: fence another context than the record's
}

func (w *cpuCommit) Name() string {
	return fmt.Sprintf("cpu-commit(skip=%v,ctx=%v,nofence=%v,wrongctx=%v)", w.skipFlush, w.contexts, w.noFence, w.wrongCtx)
}

func (w *cpuCommit) Setup(m *pm.Machine) error {
	_, err := m.CreateRegion("recs", uint64(64*w.tasks))
	if err == nil {
		_, err = m.CreateRegion("flags", uint64(64*w.tasks)) // one line per flag
	}
	return err
}

func (w *cpuCommit) Run(m *pm.Machine) error {
	recs, _ := m.OpenRegion("recs")
	flags, _ := m.OpenRegion("flags")
	tasks := make([]coro.Task, w.tasks)
	for i := range tasks {
		tasks[i] = func(c *coro.Ctx) {
			if w.contexts {
				c.SetCtx(uint64(c.ID()))
			}
			rec := recs.Base.Add(uint64(64 * c.ID()))
			for k := range 8 {
				c.Store64(rec.Add(uint64(8*k)), uint64(c.ID()+1)*100+uint64(k))
				if k == 3 {
					c.Yield()
				}
			}
			if !w.skipFlush {
				c.CLWB(rec)
			}
			switch {
			case w.noFence:
			case w.contexts && w.wrongCtx:
				c.CFence(uint64(c.ID() + 100))
			case w.contexts:
				c.CFence(uint64(c.ID()))
			default:
				c.SFence()
			}
			flag := flags.Base.Add(uint64(64 * c.ID()))
			c.Store64(flag, 1)
			c.CLWB(flag)
			c.SFence()
		}
	}
	_, err := coro.Run(m, tasks)
	return err
}

func (w *cpuCommit) Recover(*pm.Machine) error { return nil }

func (w *cpuCommit) Check(m *pm.Machine) error {
	recs, _ := m.OpenRegion("recs")
	flags, _ := m.OpenRegion("flags")
	for i := range w.tasks {
		f, _ := m.Memory().Load(flags.Base.Add(uint64(64*i)), 8)
		if f != 1 {
			continue
		}
		for k := range 8 {
			v, _ := m.Memory().Load(recs.Base.Add(uint64(64*i+8*k)), 8)
			if v != uint64(i+1)*100+uint64(k) {
				return fmt.Errorf("task %d committed but word %d is %d", i, k, v)
			}
		}
	}
	return nil
}

func TestCPUModels(t *testing.T) {
	for _, tc := range []struct {
		w     *cpuCommit
		model crash.Model
		bad   bool
	}{
		{&cpuCommit{tasks: 2}, crash.X86, false},
		{&cpuCommit{tasks: 2, skipFlush: true}, crash.X86, true},
		{&cpuCommit{tasks: 2, contexts: true}, crash.COSPlay, false},
		{&cpuCommit{tasks: 2, contexts: true, skipFlush: true}, crash.COSPlay, true},
		{&cpuCommit{tasks: 2}, crash.None, true},
		{&cpuCommit{tasks: 2, skipFlush: true}, crash.Strict, false},
	} {
		t.Run(tc.w.Name()+"/"+tc.model.String(), func(t *testing.T) {
			rep, err := crash.Check(tc.w, pm.DefaultGPU(), crash.Config{Model: tc.model, States: 4000, Seed: 2, Shrink: true})
			require.NoError(t, err)
			require.Equal(t, tc.bad, len(rep.Violations) > 0, "%s", rep.Summary())
			if tc.bad && tc.model != crash.None {
				require.Contains(t, rep.Violations[0].Explanation, "cpu_test.go:")
				t.Log(rep.Violations[0].Explanation)
			}
		})
	}
}

// cpuTrace records one CPU task's verbs by hand (core 0).
type cpuTrace struct{ ev []record.Event }

func (tr *cpuTrace) op(op pm.Op) {
	a := pm.Agent{Kind: pm.CPUTask, ID: 0, Unit: 0, Block: -1, Warp: -1}
	tr.ev = append(tr.ev, record.Event{Agent: a, Seq: uint64(len(tr.ev)), Op: op})
}

func (tr *cpuTrace) store(a pm.Addr) {
	tr.op(pm.Op{Kind: pm.OpStore, PM: true, Size: 8, Addr: a, Value: 1})
}

func (tr *cpuTrace) verb(k pm.OpKind, a pm.Addr, v uint64) {
	tr.op(pm.Op{Kind: k, Scope: pm.Thread, Addr: a, Value: v})
}

// A CLWB's write-back belongs to the persist context the CLWB is issued in
// (COSPlay §4.3: a clwb enters the store queue and the write-back buffer
// with the context register's cid, and cfence cid waits for that cid's
// stores and clwbs), not to the contexts its line's persists were stored
// in. Persist A is stored in context 1 and written back from context 2;
// then B is stored. A CFence(2) makes A durable and orders it before B; a
// CFence(1) does neither (and DurableReturns does not require it to wait
// for A); an SFence does both. Under X86 every fence covers the core.
func TestCPUCLWBContext(t *testing.T) {
	const xA, xB pm.Addr = 1 << 40, 1<<40 + 4096
	for _, tc := range []struct {
		name    string
		model   crash.Model
		fence   pm.OpKind
		cid     uint64
		ordered bool
	}{
		{"cfence of the clwb's context", crash.COSPlay, pm.OpCFence, 2, true},
		{"cfence of the store's context", crash.COSPlay, pm.OpCFence, 1, false},
		{"sfence", crash.COSPlay, pm.OpSFence, 0, true},
		{"x86 cfence of the store's context", crash.X86, pm.OpCFence, 1, true},
	} {
		t.Run(tc.model.String()+"/"+tc.name, func(t *testing.T) {
			var tr cpuTrace
			tr.verb(pm.OpSetCtx, 0, 1)
			tr.store(xA)
			tr.verb(pm.OpSetCtx, 0, 2)
			tr.verb(pm.OpCLWB, xA, 0)
			tr.verb(tc.fence, 0, tc.cid)
			fence := len(tr.ev) - 1
			tr.verb(pm.OpSetCtx, 0, tc.cid)
			tr.store(xB)
			g := crash.Build(tr.ev, tc.model)
			require.Len(t, g.Persists, 2)
			lostA := crash.State{Point: len(tr.ev), Kept: []bool{false, true}}
			done := make([]uint64, len(g.Events))
			for i := range done {
				done[i] = math.MaxUint64
			}
			done[fence] = 50
			err := crash.DurableReturns(g, []uint64{100, 100}, done)
			if tc.ordered {
				require.ErrorIs(t, g.Valid(lostA), crash.ErrState)
				require.ErrorIs(t, err, crash.ErrRefinement)
				require.ErrorContains(t, err, "returned at cycle 50")
			} else {
				require.NoError(t, g.Valid(lostA))
				require.NoError(t, err)
			}
		})
	}
}

// A CPU task program's report speaks of tasks, their fences (SFence,
// CFence) and persist contexts, not of GPU threads and their fences.
func TestCPUReportWords(t *testing.T) {
	for _, tc := range []struct {
		w     *cpuCommit
		model crash.Model
		want  []string
	}{
		{&cpuCommit{tasks: 2, contexts: true, noFence: true}, crash.COSPlay, []string{"by task 0 (core 0)", "no ordering verb (SFence, CFence, ...) between them in task 0"}},
		{&cpuCommit{tasks: 2, noFence: true}, crash.X86, []string{"by task 0 (core 0)", "no ordering verb (SFence, CFence, ...) between them in task 0"}},
		{&cpuCommit{tasks: 2, contexts: true, wrongCtx: true}, crash.COSPlay, []string{"the same task's CFence(100) at crash/cpu_test.go:", "fences context 100, not context 0 of the lost persist"}},
	} {
		t.Run(tc.w.Name()+"/"+tc.model.String(), func(t *testing.T) {
			const seed = 2
			t.Logf("seed = %d", seed)
			rep, err := crash.Check(tc.w, pm.DefaultGPU(), crash.Config{Model: tc.model, States: 4000, Seed: seed, Shrink: true})
			require.NoError(t, err)
			require.NotEmpty(t, rep.Violations, rep.Summary())
			x := rep.Violations[0].Explanation
			t.Log(x)
			for _, w := range tc.want {
				require.Contains(t, x, w)
			}
			for _, w := range []string{"thread", "OFence", "DFence"} {
				require.NotContains(t, x, w)
			}
		})
	}
}
