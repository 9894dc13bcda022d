package txn_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

// Each agent owns 64 bytes of data; its transaction i (i = 1, 2) sets two
// ranges, [0,24) and [32,48), to the byte value 16*agent+i.
const (
	agentBytes = 64
	rangeA     = 24
	rangeB     = 16
	offB       = 32
)

func stateOf(b []byte, id int) (int, bool) {
	for v := range 3 {
		want := byte(0xee)
		if v > 0 {
			want = byte(16*id + v)
		}
		if bytes.Equal(b[:rangeA], bytes.Repeat([]byte{want}, rangeA)) &&
			bytes.Equal(b[offB:offB+rangeB], bytes.Repeat([]byte{want}, rangeB)) {
			return v, true
		}
	}
	return 0, false
}

// runTxs runs two transactions per agent: with nesting, optionally in the
// epochs 1 and 2 of the agent's lane.
func runTxs(x txn.Exec, l txn.Log, est *txn.EST, data pm.Addr) error {
	id := x.Who().ID
	part, err := l.Part(x)
	if err != nil {
		return err
	}
	me := data.Add(uint64(agentBytes * id))
	for i := 1; i <= 2; i++ {
		var tx *txn.Tx
		if est != nil {
			tx, err = txn.BeginEpoch(x, l, part, est, id, uint64(i))
		} else {
			tx, err = txn.Begin(x, l, part)
		}
		if err != nil {
			return err
		}
		v := byte(16*id + i)
		if err := tx.Add(me, rangeA); err != nil {
			return err
		}
		if err := tx.StoreBytes(me, bytes.Repeat([]byte{v}, rangeA)); err != nil {
			return err
		}
		if err := tx.Begin(); err != nil { // nested
			return err
		}
		if err := tx.Add(me.Add(offB), rangeB); err != nil {
			return err
		}
		for w := 0; w < rangeB; w += 8 {
			if err := tx.Store64(me.Add(uint64(offB+w)), 0x0101010101010101*uint64(v)); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil { // inner: nothing yet
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

func TestTxCrashEveryPrefix(t *testing.T) {
	cases := []struct {
		name   string
		log    string
		cpu    bool
		agents int
		epoch  bool
	}{
		{"gpu-hcl", "hcl", false, 4, false},
		{"gpu-conv", "conv", false, 4, false},
		{"cpu-conv", "conv", true, 3, false},
		{"cpu-hcl", "hcl", true, 3, false},
		{"cpu-cpulog", "cpu", true, 3, false},
		{"cpu-cpulog-epoch", "cpu", true, 2, true},
		{"gpu-hcl-warp", "hcl", false, 32, false},
		{"gpu-hcl-epoch", "hcl", false, 4, true},
		{"cpu-conv-epoch", "conv", true, 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, rec := newRecorded(t)
			dr, err := m.CreateRegion("data", uint64(agentBytes*c.agents))
			require.NoError(t, err)
			require.NoError(t, m.CopyIn(dr.Base, bytes.Repeat([]byte{0xee}, agentBytes*c.agents)))
			var l txn.Log
			switch c.log {
			case "hcl":
				l, err = txn.CreateHCL(m, "log", 1, c.agents, 256)
			case "cpu":
				l, err = txn.CreateCPU(m, "log", c.agents, 256)
			default:
				l, err = txn.CreateConv(m, "log", c.agents, 256)
			}
			require.NoError(t, err)
			var est *txn.EST
			if c.epoch {
				est, err = txn.CreateEST(m, "est", c.agents)
				require.NoError(t, err)
			}
			base := m.Memory().Snapshot()

			errs := make([]error, c.agents)
			if c.cpu {
				tasks := make([]coro.Task, c.agents)
				for i := range tasks {
					tasks[i] = func(ctx *coro.Ctx) {
						x := txn.CPU(ctx)
						errs[ctx.ID()] = runTxs(x, l, est, dr.Base)
					}
				}
				_, err = coro.Run(m, tasks)
			} else {
				_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: c.agents}, func(th *scope.Thread) {
					errs[th.ID()] = runTxs(txn.GPU(th), l, est, dr.Base)
				})
			}
			require.NoError(t, err)
			for i, e := range errs {
				require.NoError(t, e, "agent %d", i)
			}
			ps := rec.Persists()
			t.Logf("%d persists", len(ps))
			seen := map[int]bool{}
			last := make([]int, c.agents)
			forEachPrefix(t, base, ps, func(k int, m2 *pm.Machine) {
				h := txn.Host(m2)
				var l2 txn.Log
				var err error
				switch c.log {
				case "hcl":
					l2, err = txn.OpenHCL(m2, "log")
				case "cpu":
					l2, err = txn.OpenCPU(m2, "log")
				default:
					l2, err = txn.OpenConv(m2, "log")
				}
				require.NoError(t, err)
				require.NoError(t, l2.Check(h), "prefix %d", k)
				var est2 *txn.EST
				if c.epoch {
					est2, err = txn.OpenEST(m2, "est")
					require.NoError(t, err)
					require.NoError(t, est2.Check(h))
				}
				epochs := make([]uint64, c.agents)
				for id := range c.agents {
					part := id
					if hl, ok := l2.(*txn.HCL); ok {
						part, err = hl.Slot(0, id/32, id%32)
						require.NoError(t, err)
					}
					if c.epoch {
						epochs[id], _, err = txn.RecoverEpoch(h, l2, part, est2, id)
					} else {
						_, err = txn.Recover(h, l2, part)
					}
					require.NoError(t, err, "prefix %d agent %d", k, id)
				}
				require.NoError(t, l2.Check(h))
				for id := range c.agents {
					d := readPM(t, m2, mustRegion(t, m2, "data").Add(uint64(agentBytes*id)), agentBytes)
					v, ok := stateOf(d, id)
					require.True(t, ok, "prefix %d agent %d: torn state %x", k, id, d)
					require.GreaterOrEqual(t, v, last[id], "prefix %d agent %d went back", k, id)
					last[id] = v
					if c.epoch {
						require.Equal(t, uint64(v), epochs[id], "prefix %d agent %d: data of epoch %d, table says %d", k, id, v, epochs[id])
					}
					if id == 0 {
						seen[v] = true
					}
					sz, err := l2.Size(h, 0)
					require.NoError(t, err)
					require.Zero(t, sz, "recovery empties the log")
				}
				if k == len(ps) {
					for id := range c.agents {
						require.Equal(t, 2, last[id], "agent %d: all persists give the final state", id)
					}
				}
			})
			require.Len(t, seen, 3, "agent 0 was seen in its old, middle and new state")
		})
	}
}

func mustRegion(t testing.TB, m *pm.Machine, name string) pm.Addr {
	r, err := m.OpenRegion(name)
	require.NoError(t, err)
	return r.Base
}

func TestTxAbortNestingErrors(t *testing.T) {
	m := newMachine(t)
	dr, err := m.CreateRegion("data", 256)
	require.NoError(t, err)
	require.NoError(t, m.CopyIn(dr.Base, bytes.Repeat([]byte{7}, 256)))
	l, err := txn.CreateConv(m, "log", 2, 1024)
	require.NoError(t, err)
	h := txn.Host(m)

	tx, err := txn.Begin(h, l, 0)
	require.NoError(t, err)
	require.NoError(t, tx.Add(dr.Base, 16))
	require.NoError(t, tx.Store64(dr.Base, 1))
	require.ErrorIs(t, tx.Store64(dr.Base.Add(16), 1), txn.ErrNotAdded)
	require.ErrorIs(t, tx.StoreBytes(dr.Base.Add(8), make([]byte, 16)), txn.ErrNotAdded)
	require.ErrorIs(t, tx.Add(dr.Base, 0), txn.ErrBadArg)
	require.NoError(t, tx.Begin())
	require.Equal(t, 2, tx.Depth())
	require.NoError(t, tx.Add(dr.Base.Add(104), 8))
	require.NoError(t, tx.Add(dr.Base, 8)) // logged twice: the oldest value wins
	require.NoError(t, tx.Store64(dr.Base.Add(104), 2))
	require.NoError(t, tx.Store64(dr.Base, 3))
	require.Equal(t, 3, tx.Ranges())

	// A second transaction on the dirty partition must recover first.
	_, err = txn.Begin(h, l, 0)
	require.ErrorIs(t, err, txn.ErrNeedsRecovery)

	require.NoError(t, tx.Abort())
	require.Equal(t, 0, tx.Depth())
	require.Equal(t, bytes.Repeat([]byte{7}, 256), readPM(t, m, dr.Base, 256))
	require.ErrorIs(t, tx.Commit(), txn.ErrNotActive)
	require.ErrorIs(t, tx.Abort(), txn.ErrNotActive)
	require.ErrorIs(t, tx.Begin(), txn.ErrNotActive)
	require.ErrorIs(t, tx.Add(dr.Base, 8), txn.ErrNotActive)

	// Commit keeps the update.
	tx, err = txn.Begin(h, l, 1)
	require.NoError(t, err)
	require.NoError(t, tx.Add(dr.Base.Add(8), 8))
	require.NoError(t, tx.Store64(dr.Base.Add(8), 42))
	require.NoError(t, tx.Commit())
	v, err := m.Memory().Load(dr.Base.Add(8), 8)
	require.NoError(t, err)
	require.Equal(t, uint64(42), v)
	n, err := txn.RecoverAll(h, l)
	require.NoError(t, err)
	require.Zero(t, n, "nothing to undo after commit")

	_, err = txn.Begin(nil, l, 0)
	require.ErrorIs(t, err, txn.ErrBadArg)
	_, err = txn.Begin(h, nil, 0)
	require.ErrorIs(t, err, txn.ErrBadArg)
	_, err = txn.Begin(h, l, 9)
	require.ErrorIs(t, err, txn.ErrBadArg)

	// A host Exec reports a bad address as an error.
	tx, err = txn.Begin(h, l, 0)
	require.NoError(t, err)
	err = tx.Add(pm.Addr(12345), 8)
	require.ErrorIs(t, err, txn.ErrHost)
	require.ErrorIs(t, err, pm.ErrUnmapped)
}

func TestEST(t *testing.T) {
	m := newMachine(t)
	e, err := txn.CreateEST(m, "est", 3)
	require.NoError(t, err)
	h := txn.Host(m)
	for lane, ep := range []uint64{5, 2, 9} {
		require.NoError(t, e.Complete(h, lane, ep))
	}
	got, err := e.Last(h, 2)
	require.NoError(t, err)
	require.Equal(t, uint64(9), got)
	low, err := e.LastAll(h)
	require.NoError(t, err)
	require.Equal(t, uint64(2), low)
	require.ErrorIs(t, e.Complete(h, 3, 1), txn.ErrBadArg)
	require.ErrorIs(t, e.Complete(h, 0, 0), txn.ErrBadArg)
	require.ErrorIs(t, e.Complete(h, 0, txn.MaxEpoch+1), txn.ErrBadArg)
	require.NoError(t, e.Check(h))

	img, err := m.Crash()
	require.NoError(t, err)
	m2 := reopen(t, img)
	e2, err := txn.OpenEST(m2, "est")
	require.NoError(t, err)
	h2 := txn.Host(m2)
	got, err = e2.Last(h2, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(5), got)
	// A corrupt word is detected.
	w := mustRegion(t, m2, "est").Add(txn.Line + 8)
	require.NoError(t, m2.CopyIn(w, []byte{0x55}))
	_, err = e2.Last(h2, 1)
	require.ErrorIs(t, err, txn.ErrCorrupt)
	require.ErrorIs(t, e2.Check(h2), txn.ErrCorrupt)
}
