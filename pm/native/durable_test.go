//go:build unix

package native_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/scope"
)

// A durability verb in the middle of a launch is a durability point: when
// it returns, the log has been synced (the kernel reads the count of syncs
// through the FS seam right after the verb), and every thread that reaches
// one in the same round shares that one sync. The launch's end then costs
// a sync only for what came after the last round.
func TestMidLaunchDurabilitySyncs(t *testing.T) {
	const n = 1024
	grid := scope.Grid{Blocks: 4, Threads: 256}
	launch := func(m *pm.Machine, k scope.Kernel) error {
		_, err := scope.Launch(m, grid, k)
		return err
	}
	type env struct {
		m    *pm.Machine
		be   *native.Backend
		d    pm.Addr
		seen func(i, k int) // thread i notes the syncs so far after its k-th verb
	}
	cases := []struct {
		name string
		opts native.Options
		do   func(e env) error
		// mid[k]: syncs every thread has seen after its k-th noted verb;
		// total: syncs of the whole call.
		mid   []uint64
		total uint64
	}{
		{"one round of DFences", native.Options{}, func(e env) error {
			return launch(e.m, func(t *scope.Thread) {
				t.Store64(e.d.Add(8*uint64(t.ID())), 1)
				t.DFence()
				e.seen(t.ID(), 0)
			})
		}, []uint64{1}, 1},
		{"two rounds of DFences, stores after the last", native.Options{}, func(e env) error {
			return launch(e.m, func(t *scope.Thread) {
				a := e.d.Add(8 * uint64(t.ID()))
				t.Store64(a, 1)
				t.DFence()
				e.seen(t.ID(), 0)
				t.Store64(a, 2)
				t.OFence()
				t.Store64(a, 3)
				t.DFence()
				e.seen(t.ID(), 1)
				t.Store64(a, 4)
			})
		}, []uint64{1, 2}, 3},
		{"DFence with nothing pending", native.Options{}, func(e env) error {
			return launch(e.m, func(t *scope.Thread) {
				t.Load64(e.d)
				t.DFence()
				e.seen(t.ID(), 0)
			})
		}, []uint64{0}, 0},
		{"EpochBarrier", native.Options{}, func(e env) error {
			return launch(e.m, func(t *scope.Thread) {
				t.Store64(e.d.Add(8*uint64(t.ID())), 1)
				t.EpochBarrier()
				e.seen(t.ID(), 0)
			})
		}, []uint64{1}, 1},
		{"PRel (durable under scoped barriers)", native.Options{}, func(e env) error {
			return launch(e.m, func(t *scope.Thread) {
				t.Store64(e.d.Add(8*uint64(t.ID())), 1)
				t.PRel(e.d.Add(8*n+4*uint64(t.ID())), 1, pm.Device)
				e.seen(t.ID(), 0)
			})
		}, []uint64{1}, 1},
		{"PRel with SBRPReleases only orders", native.Options{SBRPReleases: true}, func(e env) error {
			return launch(e.m, func(t *scope.Thread) {
				t.Store64(e.d.Add(8*uint64(t.ID())), 1)
				t.PRel(e.d.Add(8*n+4*uint64(t.ID())), 1, pm.Device)
				e.seen(t.ID(), 0)
			})
		}, []uint64{0}, 1},
		{"DFence inside Defer only orders", native.Options{}, func(e env) error {
			return e.be.Defer(func() error {
				return launch(e.m, func(t *scope.Thread) {
					t.Store64(e.d.Add(8*uint64(t.ID())), 1)
					t.DFence()
					e.seen(t.ID(), 0)
				})
			})
		}, []uint64{0}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cnt native.Counter
			opts := c.opts
			opts.Mode, opts.FS = native.ModeLog, native.InjectFS(native.OSFS(), &cnt)
			be, m := open(t, t.TempDir(), opts)
			defer be.Close()
			r, err := m.CreateRegion("d", 16*n)
			require.NoError(t, err)
			s0 := cnt.Count(native.FSSync)
			got := make([][]uint64, len(c.mid))
			for k := range got {
				got[k] = make([]uint64, n)
			}
			seen := func(i, k int) { got[k][i] = cnt.Count(native.FSSync) - s0 }
			require.NoError(t, c.do(env{m: m, be: be, d: r.Base, seen: seen}))
			for k, want := range c.mid {
				for i := range n {
					require.Equal(t, want, got[k][i], "syncs seen by thread %d after its verb %d", i, k)
				}
			}
			require.Equal(t, c.total, cnt.Count(native.FSSync)-s0, "syncs of the call")
		})
	}
}

