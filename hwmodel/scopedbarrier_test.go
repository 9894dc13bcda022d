package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// acks returns the durability cycle of every persisted word of the last
// launch, by address.
func acks(be *Backend) map[pm.Addr]uint64 {
	out := map[pm.Addr]uint64{}
	be.Durability(func(a pm.Addr, _ int, ack uint64) { out[a] = max(out[a], ack) })
	return out
}

// An NVW-FIFO tracks lines, not words: eight stores into one line, then a
// persist barrier, write the line back once.
func TestNVWFIFOTracksLines(t *testing.T) {
	cfg := PresetGOPE()
	be, m := setupHW(t, cfg, ScopedBarrier)
	r := region(t, m, "s", 64)
	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		for k := range uint64(8) {
			t.Store64(r.Base.Add(8*k), k+1)
		}
		t.PBarrier(pm.Block)
	})
	require.NoError(t, err)
	st := be.LastLaunch()
	require.Equal(t, uint64(1), st.Flushes, "one write-back for the line")
	require.Equal(t, uint64(64), st.NVMWriteBytes)
}

// A full FIFO sends its head on: one thread stores 40 lines into FIFOs of
// 16 (L1) and 16 (L2) entries and waits long before its barrier; the 8
// lines that overflowed both FIFOs are durable before the barrier, the
// other 32 only after it.
func TestNVWFIFOFullSendsHead(t *testing.T) {
	cfg := PresetGOPE()
	require.NoError(t, cfg.Set("persist.nvw_fifo_l1=16", "persist.nvw_fifo_l2=16"))
	be, m := setupHW(t, cfg, ScopedBarrier)
	const lines = 40
	r := region(t, m, "s", lines*64)
	var barrier uint64
	be.SetTrace(func(ev Event) {
		if ev.Kind == pm.OpPBarrier {
			barrier = ev.Issue
		}
	})
	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		for k := range uint64(lines) {
			t.Store64(r.Base.Add(64*k), k+1)
		}
		t.Work(100000)
		t.PBarrier(pm.Block)
	})
	require.NoError(t, err)
	require.NotZero(t, barrier)
	early := 0
	for k := range uint64(lines) {
		ack := acks(be)[r.Base.Add(64*k)]
		require.NotZero(t, ack)
		if ack < barrier {
			early++
			require.Less(t, k, uint64(8), "line %d left before an older one", k)
		}
	}
	require.Equal(t, lines-16-16, early)
}

// A block-scope persist barrier drains its own SM's L1 FIFO, not another
// SM's: block 1's line stays in its L1 until block 1's own barrier.
func TestScopedBarrierDrainsItsScope(t *testing.T) {
	cfg := PresetGOPE()
	be, m := setupHW(t, cfg, ScopedBarrier)
	r := region(t, m, "s", 2*64)
	sms := make([]int, 2)
	_, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: 1}, func(t *scope.Thread) {
		sms[t.Block()] = t.SM()
		t.Store64(r.Base.Add(uint64(64*t.Block())), 1)
		if t.Block() == 1 {
			t.Work(50000)
		}
		t.PBarrier(pm.Block)
	})
	require.NoError(t, err)
	require.NotEqual(t, sms[0], sms[1], "the blocks share an SM")
	a := acks(be)
	require.Less(t, a[r.Base], uint64(10000)+be.LastStart())
	require.Greater(t, a[r.Base.Add(64)], uint64(50000)+be.LastStart(), "block 0's barrier drained block 1's L1")
}

// The gope machine's L1 is write-combining for volatile stores
// (mem.sfifo_l1): stores into the lines its S-FIFO tracks cross the SM's
// port once, where a write-through L1 sends every store.
func TestWriteCombiningL1(t *testing.T) {
	run := func(sfifo string) uint64 {
		cfg := PresetGOPE()
		require.NoError(t, cfg.Set("mem.sfifo_l1="+sfifo))
		be, m := setupHW(t, cfg, ScopedBarrier)
		a, err := m.Alloc(pm.DeviceMem, 64*16*64)
		require.NoError(t, err)
		_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 16}, func(t *scope.Thread) {
			for k := range uint64(64) {
				line := a.Add(64 * (k*16 + uint64(t.TID())))
				for w := range uint64(8) {
					t.Store64(line.Add(8*w), w)
				}
			}
		})
		require.NoError(t, err)
		return be.LastLaunch().Cycles
	}
	// 512 store instructions of 16 lines: written through, 8,192 line
	// writes of 64 bytes at 32 bytes a cycle (16,384 cycles of the port);
	// combined, 1,024 (2,048 cycles), under the coalescer's line a cycle
	// (8,192 cycles).
	wc, wt := run("16"), run("0")
	t.Logf("write-combining %d cycles, write-through %d", wc, wt)
	require.GreaterOrEqual(t, wt, uint64(16384))
	require.Less(t, wc, wt*6/10)
}
