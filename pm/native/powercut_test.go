//go:build unix

package native_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/internal/testkit/long"
	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/workloads"
)

var (
	flagLong = flag.Bool("native.long", false, "run the long crash tests (as "+long.Env+"=1 does)")
	flagSeed = flag.Uint64("native.seed", 0, "seed of the randomized crash tests (0: from the clock); every test logs the seed it used")
)

// longRun reports whether the long crash tests run: with -native.long or
// in the repository's long run (SCOPEDPM_LONG=1, internal/testkit/long).
// Together they hold issue 27's counts: >= 1,000 SIGKILLs, >= 10,000 power
// cuts and >= 1,000 injected I/O faults over gpKVS, the B+tree and every
// workload.
func longRun() bool { return *flagLong || long.Enabled() }

// testSeed returns the seed of a randomized test and logs how to replay it.
func testSeed(t *testing.T) uint64 {
	s := *flagSeed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	env := ""
	if longRun() {
		env = long.Env + "=1 " // the long run's counts
	}
	t.Logf("seed = %d (replay: %sgo test ./pm/native -run '%s$' -native.seed=%d)", s, env, t.Name(), s)
	return s
}

// orderCase is a kernel over a PM region "d" of words and the invariant
// every durable image must keep.
type orderCase struct {
	name   string
	grid   scope.Grid
	kernel func(d, v pm.Addr) scope.Kernel // d: PM words, v: volatile words
	holds  func(w func(i int) uint64) (bool, string)
	broken bool // no ordering: some power cut must break the invariant
}

const words = 512

var orderCases = []orderCase{
	{
		name: "ofence", grid: scope.Grid{Blocks: 2, Threads: 64},
		kernel: func(d, _ pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				i := uint64(t.ID())
				t.Store64(d.Add(8*i), i+1)
				t.OFence()
				t.Store64(d.Add(8*(128+i)), 1)
			}
		},
		holds: flagImpliesData,
	},
	{
		// No fence: the models allow the flag to persist first, but the
		// log keeps issue order, so no cut breaks it here (crash/ is
		// where such a bug is caught).
		name: "no fence (ordered by the log)", grid: scope.Grid{Blocks: 2, Threads: 64},
		kernel: func(d, _ pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				i := uint64(t.ID())
				t.Store64(d.Add(8*i), i+1)
				t.Store64(d.Add(8*(128+i)), 1)
			}
		},
		holds: flagImpliesData,
	},
	{
		// The control: the flag is stored before its data in program
		// order, which no backend can save. A cut that splits a thread's
		// pair (possible once MaxPending syncs mid-launch) must break the
		// invariant, or the harness could not fail.
		name: "flag before data (control)", grid: scope.Grid{Blocks: 2, Threads: 64}, broken: true,
		kernel: func(d, _ pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				i := uint64(t.ID())
				t.Store64(d.Add(8*(128+i)), 1)
				t.Store64(d.Add(8*i), i+1)
			}
		},
		holds: flagImpliesData,
	},
	{
		name: "prel/pacq across blocks", grid: scope.Grid{Blocks: 2, Threads: 64},
		kernel: func(d, v pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				i := uint64(t.TID())
				if t.Block() == 0 {
					t.Store64(d.Add(8*i), i+1)
					t.SyncThreads()
					if i == 0 {
						t.PRel(v, 1, pm.Device)
					}
					return
				}
				for t.PAcq(v, pm.Device) == 0 {
				}
				t.Store64(d.Add(8*(128+i)), 1)
			}
		},
		holds: func(w func(int) uint64) (bool, string) {
			// Block 0's thread 0 released after its own store only (the
			// SyncThreads orders nothing), so: flag => data[0].
			for i := range 64 {
				if w(128+i) == 1 && w(0) != 1 {
					return false, "block 1 persisted before block 0's released data"
				}
			}
			return true, ""
		},
	},
	{
		name: "dfence then release", grid: scope.Grid{Blocks: 2, Threads: 64},
		kernel: func(d, v pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				switch t.ID() {
				case 0:
					t.Store64(d, 1)
					t.DFence()
					t.PRel(v, 1, pm.Device)
				case 100:
					for t.PAcq(v, pm.Device) == 0 {
					}
					t.Store64(d.Add(8*128), 1)
				}
			}
		},
		holds: func(w func(int) uint64) (bool, string) {
			if w(128) == 1 && w(0) != 1 {
				return false, "a store after acquiring from a DFence persisted before it"
			}
			return true, ""
		},
	},
	{
		// The re-study's CTA epoch with an L2WB: thread 0, which stores
		// nothing itself, writes the whole L2 back after the block meets,
		// then sets the block's flag.
		name: "l2wb of other threads' persists", grid: scope.Grid{Blocks: 1, Threads: 128},
		kernel: func(d, _ pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				i := uint64(t.TID())
				if i > 0 {
					t.Store64(d.Add(8*i), i+1)
				}
				t.SyncThreads()
				if i == 0 {
					t.L2WB()
					t.MemBar()
					t.Store64(d.Add(8*300), 1)
				}
			}
		},
		holds: func(w func(int) uint64) (bool, string) {
			if w(300) != 1 {
				return true, ""
			}
			for i := 1; i < 128; i++ {
				if w(i) != uint64(i+1) {
					return false, "the flag after an L2WB persisted before another thread's earlier store"
				}
			}
			return true, ""
		},
	},
	{
		name: "block pbarrier", grid: scope.Grid{Blocks: 1, Threads: 128},
		kernel: func(d, _ pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				i := uint64(t.TID())
				t.Store64(d.Add(8*i), i+1)
				t.PBarrier(pm.Block)
				if i == 5 {
					t.Store64(d.Add(8*300), 1)
				}
			}
		},
		holds: func(w func(int) uint64) (bool, string) {
			if w(300) != 1 {
				return true, ""
			}
			for i := range 128 {
				if w(i) != uint64(i+1) {
					return false, "the barrier's later persist before a member's earlier one"
				}
			}
			return true, ""
		},
	},
	{
		name: "coherence of one word", grid: scope.Grid{Blocks: 1, Threads: 32},
		kernel: func(d, _ pm.Addr) scope.Kernel {
			return func(t *scope.Thread) {
				i := uint64(t.TID())
				for k := uint64(1); k <= 4; k++ {
					t.Store64(d.Add(8*i), k)
					t.OFence()
					t.Store64(d.Add(8*(128+i)), k)
					t.OFence()
				}
			}
		},
		holds: func(w func(int) uint64) (bool, string) {
			for i := range 32 {
				if w(128+i) > w(i) {
					return false, "a later value's marker before the value"
				}
			}
			return true, ""
		},
	},
}

