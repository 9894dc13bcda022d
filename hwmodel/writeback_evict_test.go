package hwmodel

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// smallL2 is the volta preset with a 16 KB L2 (8 sets of 16 ways of 128
// bytes), so that a short store stream overflows it.
func smallL2() Config {
	c := PresetVolta()
	c.L2.SizeBytes, c.L2.Assoc = 16<<10, 16
	return c
}

// durabilities returns the durable cycle of every persist Durability
// reports, in order.
func durabilities(be *Backend) []uint64 {
	var acks []uint64
	be.Durability(func(_ pm.Addr, _ int, ack uint64) { acks = append(acks, ack) })
	return acks
}

// A store stream larger than the L2 writes the dirty lines it evicts back
// to NVM (one dirty 32-byte sector each), and so does a load stream that
// evicts them; the evicted stores become durable in the order they were
// made (LRU evicts the oldest line of a set first), the lines still in the
// L2 do not. Under PCT the evicted write-backs wait in the WPQs: nothing
// is durable until a PCommit, which makes exactly the evicted ones durable.
func TestWriteBackEvictionsWriteBack(t *testing.T) {
	cfg := smallL2()
	lines := cfg.L2.SizeBytes / cfg.L2.LineBytes
	for _, tc := range []struct {
		name    string
		model   Model
		stores  int // lines stored, in order
		loads   int // lines loaded afterwards (other lines)
		evicted int
	}{
		{"store stream, adr", WriteBackADR, 4 * lines, 0, 3 * lines},
		{"store stream, pct", WriteBackPCT, 4 * lines, 0, 3 * lines},
		{"stores then loads, adr", WriteBackADR, lines, lines, lines},
		{"fits the L2", WriteBackADR, lines, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, m := setupHW(t, cfg, tc.model)
			p := region(t, m, "p", uint64(tc.stores)*128)
			q := region(t, m, "q", uint64(max(tc.loads, 1))*128)
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
				for i := range tc.stores {
					t.Store64(p.Base.Add(uint64(128*i)), uint64(i+1))
				}
				for i := range tc.loads {
					t.Load64(q.Base.Add(uint64(128 * i)))
				}
			})
			require.NoError(t, err)
			st, rs := be.LastLaunch(), be.WriteBackStats()
			t.Logf("%d evictions, %d NVM bytes written, %d cycles", rs.Evictions, st.NVMWriteBytes, st.Cycles)
			require.Equal(t, uint64(tc.evicted), rs.Evictions)
			require.Equal(t, uint64(32*tc.evicted), st.NVMWriteBytes, "a dirty sector per evicted line")
			require.Equal(t, st.NVMWriteBytes, rs.EvictedBytes)
			acks := durabilities(be)
			require.Len(t, acks, tc.stores)
			for i, a := range acks {
				switch {
				case i >= tc.evicted || tc.model == WriteBackPCT:
					require.Equal(t, uint64(math.MaxUint64), a, "store %d", i)
				case i > 0:
					require.GreaterOrEqual(t, a, acks[i-1], "store %d durable before store %d", i, i-1)
				}
			}
			if tc.model == WriteBackPCT {
				// Nothing durable at the end of the launch, nor at the
				// start of the next; a PCommit drains the evicted lines.
				img, err := be.CrashAt(be.Now())
				require.NoError(t, err)
				require.Zero(t, word(t, img, "p", 0))
				_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
					t.PCommit()
					t.MemBar()
				})
				require.NoError(t, err)
				acks = durabilities(be)
				for i, a := range acks {
					require.Equal(t, i >= tc.evicted, a == math.MaxUint64, "store %d", i)
				}
			}
			if tc.evicted == 0 {
				return
			}
			// The image at each write-back's ack holds a prefix of the
			// stream: the evicted lines up to it, none after it.
			for _, k := range []int{0, tc.evicted / 2, tc.evicted - 1} {
				img, err := be.CrashAt(acks[k])
				require.NoError(t, err)
				require.Equal(t, uint64(k+1), word(t, img, "p", 128*k), "line %d at its ack", k)
				if k+1 < tc.stores && acks[k+1] > acks[k] {
					require.Zero(t, word(t, img, "p", 128*(k+1)), "line %d before its ack", k+1)
				}
			}
			if tc.evicted < tc.stores {
				img, err := be.CrashAt(be.Now())
				require.NoError(t, err)
				require.Zero(t, word(t, img, "p", 128*(tc.stores-1)), "the last line stays dirty in the L2")
			}
		})
	}
}

