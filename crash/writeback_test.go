package crash_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/record"
)

// trace builds recordings by hand: a few verbs of GPU threads.
type trace struct {
	ev     []record.Event
	seq    map[int]uint64
	launch bool // the next event begins a new launch
}

func (tr *trace) op(id int, op pm.Op) {
	if tr.seq == nil {
		tr.seq = map[int]uint64{}
	}
	a := pm.Agent{Kind: pm.GPUThread, ID: id, Block: id / 4, Warp: id / 4, Lane: id % 4}
	tr.ev = append(tr.ev, record.Event{Agent: a, Seq: tr.seq[id], Op: op, Launch: tr.launch})
	tr.seq[id]++
	tr.launch = false
}

// next ends the launch: the next event begins another (a kernel's end
// writes nothing back and orders nothing under the write-back models).
func (tr *trace) next() { tr.launch = true }

func (tr *trace) store(id int, a pm.Addr) {
	tr.op(id, pm.Op{Kind: pm.OpStore, PM: true, Size: 8, Addr: a, Value: 1})
}

func (tr *trace) storeWT(id int, a pm.Addr) {
	tr.op(id, pm.Op{Kind: pm.OpStore, WT: true, PM: true, Size: 8, Addr: a, Value: 1})
}

func (tr *trace) verb(id int, k pm.OpKind, a pm.Addr) {
	tr.op(id, pm.Op{Kind: k, Scope: pm.Thread, Addr: a})
}

func (tr *trace) sync(ids ...int) {
	for _, id := range ids {
		tr.op(id, pm.Op{Kind: pm.OpSyncThreads, Scope: pm.Block})
	}
	g := make([]pm.Agent, len(ids))
	for i, id := range ids {
		g[i] = pm.Agent{Kind: pm.GPUThread, ID: id, Block: id / 4, Warp: id / 4, Lane: id % 4}
	}
	tr.ev = append(tr.ev, record.Event{Agent: g[len(g)-1], Group: g})
}

const (
	xA pm.Addr = 1 << 40
	xB pm.Addr = 1<<40 + 4096
)

// TestWriteBackVerbsOrder checks, on hand-made recordings, which crash
// states each re-study verb rules out: the first persist (A) lost while the
// last one (B) is kept at the end of the run.
func TestWriteBackVerbsOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		model   crash.Model
		build   func(tr *trace)
		ordered bool // losing A while keeping B is ruled out
	}{
		{"plain store, membar", crash.WriteBackADR, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpMemBar, 0)
		}, false},
		{"clwb, membar", crash.WriteBackADR, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpCLWB, xA+8)
			tr.verb(0, pm.OpMemBar, 0)
		}, true},
		{"clwb of another line", crash.WriteBackADR, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpCLWB, xA+128)
			tr.verb(0, pm.OpMemBar, 0)
		}, false},
		{"clwb without membar", crash.WriteBackADR, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpCLWB, xA)
		}, false},
		{"write-through, membar", crash.WriteBackADR, func(tr *trace) {
			tr.storeWT(0, xA)
			tr.verb(0, pm.OpMemBar, 0)
		}, true},
		{"other thread's store, barrier, l2wb, membar", crash.WriteBackADR, func(tr *trace) {
			tr.store(1, xA)
			tr.sync(0, 1)
			tr.verb(0, pm.OpL2WB, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, true},
		{"clwb, membar, no pcommit", crash.WriteBackPCT, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpCLWB, xA)
			tr.verb(0, pm.OpMemBar, 0)
		}, false},
		{"clwb, membar, pcommit, membar", crash.WriteBackPCT, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpCLWB, xA)
			tr.verb(0, pm.OpMemBar, 0)
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, true},
		{"pcommit before the write-back's ack", crash.WriteBackPCT, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpCLWB, xA)
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, false},
		{"other threads' acks, barrier, pcommit", crash.WriteBackPCT, func(tr *trace) {
			tr.storeWT(1, xA)
			tr.verb(1, pm.OpMemBar, 0)
			tr.sync(0, 1)
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, true},
		// Across launches: a kernel's end neither writes back nor orders.
		{"plain store, next launch", crash.WriteBackADR, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpMemBar, 0)
			tr.next()
		}, false},
		{"plain store; next launch: l2wb, membar", crash.WriteBackADR, func(tr *trace) {
			tr.store(1, xA)
			tr.next()
			tr.verb(0, pm.OpL2WB, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, true},
		{"plain store; next launch: clwb by another thread, membar", crash.WriteBackADR, func(tr *trace) {
			tr.store(1, xA)
			tr.next()
			tr.verb(0, pm.OpCLWB, xA)
			tr.verb(0, pm.OpMemBar, 0)
		}, false},
		{"plain store; next launch: l2wb, membar, no pcommit", crash.WriteBackPCT, func(tr *trace) {
			tr.store(1, xA)
			tr.next()
			tr.verb(0, pm.OpL2WB, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, false},
		{"write-back acknowledged; next launch: pcommit, membar", crash.WriteBackPCT, func(tr *trace) {
			tr.storeWT(1, xA)
			tr.verb(1, pm.OpMemBar, 0)
			tr.next()
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, true},
		{"legacy DFence writes back", crash.WriteBackADR, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpDFence, 0)
		}, true},
		{"legacy DFence under pct", crash.WriteBackPCT, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpDFence, 0)
		}, true},
		{"membar under SBRP is a DFence", crash.SBRP, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpMemBar, 0)
		}, true},
		{"clwb orders nothing under SBRP", crash.SBRP, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpCLWB, xA)
			tr.verb(0, pm.OpL2WB, 0)
			tr.verb(0, pm.OpPCommit, 0)
		}, false},
	} {
		t.Run(tc.model.String()+"/"+tc.name, func(t *testing.T) {
			var tr trace
			tc.build(&tr)
			tr.store(0, xB)
			g := crash.Build(tr.ev, tc.model)
			require.Len(t, g.Persists, 2)
			lostA := crash.State{Point: len(tr.ev), Kept: []bool{false, true}}
			err := g.Valid(lostA)
			if tc.ordered {
				require.ErrorIs(t, err, crash.ErrState)
			} else {
				require.NoError(t, err)
			}
			// Crashing right after the last verb before B: a durable
			// ordering makes A durable already.
			early := crash.State{Point: len(tr.ev) - 1, Kept: []bool{false, false}}
			if tc.ordered {
				require.ErrorIs(t, g.Valid(early), crash.ErrState)
			} else {
				require.NoError(t, g.Valid(early))
			}
		})
	}
}