func flagImpliesData(w func(int) uint64) (bool, string) {
	for i := range 128 {
		if w(128+i) == 1 && w(i) != uint64(i+1) {
			return false, "flag persisted before its data"
		}
	}
	return true, ""
}

// Every power cut of every sync of each kernel keeps its invariant; the
// control kernel, which orders nothing, is caught.
func TestPowerCutOrdering(t *testing.T) {
	seed := testSeed(t)
	for _, c := range orderCases {
		for _, maxPending := range []int{0, 7} { // 7: flush mid-launch often
			t.Run(fmt.Sprintf("%s/maxpending=%d", c.name, maxPending), func(t *testing.T) {
				testOrderCase(t, c, seed, maxPending)
			})
		}
	}
}

func testOrderCase(t *testing.T, c orderCase, seed uint64, maxPending int) {
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true, MaxPending: maxPending})
	defer be.Close()
	r, err := m.CreateRegion("d", 8*words)
	require.NoError(t, err)
	v, err := m.Alloc(pm.DeviceMem, 8)
	require.NoError(t, err)
	require.NoError(t, be.StartJournal())
	_, err = scope.Launch(m, c.grid, c.kernel(r.Base, v))
	require.NoError(t, err)
	n := be.Syncs()
	cuts, broken := 0, 0
	for s := 0; s <= n; s++ {
		for k := range 16 {
			img, err := be.PowerCut(s, seed+uint64(k))
			require.NoError(t, err)
			rg, ok := img.Region("d")
			require.True(t, ok)
			ok, why := c.holds(func(i int) uint64 { return pm.GetLE(rg.Data[8*i : 8*i+8]) })
			cuts++
			if !ok {
				broken++
				require.True(t, c.broken, "cut at sync %d of %d, seed %d: %s", s, n, seed+uint64(k), why)
			}
		}
	}
	t.Logf("%d syncs, %d power cuts, %d broke the invariant", n, cuts, broken)
	if c.broken && maxPending > 0 {
		// With one sync per launch the launch is all or nothing.
		require.NotZero(t, broken, "the unordered control kernel was never caught")
	}
}

