package scope_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// toyClock is a minimal timing backend: every verb costs its warp cost(op)
// cycles, a barrier brings its members to the latest of them, and warps
// issue again at their clock. It checks the engine's side of the timing
// contract: batches, Step, Sync and ready-time order.
type toyClock struct {
	*functional.Backend
	batch     int
	clock     map[int]uint64 // warp -> cycle
	sinceStep map[int]int    // warp -> max verbs of a lane since the last Step
	laneOps   map[int]int    // thread -> verbs since its warp's last Step
	order     []int          // warps in the order their steps ran
	maxBatch  int
	syncs     int
}

func newToyClock(batch int) *toyClock {
	return &toyClock{Backend: functional.New(pm.GPULimits{SMs: 2, WarpSize: 8, MaxThreadsPerSM: 32, MaxBlocksPerSM: 2, MaxThreadsPerBlock: 32}),
		batch: batch, clock: map[int]uint64{}, laneOps: map[int]int{}}
}

func (c *toyClock) Name() string { return "toy" }

func (c *toyClock) Attach(mem *pm.Memory) (pm.Caps, error) {
	caps, err := c.Backend.Attach(mem)
	caps.Ops, caps.Batch = true, c.batch
	return caps, err
}

func cost(op *pm.Op) uint64 {
	if op.Kind == pm.OpDFence {
		return 100
	}
	return 1 + uint64(op.Addr>>pm.OffsetBits)%3 // deterministic, address dependent
}

func (c *toyClock) Op(a *pm.Agent, op *pm.Op) {
	c.clock[a.Warp] += cost(op)
	c.laneOps[a.ID]++
	c.maxBatch = max(c.maxBatch, c.laneOps[a.ID])
}

func (c *toyClock) Sync(group []*pm.Agent) {
	c.syncs++
	var t uint64
	for _, a := range group {
		t = max(t, c.clock[a.Warp])
	}
	for _, a := range group {
		c.clock[a.Warp] = t
	}
}

func (c *toyClock) Step(w int) uint64 {
	c.order = append(c.order, w)
	clear(c.laneOps)
	return c.clock[w]
}

func TestTimingContract(t *testing.T) {
	for _, batch := range []int{1, 3, 64} {
		clk := newToyClock(batch)
		m, err := pm.NewMachine(clk)
		require.NoError(t, err)
		a, err := m.CreateRegion("a", 8*96)
		require.NoError(t, err)
		res, err := scope.Launch(m, scope.Grid{Blocks: 3, Threads: 32}, func(t *scope.Thread) {
			me := a.Base.Add(uint64(8 * t.ID()))
			if t.Warp()%2 == 1 {
				t.DFence() // odd warps fall behind
			}
			for i := range 5 {
				t.Store64(me, t.Load64(me)+uint64(i))
			}
			t.SyncThreads()
			t.Store64(me, t.Load64(me)*2)
		})
		require.NoError(t, err)
		require.LessOrEqual(t, clk.maxBatch, batch, "no lane runs more than a batch per step")
		require.Equal(t, 3, clk.syncs, "one barrier per block")
		require.Greater(t, res.Steps, uint64(12))
		buf := make([]byte, 8*96)
		require.NoError(t, m.CopyOut(a.Base, buf))
		for i := range 96 {
			require.Equal(t, uint64(20), pm.GetLE(buf[8*i:8*i+8]))
		}
		if batch == 1 {
			// Every resident warp (0-7) takes a first step at cycle 0;
			// then the even warps, which are ahead, go first: the odd
			// ones paid 100 cycles for their DFence.
			require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, clk.order[:8])
			for _, w := range clk.order[8:16] {
				require.Equal(t, 0, w%2, "order %v", clk.order[:16])
			}
		}
	}
}

// A warp whose own step opens a barrier is queued with the ready cycle of
// that step, not the one it had before it (found in review of hwmodel).
func TestBarrierInOwnStepKeepsTimeOrder(t *testing.T) {
	clk := newToyClock(64)
	m, err := pm.NewMachine(clk)
	require.NoError(t, err)
	a, err := m.Alloc(pm.DeviceMem, 8*16)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 8}, func(t *scope.Thread) {
		me := a.Add(uint64(8 * t.ID()))
		if t.Block() == 0 {
			t.DFence() // 100 cycles
			t.SyncThreads()
		}
		t.Store64(me, 1)
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(clk.order), 3)
	require.Equal(t, []int{0, 1, 0}, clk.order[:3], "warp 1 (cycle 0) goes before warp 0 (cycle 100)")
}

// loadWaker is toyClock with pm.Waker: its BeginWaking makes loads end
// their lane's step (it never blocks a warp). It counts the verbs a lane
// reported after a load of PM and before its warp's next step.
type loadWaker struct {
	*toyClock
	afterPM  map[int]bool // thread -> its last verb was a load of PM
	late     int          // verbs reported after a load of PM in the same step
	pmLoads  int
	devLoads int
}