// A CPU task's durability point (an SFence, or COSPlay's CFence, with
// persists pending: durable on return) holds the task while the other
// contexts of the window run, and one sync of the log serves every task
// held together (group commit): n tasks that each store and fence cost
// one sync per window of tasks, not one each, and each task's fence
// returns only after the sync that covers it (the task reads the count
// of syncs through the FS seam right after its fence). A fence with
// nothing pending costs none.
func TestCPUDurabilitySyncs(t *testing.T) {
	const n = 64
	storeFence := func(d pm.Addr, seen []uint64, syncs func() uint64) coro.Task {
		return func(c *coro.Ctx) {
			a := d.Add(8 * uint64(c.ID()))
			c.Store64(a, 1)
			c.CLWB(a)
			c.Fence()
			seen[c.ID()] = syncs()
			c.SFence() // nothing pending
		}
	}
	cases := []struct {
		name  string
		cfg   coro.Config
		tasks int
		// want: the syncs task i has seen after its fence; total: the run's
		want  func(i int) uint64
		total uint64
	}{
		{"baseline, every task active", coro.Config{Mode: coro.Baseline}, n, func(int) uint64 { return 1 }, 1},
		{"baseline, 4 tasks", coro.Config{Mode: coro.Baseline}, 4, func(int) uint64 { return 1 }, 1},
		{"baseline, window of 8", coro.Config{Mode: coro.Baseline, Window: 8}, n, func(i int) uint64 { return uint64(i/8 + 1) }, n / 8},
		{"cosplay, window of 8", coro.Config{Mode: coro.COSPlay, Window: 8}, n, func(i int) uint64 { return uint64(i/8 + 1) }, n / 8},
		{"sbatch, window of 8", coro.Config{Mode: coro.SBatch, Window: 8}, n, func(i int) uint64 { return uint64(i/8 + 1) }, n / 8},
		{"baseline, window of 1", coro.Config{Mode: coro.Baseline, Window: 1}, 8, func(i int) uint64 { return uint64(i + 1) }, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cnt native.Counter
			be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
			defer be.Close()
			r, err := m.CreateRegion("d", 8*n)
			require.NoError(t, err)
			s0 := cnt.Count(native.FSSync)
			syncs := func() uint64 { return cnt.Count(native.FSSync) - s0 }
			seen := make([]uint64, c.tasks)
			tasks := make([]coro.Task, c.tasks)
			for i := range tasks {
				tasks[i] = storeFence(r.Base, seen, syncs)
			}
			_, err = coro.Run(m, tasks, coro.WithConfig(c.cfg))
			require.NoError(t, err)
			require.Equal(t, c.total, syncs(), "syncs of the run (%d tasks, each a store and a fence)", c.tasks)
			for i, s := range seen {
				require.Equal(t, c.want(i), s, "syncs task %d saw after its fence", i)
			}
			buf := make([]byte, 8*c.tasks)
			require.NoError(t, m.CopyOut(r.Base, buf))
			for i := range c.tasks {
				require.Equal(t, uint64(1), pm.GetLE(buf[8*i:8*i+8]), "task %d's word", i)
			}
		})
	}
}