// CPU tasks: a store made durable with CLWB+SFence is ordered before the
// task's later stores, also across coroutine switches.
func TestPowerCutCPU(t *testing.T) {
	seed := testSeed(t)
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true})
	defer be.Close()
	r, err := m.CreateRegion("d", 8*words)
	require.NoError(t, err)
	require.NoError(t, be.StartJournal())
	task := func(c *coro.Ctx) {
		for k := range 8 {
			i := uint64(c.ID()*8 + k)
			c.Store64(r.Base.Add(8*i), i+1)
			c.CLWB(r.Base.Add(8 * i))
			c.SFence()
			c.Store64(r.Base.Add(8*(128+i)), 1)
			c.Yield()
		}
	}
	_, err = coro.Run(m, []coro.Task{task, task, task, task})
	require.NoError(t, err)
	n, cuts := be.Syncs(), 0
	for s := 0; s <= n; s++ {
		for k := range 16 {
			img, err := be.PowerCut(s, seed+uint64(k))
			require.NoError(t, err)
			rg, _ := img.Region("d")
			ok, why := flagImpliesData(func(i int) uint64 { return pm.GetLE(rg.Data[8*i : 8*i+8]) })
			require.True(t, ok, "cut at sync %d, seed %d: %s", s, seed+uint64(k), why)
			cuts++
		}
	}
	t.Logf("%d syncs, %d power cuts", n, cuts)
}

// Threads share syncs: 256 threads with two DFences each cost two syncs
// of the log (one per round of DFences, which every thread reaches before
// the sync; the launch's end finds nothing left), not 512; counted both by
// Stats and by the file system seam.
func TestGroupCommit(t *testing.T) {
	var cnt native.Counter
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, FS: native.InjectFS(native.OSFS(), &cnt)})
	defer be.Close()
	r, err := m.CreateRegion("d", 8*2*256)
	require.NoError(t, err)
	before, syncs := be.Stats(), cnt.Count(native.FSSync)
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 128}, func(t *scope.Thread) {
		i := uint64(t.ID())
		t.Store64(r.Base.Add(8*i), i)
		t.DFence()
		t.Store64(r.Base.Add(8*(256+i)), i)
		t.DFence()
	})
	require.NoError(t, err)
	got := be.Stats()
	t.Logf("512 DFences: %d syncs of the log, %d bytes", got.Syncs-before.Syncs, got.SyncBytes-before.SyncBytes)
	require.Equal(t, uint64(2), got.Syncs-before.Syncs)
	require.Equal(t, uint64(2), cnt.Count(native.FSSync)-syncs)
}

// correctWorkloads are the workloads without a seeded bug.
func correctWorkloads() []string {
	var out []string
	for _, nd := range workloads.Names() {
		if !strings.Contains(nd[0], "nofence") && !strings.Contains(nd[0], "no-ofence") && !strings.Contains(nd[0], "narrow") {
			out = append(out, nd[0])
		}
	}
	return out
}