// TestDurableReturnsCoverage checks, on hand-made recordings, which
// persists a durable verb must have waited for when it returned
// (DurableReturns): under a volatile WPQ (WriteBackPCT) exactly those the
// PCommits before a MemBar committed, so a MemBar with no PCommit before
// it raises no false alarm; under ADR (WriteBackADR) the write-backs before it.
// Every verb returns at cycle 50 and persist A is durable at cycle 100
// (the others, unless a case says otherwise, too): the check fails exactly
// when a durable verb covers A.
func TestDurableReturnsCoverage(t *testing.T) {
	clwbFence := func(tr *trace, id int, a pm.Addr) {
		tr.store(id, a)
		tr.verb(id, pm.OpCLWB, a)
		tr.verb(id, pm.OpMemBar, 0)
	}
	for _, tc := range []struct {
		name    string
		model   crash.Model
		build   func(tr *trace)
		covered bool     // a durable verb must wait for A
		acks    []uint64 // the persists' durable cycles, if not all 100
	}{
		{"clwb, membar", crash.WriteBackADR, func(tr *trace) { clwbFence(tr, 0, xA) }, true, nil},
		{"clwb, membar, no pcommit", crash.WriteBackPCT, func(tr *trace) { clwbFence(tr, 0, xA) }, false, nil},
		{"write-through, membar, no pcommit", crash.WriteBackPCT, func(tr *trace) {
			tr.storeWT(0, xA)
			tr.verb(0, pm.OpMemBar, 0)
		}, false, nil},
		{"clwb, membar, pcommit, membar", crash.WriteBackPCT, func(tr *trace) {
			clwbFence(tr, 0, xA)
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, true, nil},
		{"pcommit before the write-back's ack", crash.WriteBackPCT, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpCLWB, xA)
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, false, nil},
		// B, durable at 40, is committed by the PCommit; A, written back
		// after it, is only acknowledged by the last MemBar.
		{"second write-back after the pcommit", crash.WriteBackPCT, func(tr *trace) {
			clwbFence(tr, 0, xB)
			tr.verb(0, pm.OpPCommit, 0)
			clwbFence(tr, 0, xA)
		}, false, []uint64{40, 100}},
		{"second write-back after the pcommit, B late", crash.WriteBackPCT, func(tr *trace) {
			clwbFence(tr, 0, xB)
			tr.verb(0, pm.OpPCommit, 0)
			clwbFence(tr, 0, xA)
		}, true, []uint64{100, 40}},
		{"other thread's ack, block barrier, pcommit", crash.WriteBackPCT, func(tr *trace) {
			tr.storeWT(1, xA)
			tr.verb(1, pm.OpMemBar, 0)
			tr.sync(0, 1)
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, true, nil},
		{"other block's ack, no barrier, pcommit", crash.WriteBackPCT, func(tr *trace) {
			tr.storeWT(4, xA)
			tr.verb(4, pm.OpMemBar, 0)
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, false, nil},
		{"ack in an earlier launch, pcommit", crash.WriteBackPCT, func(tr *trace) {
			tr.storeWT(4, xA)
			tr.verb(4, pm.OpMemBar, 0)
			tr.next()
			tr.verb(0, pm.OpPCommit, 0)
			tr.verb(0, pm.OpMemBar, 0)
		}, true, nil},
		{"legacy DFence", crash.WriteBackPCT, func(tr *trace) {
			tr.store(0, xA)
			tr.verb(0, pm.OpDFence, 0)
		}, true, nil},
	} {
		t.Run(tc.model.String()+"/"+tc.name, func(t *testing.T) {
			var tr trace
			tc.build(&tr)
			g := crash.Build(tr.ev, tc.model)
			done := make([]uint64, len(g.Events))
			for i := range done {
				done[i] = 50
			}
			acks := tc.acks
			if acks == nil {
				acks = make([]uint64, len(g.Persists))
				for i := range acks {
					acks[i] = 100
				}
			}
			require.Len(t, acks, len(g.Persists))
			err := crash.DurableReturns(g, acks, done)
			if !tc.covered {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, crash.ErrRefinement)
			require.ErrorContains(t, err, "returned at cycle 50")
			if tc.model.VolatileWPQ() && tc.name != "legacy DFence" {
				require.ErrorContains(t, err, "a PCommit before the MemBar committed it")
			}
			// Durable by the return: no alarm.
			for i := range acks {
				acks[i] = 50
			}
			require.NoError(t, crash.DurableReturns(g, acks, done))
		})
	}
}