// A CPU task held at a durability point is served within bounded progress
// of the others: a task that waits for the held task's flag by yielding,
// with or without storing between its yields, does not wait forever. A
// deadline turns a hang into a failure.
func TestCPUDurabilityPointProgress(t *testing.T) {
	for _, stores := range []bool{false, true} {
		t.Run(fmt.Sprintf("stores=%v", stores), func(t *testing.T) {
			be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog})
			defer be.Close()
			r, err := m.CreateRegion("d", 4096)
			require.NoError(t, err)
			v, err := m.Alloc(pm.DeviceMem, 64)
			require.NoError(t, err)
			tasks := []coro.Task{
				func(c *coro.Ctx) {
					c.Store64(r.Base, 1)
					c.CLWB(r.Base)
					c.SFence()
					c.Store64(v, 1)
				},
				func(c *coro.Ctx) {
					for i := uint64(1); c.Load64(v) == 0; i++ {
						if stores {
							c.Store64(v.Add(8), i)
						}
						c.Yield()
					}
				},
			}
			done := make(chan error, 1)
			go func() {
				_, err := coro.Run(m, tasks)
				done <- err
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("the held task was never served") // the run's goroutine is left behind
			}
		})
	}
}

// A launch's mid-launch durability point shares its sync with a commit
// another goroutine staged through DeferAsync and has not waited for yet:
// one sync for both, and the waiter then returns without one.
func TestMidLaunchDurabilitySharesSync(t *testing.T) {
	var cnt native.Counter
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
	defer be.Close()
	r, err := m.CreateRegion("d", 4096)
	require.NoError(t, err)
	s0 := cnt.Count(native.FSSync)
	wait, err := be.DeferAsync(func() error { return m.CopyIn(r.Base, le(7)) })
	require.NoError(t, err)
	var mid uint64
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 32}, func(t *scope.Thread) {
		t.Store64(r.Base.Add(64+8*uint64(t.ID())), 1)
		t.DFence()
		mid = cnt.Count(native.FSSync) - s0
	})
	require.NoError(t, err)
	require.Equal(t, uint64(1), mid, "the DFence's sync")
	done := make(chan error)
	go func() { done <- wait() }()
	require.NoError(t, <-done)
	require.Equal(t, uint64(1), cnt.Count(native.FSSync)-s0, "one sync for the staged commit, the DFences and the launch")
}

// A sync that fails at a mid-launch durability point fails the launch with
// ErrIO: no thread returns from its DFence, and the backend refuses the
// next launch with the same error.
func TestMidLaunchDurabilityError(t *testing.T) {
	f := &failer{op: native.FSSync, file: "LOG", err: syscall.EIO}
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), f)})
	defer be.Close()
	r, err := m.CreateRegion("d", 4096)
	require.NoError(t, err)
	f.arm()
	returned := 0
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 64}, func(t *scope.Thread) {
		t.Store64(r.Base.Add(8*uint64(t.ID())), 1)
		t.DFence()
		returned++
	})
	require.ErrorIs(t, err, native.ErrIO)
	require.ErrorIs(t, err, syscall.EIO)
	require.Zero(t, returned, "threads returned from a DFence whose sync failed")
	require.Equal(t, 1, f.hit)
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {})
	require.ErrorIs(t, err, native.ErrIO)
	require.True(t, errors.Is(be.Close(), native.ErrIO))
}

// What a thread persisted before a mid-launch DFence survives a power cut
// at any later point of the launch: during the sync at its end (each
// sector of that record kept or lost at random) or after it. The kernel
// notes how many syncs the journal holds when its DFence returns; every
// cut from there on must keep its data. (Before DFence was a durability
// point, the whole launch was one record at its end, which a cut tears.)
func TestPowerCutMidLaunchDFence(t *testing.T) {
	seed := testSeed(t)
	const n = 256
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true})
	defer be.Close()
	r, err := m.CreateRegion("d", 2*8*n)
	require.NoError(t, err)
	require.NoError(t, be.StartJournal())
	at := make([]int, n)
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: n / 2}, func(t *scope.Thread) {
		i := uint64(t.ID())
		t.Store64(r.Base.Add(8*i), i+1)
		t.DFence()
		at[i] = be.Syncs()
		// The rest of the launch: more persists for its end's sync.
		for k := range uint64(4) {
			t.Store64(r.Base.Add(8*(n+i)), k+1)
			t.OFence()
		}
	})
	require.NoError(t, err)
	total, cuts := be.Syncs(), 0
	for i := range n {
		for s := at[i]; s <= total; s++ {
			for k := range 4 {
				sd := seed + uint64(16*s+k)
				img, err := be.PowerCut(s, sd)
				require.NoError(t, err)
				rg, ok := img.Region("d")
				require.True(t, ok)
				require.Equal(t, uint64(i+1), pm.GetLE(rg.Data[8*i:8*i+8]), "thread %d's data, cut at sync %d of %d (seed %d): its DFence had returned after %d", i, s, total, sd, at[i])
				cuts++
			}
		}
	}
	t.Logf("%d syncs, %d power cuts after a DFence returned, 0 losses", total, cuts)
}