// Power failures across the workloads: each runs once on the native
// backend with a journal, then crashes at seeded random syncs with a seeded
// random subset of the unsynced words; every crash image recovers and
// passes Check. The long run (longRun) makes >= 10,000 cuts, over the Tiny
// and the Quick size of each workload.
func TestPowerCutWorkloads(t *testing.T) {
	seed := testSeed(t)
	names := correctWorkloads()
	sizes := []workloads.Size{workloads.Tiny}
	total := 50 * len(names)
	if longRun() {
		total = 10_000
		sizes = append(sizes, workloads.Quick)
	}
	per := (total + len(names)*len(sizes) - 1) / (len(names) * len(sizes))
	sum := 0
	for wi, name := range names {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				w, err := workloads.New(name, size)
				require.NoError(t, err)
				be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true})
				defer be.Close()
				require.NoError(t, w.Setup(m))
				require.NoError(t, be.StartJournal())
				require.NoError(t, w.Run(m))
				n := be.Syncs()
				rng := rand.New(rand.NewPCG(seed, uint64(wi)<<8|uint64(size)))
				for k := range per {
					s, cs := rng.IntN(n+1), rng.Uint64()
					img, err := be.PowerCut(s, cs)
					require.NoError(t, err)
					m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
					require.NoError(t, err)
					require.NoError(t, w.Recover(m2), "cut %d at sync %d of %d, cut seed %d", k, s, n, cs)
					require.NoError(t, w.Check(m2), "cut %d at sync %d of %d, cut seed %d", k, s, n, cs)
				}
				sum += per
				t.Logf("%d syncs, %d power cuts recovered", n, per)
			})
		}
	}
	t.Logf("%d power cuts across %d workloads, 0 losses (mode log)", sum, len(names))
}

// The seeded intra-thread bugs of the workloads (an OFence removed) let a
// model persist an update before its log entry; the log never does (it
// keeps issue order, and the update follows the entry in program order),
// so every power cut of these workloads recovers here. They are bugs all
// the same: crash/, which explores what the models allow, catches them.
// (The harness's ability to fail is TestPowerCutOrdering's control.)
func TestPowerCutLogOrdersUnfencedWorkloads(t *testing.T) {
	seed := testSeed(t)
	for _, name := range []string{"gpkvs-no-ofence", "hashmap-nofence"} {
		t.Run(name, func(t *testing.T) {
			w, err := workloads.New(name, workloads.Tiny)
			require.NoError(t, err)
			be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true, MaxPending: 5})
			defer be.Close()
			require.NoError(t, w.Setup(m))
			require.NoError(t, be.StartJournal())
			require.NoError(t, w.Run(m))
			n, cuts := be.Syncs(), 0
			for s := 0; s <= n; s++ {
				for k := range 4 {
					img, err := be.PowerCut(s, seed+uint64(k))
					require.NoError(t, err)
					m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
					require.NoError(t, err)
					cuts++
					require.NoError(t, w.Recover(m2), "cut at sync %d of %d, seed %d", s, n, seed+uint64(k))
					require.NoError(t, w.Check(m2), "cut at sync %d of %d, seed %d", s, n, seed+uint64(k))
				}
			}
			t.Logf("%d syncs, %d cuts, all recovered", n, cuts)
		})
	}
}

// Persists of one word by threads at different epochs reach the file in
// the order they were stored: thread 0 stores the word after two fences
// (a late epoch), thread 1 then stores it without any (an early epoch).
func TestCoherenceAcrossThreads(t *testing.T) {
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true})
	r, err := m.CreateRegion("d", 64)
	require.NoError(t, err)
	require.NoError(t, be.StartJournal())
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(t *scope.Thread) {
		if t.TID() == 0 {
			t.Store64(r.Base, 1)
			t.OFence()
			t.Store64(r.Base.Add(8), 1)
			t.OFence()
			t.Store64(r.Base.Add(16), 1)
			return
		}
		t.Store64(r.Base.Add(16), 2)
		t.Store64(r.Base.Add(24), 2)
	})
	require.NoError(t, err)
	for s := 0; s <= be.Syncs(); s++ {
		img, err := be.PowerCut(s, uint64(s))
		require.NoError(t, err)
		rg, _ := img.Region("d")
		w := pm.GetLE(rg.Data[16:24])
		if s == be.Syncs() {
			require.Equal(t, uint64(2), w, "the last store of the word is the durable one")
		}
	}
	img, err := m.Crash()
	require.NoError(t, err)
	rg, _ := img.Region("d")
	require.Equal(t, uint64(2), pm.GetLE(rg.Data[16:24]))
}