// An evicting store does not wait for the write-back of the line it
// evicts (the write-back buffer), and no MemBar waits for it: a store
// stream that evicts costs its stores' issue cycles and nothing more.
func TestWriteBackEvictionDoesNotStall(t *testing.T) {
	cfg := smallL2()
	lines := cfg.L2.SizeBytes / cfg.L2.LineBytes
	run := func(n int) (Stats, WriteBackStats) {
		be, m := setupHW(t, cfg, WriteBackADR)
		p := region(t, m, "p", uint64(n)*128)
		_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
			for i := range n {
				t.Store64(p.Base.Add(uint64(128*i)), uint64(i))
			}
			t.MemBar()
		})
		require.NoError(t, err)
		return be.LastLaunch(), be.WriteBackStats()
	}
	// The same number of stores, to lines that fit and to lines that do
	// not.
	fits, _ := run(lines)
	evicts, rs := run(2 * lines)
	require.Positive(t, rs.Evictions)
	t.Logf("%d lines: %d cycles; %d lines: %d cycles, %d evictions", lines, fits.Cycles, 2*lines, evicts.Cycles, rs.Evictions)
	// One issue cycle more per store; the launch ends once the evictions'
	// write-backs are queued too, a transfer or two after the last store.
	require.GreaterOrEqual(t, evicts.Cycles, fits.Cycles+uint64(lines), "one issue cycle more per store")
	require.LessOrEqual(t, evicts.Cycles, fits.Cycles+uint64(lines)+8, "no write-back waited for")
	require.Equal(t, fits.Stalls.DFence, evicts.Stalls.DFence, "the MemBar waits for the last store's ack only")
}

// A kernel's end writes nothing back: a line left dirty by one launch is
// not durable when the next begins (nor at any cycle of it) unless that
// launch writes it back (CLWB or L2WB, then MemBar) and, under PCT, commits
// it. A host event that touches PM (here CopyIn to another region) flushes
// the GPU's caches: the dirty line is durable after it.
func TestWriteBackDirtyAcrossLaunches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		model   Model
		second  func(t *scope.Thread, a pm.Addr)
		host    bool
		durable bool
	}{
		{"nothing", WriteBackADR, func(*scope.Thread, pm.Addr) {}, false, false},
		{"membar alone", WriteBackADR, func(t *scope.Thread, _ pm.Addr) { t.MemBar() }, false, false},
		{"l2wb", WriteBackADR, func(t *scope.Thread, _ pm.Addr) { t.L2WB(); t.MemBar() }, false, true},
		{"clwb", WriteBackADR, func(t *scope.Thread, a pm.Addr) { t.CLWB(a); t.MemBar() }, false, true},
		{"pct l2wb without pcommit", WriteBackPCT, func(t *scope.Thread, _ pm.Addr) { t.L2WB(); t.MemBar() }, false, false},
		{"pct l2wb, pcommit", WriteBackPCT, func(t *scope.Thread, _ pm.Addr) {
			t.L2WB()
			t.MemBar()
			t.PCommit()
			t.MemBar()
		}, false, true},
		{"host copy-in", WriteBackADR, func(*scope.Thread, pm.Addr) {}, true, true},
		{"pct host copy-in", WriteBackPCT, func(*scope.Thread, pm.Addr) {}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, m := setupHW(t, PresetVolta(), tc.model)
			p := region(t, m, "p", 128)
			q := region(t, m, "q", 128)
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
				t.Store64(p.Base, 7)
				t.MemBar()
			})
			require.NoError(t, err)
			if tc.host {
				require.NoError(t, m.CopyIn(q.Base, []byte{1}))
			}
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) { tc.second(t, p.Base) })
			require.NoError(t, err)
			start, err := be.CrashAt(be.LastStart())
			require.NoError(t, err)
			require.Equal(t, tc.host, word(t, start, "p", 0) == 7, "durable at the second launch's start only after a host event")
			end, err := be.Crash()
			require.NoError(t, err)
			want := uint64(0)
			if tc.durable {
				want = 7
			}
			require.Equal(t, want, word(t, end, "p", 0))
		})
	}
}