// dfenceChild is the SIGKILL child of TestKillMidLaunchDFence: a kernel
// whose threads persist their words and DFence, then thread 0 tells the
// parent and the launch hangs (it never ends by itself).
func dfenceChild(dir string) error {
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog, Create: true})
	if err != nil {
		return err
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		return err
	}
	r, err := m.CreateRegion("d", 8*64)
	if err != nil {
		return err
	}
	say("ready")
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
		t.Store64(r.Base.Add(8*uint64(t.ID())), uint64(t.ID())+1)
		t.DFence()
		if t.ID() == 0 {
			say("durable")
			time.Sleep(time.Hour) // wait for the kill: the launch never ends
		}
	})
	return fmt.Errorf("the launch ended (%v): it should have been killed", err)
}

// A process SIGKILLed after a mid-launch DFence returned, before the
// launch ends, loses none of what the DFence covered.
func TestKillMidLaunchDFence(t *testing.T) {
	dir := t.TempDir()
	lines := runChild(t, "dfence", dir, nil, func(lines []string) time.Duration {
		if lines[len(lines)-1] == "durable" {
			return 0
		}
		return -1
	})
	require.Equal(t, []string{"ready", "durable"}, lines)
	be, m := open(t, dir, native.Options{Mode: native.ModeLog})
	defer be.Close()
	r, err := m.OpenRegion("d")
	require.NoError(t, err)
	buf := make([]byte, 8*64)
	require.NoError(t, m.CopyOut(r.Base, buf))
	for i := range 64 {
		require.Equal(t, uint64(i+1), pm.GetLE(buf[8*i:8*i+8]), "thread %d's word", i)
	}
}