// A B+tree whose Puts and Deletes each run inside Defer (one sync per
// commit) recovers from a power cut at every sync, also syncs that
// MaxPending forces in the middle of a Put: the log keeps the tree's
// order, which is all its recovery needs. The recovered tree passes Check
// and holds a prefix of the operations.
func TestPowerCutBTreeDefer(t *testing.T) {
	seed := testSeed(t)
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true, MaxPending: 3})
	defer be.Close()
	tr, err := btree.Create(m, "tree", btree.Options{Capacity: 1024})
	require.NoError(t, err)
	require.NoError(t, be.StartJournal())
	const ops = 24
	for k := range uint64(ops) {
		require.NoError(t, be.Defer(func() error {
			if k%4 == 3 {
				_, err := tr.Delete(k - 2)
				return err
			}
			return tr.Put(k, k*10)
		}))
	}
	// state(j): the keys after the first j operations.
	state := func(j int) map[uint64]uint64 {
		s := map[uint64]uint64{}
		for k := range uint64(j) {
			if k%4 == 3 {
				delete(s, k-2)
			} else {
				s[k] = k * 10
			}
		}
		return s
	}
	n := be.Syncs()
	rng := rand.New(rand.NewPCG(seed, 4))
	last := 0
	for s := 0; s <= n; s++ {
		cs := rng.Uint64()
		img, err := be.PowerCut(s, cs)
		require.NoError(t, err)
		m2, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
		require.NoError(t, err)
		tr2, err := btree.Open(m2, "tree")
		require.NoError(t, err, "cut at sync %d of %d, cut seed %d", s, n, cs)
		require.NoError(t, tr2.Check(), "cut at sync %d of %d, cut seed %d", s, n, cs)
		got := map[uint64]uint64{}
		for k, v := range tr2.All() {
			got[k] = v
		}
		j := -1
		for c := last; c <= ops; c++ {
			if maps.Equal(got, state(c)) {
				j = c
				break
			}
		}
		require.GreaterOrEqual(t, j, 0, "cut at sync %d of %d (cut seed %d): %v is no prefix of the operations at or after %d", s, n, cs, got, last)
		last = j
	}
	require.Equal(t, ops, last)
	t.Logf("%d operations, %d syncs, every cut recovered a prefix", ops, n)
}

// gpKVS batches on the persist log take one sync each (kvs defers its
// launches' durability points to the batch's end), and a power cut at
// every sync still recovers a prefix of the batches: each batch whole or
// not at all, every acknowledged one there. With MaxPending 3, a kernel
// batch's persists are cut into several syncs, and the undo log makes
// the batch whole or nothing; a host batch is one record (DeferAtomic)
// with no undo log.
func TestPowerCutKVSBatches(t *testing.T) {
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("host=%v", host), func(t *testing.T) { powerCutKVSBatches(t, host) })
	}
}

// powerCutKVSBatches is TestPowerCutKVSBatches with the batches as kernels
// or, with host, as host code (kvs.HostBatches).
func powerCutKVSBatches(t *testing.T, host bool) {
	seed := testSeed(t)
	var opts []kvs.Option
	if host {
		opts = append(opts, kvs.HostBatches())
	}
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true, MaxPending: 3})
	defer be.Close()
	st, err := kvs.Create(m, kvs.Config{Buckets: 64, MaxBatch: 16, BlockThreads: 16}, opts...)
	require.NoError(t, err)
	require.NoError(t, be.StartJournal())
	rng := rand.New(rand.NewPCG(seed, 5))
	states := []map[uint32]uint64{{}}
	syncs0 := be.Syncs()
	const batches = 30
	for b := range batches {
		s := maps.Clone(states[b])
		ks := rng.Perm(40)[:1+rng.IntN(16)]
		keys, vals := make([]uint32, len(ks)), make([]uint64, len(ks))
		for i, k := range ks {
			keys[i], vals[i] = uint32(k+1), uint64(b*100+i)
		}
		if b%4 == 3 {
			_, err = st.DeleteBatch(keys)
			for _, k := range keys {
				delete(s, k)
			}
		} else {
			_, err = st.SetBatch(keys, vals)
			for i, k := range keys {
				s[k] = vals[i]
			}
		}
		require.NoError(t, err)
		states = append(states, s)
	}
	n := be.Syncs()
	if host {
		// kvs issues a host batch with DeferAtomic: one record, which
		// MaxPending does not cut.
		require.Equal(t, batches, n-syncs0, "one sync per host batch")
	} else {
		require.Greater(t, n-syncs0, 3*batches, "MaxPending cuts the batches into several syncs each")
	}
	cut := rand.New(rand.NewPCG(seed, 6))
	last := 0
	for s := 0; s <= n; s++ {
		cs := cut.Uint64()
		what := fmt.Sprintf("cut at sync %d of %d, cut seed %d", s, n, cs)
		got := cutKVS(t, be, s, cs, what)
		j := slices.IndexFunc(states[last:], func(w map[uint32]uint64) bool { return maps.Equal(got, w) })
		require.GreaterOrEqual(t, j, 0, "%s: the store is no prefix of the batches at or after %d", what, last)
		last += j
	}
	require.Equal(t, batches, last)

	// Without MaxPending, a batch is one sync (its four launches share it).
	be2, m2 := open(t, t.TempDir(), native.Options{Mode: native.ModeLog})
	defer be2.Close()
	st2, err := kvs.Create(m2, kvs.Config{Buckets: 64, MaxBatch: 16, BlockThreads: 16}, opts...)
	require.NoError(t, err)
	before := be2.Stats().Syncs
	_, err = st2.SetBatch([]uint32{1, 2, 3}, []uint64{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, st2.Put(4, 4))
	require.EqualValues(t, 2, be2.Stats().Syncs-before, "one sync per batch")
}