func (w *loadWaker) BeginWaking() []pm.OpKind   { return []pm.OpKind{pm.OpLoad} }
func (w *loadWaker) Wake(uint64) []pm.WarpReady { return nil }

func (w *loadWaker) Op(a *pm.Agent, op *pm.Op) {
	w.toyClock.Op(a, op)
	if w.afterPM[a.ID] {
		w.late++
	}
	w.afterPM[a.ID] = op.Kind == pm.OpLoad && op.PM
	if op.Kind == pm.OpLoad {
		if op.PM {
			w.pmLoads++
		} else {
			w.devLoads++
		}
	}
}

func (w *loadWaker) Step(warp int) uint64 {
	clear(w.afterPM)
	return w.toyClock.Step(warp)
}

// A backend that names OpLoad among the verbs that end a step
// (pm.Waker) gets every load of PM as the last verb of its lane's step,
// and loads of other memory in the middle of steps as before.
func TestLoadOfPMEndsStep(t *testing.T) {
	w := &loadWaker{toyClock: newToyClock(64), afterPM: map[int]bool{}}
	m, err := pm.NewMachine(w)
	require.NoError(t, err)
	p, err := m.CreateRegion("p", 8*64)
	require.NoError(t, err)
	d, err := m.Alloc(pm.DeviceMem, 8*64)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
		for i := range 4 {
			t.Load64(d.Add(uint64(8 * t.ID())))
			t.Load64(d.Add(uint64(8 * t.ID())))
			t.Load64(p.Base.Add(uint64(8 * t.ID())))
			var v [2]uint64
			t.Gather64(v[:], p.Base.Add(uint64(8*t.ID())), d.Add(uint64(8*t.ID())))
			t.Store64(d.Add(uint64(8*t.ID())), uint64(i))
		}
	})
	require.NoError(t, err)
	require.Equal(t, 64*4*2, w.pmLoads)
	require.Equal(t, 64*4*3, w.devLoads)
	require.Zero(t, w.late, "a lane went on in its step after a load of PM")
	// Device loads do not end steps: fewer steps than loads.
	require.Less(t, len(w.order), w.pmLoads+w.devLoads)
}

// deferClock is toyClock with pm.Deferrer: after each step of a warp with
// n verbs it owes up to 3 more Steps of that warp, as a backend that times
// a step's instructions one at a time does.
type deferClock struct {
	*toyClock
	owed  map[int]int // warp -> Steps still owed
	since map[int]int // warp -> verbs since its last Step
	extra int         // owed Steps the engine made
	early int         // verbs of a warp that still owed Steps
}

func (d *deferClock) Op(a *pm.Agent, op *pm.Op) {
	if d.owed[a.Warp] > 0 {
		d.early++
	}
	d.since[a.Warp]++
	d.toyClock.Op(a, op)
}

func (d *deferClock) Step(w int) uint64 {
	if d.owed[w] > 0 {
		d.owed[w]--
		d.extra++
		d.clock[w]++
		return d.clock[w]
	}
	d.owed[w] = min(d.since[w], 3)
	d.since[w] = 0
	return d.toyClock.Step(w)
}

func (d *deferClock) Untimed(w int) bool { return d.owed[w] > 0 }

// The engine's side of pm.Deferrer: a warp whose step is not all timed is
// stepped again, without running its lanes, until it is, also after its
// threads have ended; the launch ends only then.
func TestDeferrerContract(t *testing.T) {
	d := &deferClock{toyClock: newToyClock(4), owed: map[int]int{}, since: map[int]int{}}
	m, err := pm.NewMachine(d)
	require.NoError(t, err)
	a, err := m.CreateRegion("a", 8*256)
	require.NoError(t, err)
	_, err = scope.Launch(m, scope.Grid{Blocks: 8, Threads: 32}, func(t *scope.Thread) {
		me := a.Base.Add(uint64(8 * t.ID()))
		for i := range 5 {
			t.Store64(me, t.Load64(me)+uint64(i))
		}
		t.SyncThreads()
		t.Store64(me, t.Load64(me)*2)
	})
	require.NoError(t, err)
	require.Zero(t, d.early, "a warp ran before its step was timed")
	require.Positive(t, d.extra)
	for w, n := range d.owed {
		require.Zero(t, n, "warp %d: the launch ended with Steps owed", w)
	}
	buf := make([]byte, 8*256)
	require.NoError(t, m.CopyOut(a.Base, buf))
	for i := range 256 {
		require.Equal(t, uint64(20), pm.GetLE(buf[8*i:8*i+8]))
	}
}
