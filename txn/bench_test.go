package txn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

// BenchmarkLogInsert: every thread of a 4×128 grid inserts one 16-byte
// entry, HCL (own slot, no lock) against a conventional log of 8 locked
// partitions, on the functional backend. Reported: host time per insert and
// the verbs and atomics per insert (simulated cycles need the hwmodel
// backend, which this package does not depend on).
func BenchmarkLogInsert(b *testing.B) {
	grid := scope.Grid{Blocks: 4, Threads: 128}
	for _, kind := range []string{"hcl", "conv"} {
		b.Run(kind, func(b *testing.B) {
			var verbs uint64
			insertRounds(b, newBackend(), kind, grid, func(res scope.Result) { verbs += res.Verbs })
			n := float64(b.N) * float64(grid.Total())
			b.ReportMetric(b.Elapsed().Seconds()*1e9/n, "ns/insert")
			b.ReportMetric(float64(verbs)/n, "verbs/insert")
		})
	}
}

// insertRounds runs b.N launches on a fresh machine over be in which every
// thread of grid inserts one 16-byte entry into a log of the given kind
// (HCL, or 8 locked conventional partitions), clearing the log between
// launches outside the timer, and hands each launch's result to each.
func insertRounds(b *testing.B, be pm.Backend, kind string, grid scope.Grid, each func(scope.Result)) {
	m, err := pm.NewMachine(be)
	require.NoError(b, err)
	var l txn.Log
	if kind == "hcl" {
		l, err = txn.CreateHCL(m, "log", grid.Blocks, grid.Threads, 64)
	} else {
		l, err = txn.CreateConv(m, "log", 8, 128*64)
	}
	require.NoError(b, err)
	entry := make([]byte, 16)
	b.ResetTimer()
	for b.Loop() {
		res, err := scope.Launch(m, grid, func(t *scope.Thread) {
			x := txn.GPU(t)
			p, _ := l.Part(x)
			if err := l.Insert(x, p, entry); err != nil {
				panic(err)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		each(res)
		b.StopTimer()
		h := txn.Host(m)
		for p := range l.Parts() {
			_ = l.Clear(h, p)
		}
		b.StartTimer()
	}
}

// BenchmarkTx: undo-log transactions of two 8-byte ranges each, by CPU tasks
// on the functional backend (native speed of the library's logic).
func BenchmarkTx(b *testing.B) {
	for _, kind := range []string{"conv", "hcl"} {
		b.Run(kind, func(b *testing.B) {
			m, err := pm.NewMachine(newBackend())
			require.NoError(b, err)
			const tasks = 4
			var l txn.Log
			if kind == "hcl" {
				l, err = txn.CreateHCL(m, "log", 1, tasks, 256)
			} else {
				l, err = txn.CreateConv(m, "log", tasks, 256)
			}
			require.NoError(b, err)
			d, err := m.CreateRegion("data", 64*tasks)
			require.NoError(b, err)
			per := max(b.N/tasks, 1)
			ts := make([]coro.Task, tasks)
			for i := range ts {
				ts[i] = func(c *coro.Ctx) {
					x := txn.CPU(c)
					p, _ := l.Part(x)
					me := d.Base.Add(uint64(64 * c.ID()))
					for j := 0; j < per; j++ {
						tx, err := txn.Begin(x, l, p)
						if err != nil {
							panic(err)
						}
						_ = tx.Add(me, 8)
						_ = tx.Add(me.Add(32), 8)
						_ = tx.Store64(me, uint64(j))
						_ = tx.Store64(me.Add(32), uint64(j))
						if err := tx.Commit(); err != nil {
							panic(err)
						}
					}
				}
			}
			b.ResetTimer()
			_, err = coro.Run(m, ts)
			require.NoError(b, err)
			b.ReportMetric(float64(per*tasks)/b.Elapsed().Seconds(), "tx/s")
		})
	}
}

// BenchmarkLogInsertCycles: the same grid inserting one entry per thread on
// hwmodel (PM-far, the GPM model, as GPM's hardware), HCL against the
// conventional log; reported in simulated cycles per launch (the latency of
// a round of concurrent inserts) and per insert.
func BenchmarkLogInsertCycles(b *testing.B) {
	grid := scope.Grid{Blocks: 4, Threads: 128}
	for _, kind := range []string{"hcl", "conv"} {
		b.Run(kind, func(b *testing.B) {
			be, err := hwmodel.New(hwmodel.PresetPMFar(), hwmodel.GPM)
			require.NoError(b, err)
			var cycles uint64
			insertRounds(b, be, kind, grid, func(res scope.Result) { cycles += res.Stats.Cycles })
			b.ReportMetric(float64(cycles)/float64(b.N), "sim-cycles/launch")
			b.ReportMetric(float64(cycles)/float64(b.N)/float64(grid.Total()), "sim-cycles/insert")
		})
	}
}