// cutKVS returns the gpKVS store "gpkvs" as a power cut at sync s (cut
// seed cs) leaves it, recovered and checked.
func cutKVS(t *testing.T, be *native.Backend, s int, cs uint64, what string) map[uint32]uint64 {
	t.Helper()
	img, err := be.PowerCut(s, cs)
	require.NoError(t, err, what)
	m, err := pm.Reopen(img, functional.New(pm.GPULimits{}))
	require.NoError(t, err, what)
	st, err := kvs.Open(m, "gpkvs")
	require.NoError(t, err, what)
	_, err = st.Recover()
	require.NoError(t, err, what)
	require.NoError(t, st.Check(), what)
	got, err := st.Contents()
	require.NoError(t, err, what)
	return got
}

// Four goroutines make gpKVS host batches at once (kvs.HostBatches, the
// store's calls serialised), each setting its own 8 keys to its round
// number, with MaxPending 3 so syncs fall inside batches. A power cut at
// every sync recovers, for each writer, its keys all at one round (a
// batch whole or not at all), never below the round of an earlier cut,
// and the store's invariant (Check).
func TestPowerCutKVSConcurrent(t *testing.T) {
	const writers, keysPer, rounds = 4, 8, 12
	be, m := open(t, t.TempDir(), native.Options{Mode: native.ModeLog, Journal: true, MaxPending: 3})
	defer be.Close()
	st, err := kvs.Create(m, kvs.Config{Buckets: 256, MaxBatch: keysPer}, kvs.HostBatches())
	require.NoError(t, err)
	require.NoError(t, be.StartJournal())
	key := func(w, i int) uint32 { return uint32(100*(w+1) + i) }
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			keys, vals := make([]uint32, keysPer), make([]uint64, keysPer)
			for r := uint64(1); r <= rounds; r++ {
				for i := range keys {
					keys[i], vals[i] = key(w, i), r
				}
				if _, err := st.SetBatch(keys, vals); err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n := be.Syncs()
	last := make([]uint64, writers)
	for s := 0; s <= n; s++ {
		what := fmt.Sprintf("cut at sync %d of %d", s, n)
		got := cutKVS(t, be, s, uint64(s), what)
		stored := 0
		for w := range writers {
			r := got[key(w, 0)]
			if r > 0 {
				stored += keysPer
			}
			for i := range keysPer {
				require.Equal(t, r, got[key(w, i)], "%s: writer %d's keys hold different rounds (a batch in part)", what, w)
			}
			require.GreaterOrEqual(t, r, last[w], "%s: writer %d went back", what, w)
			last[w] = r
		}
		require.Len(t, got, stored, what)
	}
	require.Equal(t, []uint64{rounds, rounds, rounds, rounds}, last)
	t.Logf("%d writers x %d batches, a cut at each of %d syncs recovered whole batches", writers, rounds, n)
}
