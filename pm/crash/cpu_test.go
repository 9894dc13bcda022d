package crash_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
)

// cpuCommit is a CPU workload: each task writes a 64-byte record, writes it
// back (CLWB) unless skipFlush, fences, and then sets its commit flag.
// Recovery requires every committed record to be whole. With contexts, each
// task uses its own COSPlay context and fences only it (CFence).
type cpuCommit struct {
	tasks     int
	skipFlush bool
	contexts  bool
}

func (w *cpuCommit) Name() string {
	return fmt.Sprintf("cpu-commit(skip=%v,ctx=%v)", w.skipFlush, w.contexts)
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
			if w.contexts {
				c.CFence(uint64(c.ID()))
			} else {
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
			rep, err := crash.Check(tc.w, pm.DefaultGPU, crash.Config{Model: tc.model, States: 4000, Seed: 2, Shrink: true})
			require.NoError(t, err)
			require.Equal(t, tc.bad, len(rep.Violations) > 0, "%s", rep.Summary())
			if tc.bad && tc.model != crash.None {
				require.Contains(t, rep.Violations[0].Explanation, "cpu_test.go:")
				t.Log(rep.Violations[0].Explanation)
			}
		})
	}
}
