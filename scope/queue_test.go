package scope_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// stackProbe is a batching backend (Caps.Batch > 0) that checks where and
// when Op runs: not on a simulated thread's stack, in the order the verbs
// ran, with the data they had, and before the Step or Sync that follows.
type stackProbe struct {
	*functional.Backend
	onThread int      // Op calls made from inside a kernel
	kinds    []string // verbs in the order reported
	pending  int      // verbs since the last Step
	synced   int      // verbs reported before the last Sync
	data     [][]byte
}

func (p *stackProbe) Attach(mem *pm.Memory) (pm.Caps, error) {
	c, err := p.Backend.Attach(mem)
	c.Ops, c.Batch = true, 8
	return c, err
}

func (p *stackProbe) Op(a *pm.Agent, op *pm.Op) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "TestOpsLeaveThreadStack.func") {
			p.onThread++
		}
		if !more {
			break
		}
	}
	p.kinds = append(p.kinds, op.Kind.String())
	if op.Data != nil {
		p.data = append(p.data, append([]byte(nil), op.Data...))
	}
	p.pending++
}

func (p *stackProbe) Sync(group []*pm.Agent) { p.synced = len(p.kinds) }

func (p *stackProbe) Step(w int) uint64 {
	p.pending = 0
	return 0
}

// TestOpsLeaveThreadStack checks that under a batching backend the engine
// reports verbs from its scheduler, not from the simulated thread's stack
// (so a thread's memory does not depend on the backend's frame sizes),
// without losing their order or data: a kernel that reuses its buffer for
// a second StoreBytes before its step ends still reports both contents.
func TestOpsLeaveThreadStack(t *testing.T) {
	p := &stackProbe{Backend: functional.New(pm.DefaultGPU())}
	m, err := pm.NewMachine(p)
	require.NoError(t, err)
	r, err := m.CreateRegion("r", 4096)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(th *scope.Thread) {
		buf := []byte{1, 2, 3, 4}
		a := r.Base.Add(uint64(64 * th.TID()))
		th.StoreBytes(a, buf)
		buf[0] = 9 // reused before the engine reports the verb
		th.StoreBytes(a.Add(8), buf)
		th.SyncThreads()
		th.Store64(a.Add(16), 7)
	})
	require.NoError(t, err)
	require.Zero(t, p.onThread, "Op ran on a simulated thread's stack")
	require.Equal(t, []string{"Store", "Store", "SyncThreads", "Store", "Store", "SyncThreads", "Store", "Store"}, p.kinds)
	require.Equal(t, 6, p.synced, "every verb before the barrier is reported before Sync")
	require.Equal(t, [][]byte{{1, 2, 3, 4}, {9, 2, 3, 4}, {1, 2, 3, 4}, {9, 2, 3, 4}}, p.data)
}