// A thread held at a durability point is served within bounded progress of
// the others: a thread that keeps running (a loop of stores, or a spin
// loop that stores while it waits for a flag the held thread sets after
// its DFence) cannot hold it back forever, so the launch ends and the
// held DFence returns before the other thread's loop is done. Each case
// runs under a context deadline, so a hang fails the test instead of
// blocking it.
func TestDurabilityPointProgress(t *testing.T) {
	const loop = 1 << 18
	type env struct {
		pmw, flag, gate, ctr pm.Addr
		progress             *uint64 // the writer's stores when the DFence returned
	}
	cases := []struct {
		name   string
		grid   scope.Grid
		kernel func(e env) scope.Kernel
		// bounded: the DFence returned before the writer's loop ended
		bounded bool
	}{
		{"writer spins on the held thread's flag", scope.Grid{Blocks: 1, Threads: 2}, func(e env) scope.Kernel {
			return func(t *scope.Thread) {
				if t.ID() == 0 {
					t.Store64(e.pmw, 1)
					t.DFence()
					t.Store32(e.flag, 1)
					return
				}
				for i := uint64(1); t.Load32(e.flag) == 0; i++ {
					t.Store64(e.ctr, i)
				}
			}
		}, false},
		{"writer woken after the hold spins on its flag", scope.Grid{Blocks: 2, Threads: 32}, func(e env) scope.Kernel {
			return func(t *scope.Thread) {
				switch t.ID() {
				case 0: // warp 0: waits for the gate, then spins storing
					for t.Load32(e.gate) == 0 {
					}
					for i := uint64(1); t.Load32(e.flag) == 0; i++ {
						t.Store64(e.ctr, i)
					}
				case 32: // warp 1: opens the gate and holds at its DFence
					t.Store32(e.gate, 1)
					t.Store64(e.pmw, 1)
					t.DFence()
					t.Store32(e.flag, 1)
				}
			}
		}, false},
		{"long loop of stores", scope.Grid{Blocks: 1, Threads: 2}, func(e env) scope.Kernel {
			return func(t *scope.Thread) {
				if t.ID() == 0 {
					t.Store64(e.pmw, 1)
					t.DFence()
					*e.progress = t.Load64(e.ctr)
					return
				}
				for i := uint64(1); i <= loop; i++ {
					t.Store64(e.ctr, i)
				}
			}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog})
			defer be.Close()
			r, err := m.CreateRegion("d", 4096)
			require.NoError(t, err)
			v, err := m.Alloc(pm.DeviceMem, 64)
			require.NoError(t, err)
			var progress uint64
			e := env{pmw: r.Base, flag: v, gate: v.Add(8), ctr: v.Add(16), progress: &progress}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = scope.Launch(m, c.grid, c.kernel(e), scope.WithContext(ctx))
			require.NoError(t, err, "the held thread was never served")
			if c.bounded {
				require.Less(t, progress, uint64(loop), "the DFence returned only after the writer's loop ended")
				t.Logf("DFence returned after %d of the writer's %d stores", progress, loop)
			}
		})
	}
}

// scope.WithDurabilityBound and coro.WithDurabilityBound set how many
// verbs the others run before held durability verbs are served: a thread
// (task) that loops over stores without waiting lets the held DFence
// (Fence) return, or its sync happen, after about that many of its
// stores, not after the default pm.DurabilityBound. (The CPU task stores
// to PM: a CPU task's volatile stores are not reported to the backend.)
func TestDurabilityBoundOption(t *testing.T) {
	const loop, bound = 1 << 17, 1000
	var syncs atomic.Int64
	fs := native.InjectFS(native.OSFS(), native.InjectorFunc(func(op native.FSOp, path string) error {
		if op == native.FSSync && strings.HasPrefix(filepath.Base(path), "LOG") {
			syncs.Add(1)
		}
		return nil
	}))
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, FS: fs})
	defer be.Close()
	r, err := m.CreateRegion("d", 4096)
	require.NoError(t, err)
	v, err := m.Alloc(pm.DeviceMem, 64)
	require.NoError(t, err)

	var progress uint64
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(t *scope.Thread) {
		if t.ID() == 0 {
			t.Store64(r.Base, 1)
			t.DFence()
			progress = t.Load64(v)
			return
		}
		for i := uint64(1); i <= loop; i++ {
			t.Store64(v, i)
		}
	}, scope.WithDurabilityBound(bound))
	require.NoError(t, err)
	t.Logf("GPU: the DFence returned after %d of the writer's stores (bound %d)", progress, bound)
	require.InDelta(t, bound, float64(progress), bound/10)

	var synced uint64
	s0 := syncs.Load()
	_, err = coro.Run(m, []coro.Task{
		func(c *coro.Ctx) {
			c.Store64(r.Base.Add(8), 1)
			c.CLWB(r.Base.Add(8))
			c.Fence()
		},
		func(c *coro.Ctx) {
			c.Yield() // the first task holds at its fence first
			for i := uint64(1); i <= loop; i++ {
				c.Store64(r.Base.Add(16), i)
				if synced == 0 && syncs.Load() > s0 {
					synced = i
				}
			}
		},
	}, coro.WithDurabilityBound(bound))
	require.NoError(t, err)
	t.Logf("CPU (%d syncs): the held Fence's sync came after %d of the other task's stores (bound %d)", syncs.Load()-s0, synced, bound)
	require.InDelta(t, bound, float64(synced), bound/10)
}
