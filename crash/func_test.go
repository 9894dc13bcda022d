package crash_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// flaggedLog is the Example's workload with the OFence optional and a
// recovery that clears torn slots (and counts its runs).
func flaggedLog(fence bool, recovered *int) crash.Func {
	const threads = 64
	check := func(m *pm.Machine) error {
		log, err := m.OpenRegion("log")
		if err != nil {
			return err
		}
		buf := make([]byte, 16*threads)
		if err := m.CopyOut(log.Base, buf); err != nil {
			return err
		}
		for i := range threads {
			if v, f := pm.GetLE(buf[16*i:16*i+8]), pm.GetLE(buf[16*i+8:16*i+16]); f == 1 && v != uint64(100+i) {
				return fmt.Errorf("slot %d is flagged but holds %d", i, v)
			}
		}
		return nil
	}
	return crash.Func{
		Name:  fmt.Sprintf("flagged-log(fence=%v)", fence),
		Setup: func(m *pm.Machine) error { _, err := m.CreateRegion("log", 16*threads); return err },
		Run: func(m *pm.Machine) error {
			log, err := m.OpenRegion("log")
			if err != nil {
				return err
			}
			_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: threads / 2}, func(t *scope.Thread) {
				slot := log.Base.Add(uint64(16 * t.ID()))
				t.Store64(slot, uint64(100+t.ID()))
				if fence {
					t.OFence()
				}
				t.Store64(slot.Add(8), 1) // flaggedLog: the flag
			})
			return err
		},
		Recover: func(*pm.Machine) error { *recovered++; return nil },
		Check:   check,
	}
}

func TestCheckFunc(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fence      bool
		violations bool
	}{
		{"ordered", true, false},
		{"missing OFence", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const seed = 1
			t.Logf("seed = %d", seed)
			recovered, progress := 0, 0
			rep, err := crash.CheckFunc(flaggedLog(tc.fence, &recovered), crash.Config{Model: crash.SBRP, States: 2000, Seed: seed,
				Progress: func() { progress++ }})
			require.NoError(t, err)
			require.Equal(t, rep.Checked, progress, "Progress is called once per checked state")
			require.Positive(t, recovered, "Recover runs before Check")
			if !tc.violations {
				require.Empty(t, rep.Violations, rep.Summary())
				require.NoError(t, rep.Err())
				return
			}
			require.NotEmpty(t, rep.Violations, rep.Summary())
			v := rep.Violations[0]
			require.Len(t, v.Dropped, 1, "shrunk to one lost persist")
			err = rep.Err()
			require.ErrorIs(t, err, crash.ErrViolation)
			// Explained, and sited in this file, where the kernel is.
			require.Contains(t, err.Error(), "is flagged but holds")
			require.Contains(t, err.Error(), "lost:    persist")
			require.Contains(t, err.Error(), "crash/func_test.go:")
		})
	}
}

func TestCheckFuncErrors(t *testing.T) {
	ok := func(*pm.Machine) error { return nil }
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		f    crash.Func
		want error
	}{
		{"no Run", crash.Func{Check: ok}, crash.ErrFunc},
		{"no Check", crash.Func{Run: ok}, crash.ErrFunc},
		{"setup fails", crash.Func{Setup: func(*pm.Machine) error { return boom }, Run: ok, Check: ok}, crash.ErrWorkload},
		{"fails without a crash", crash.Func{Run: ok, Check: func(*pm.Machine) error { return boom }}, crash.ErrWorkload},
	} {
		_, err := crash.CheckFunc(tc.f, crash.Config{Model: crash.SBRP})
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	require.Equal(t, "func", crash.Func{}.Workload().Name())
}

// A model must be named: the zero Model is not a silent Strict, and an
// unknown one is not a model that orders nothing.
func TestConfigModel(t *testing.T) {
	recovered := 0
	w := flaggedLog(false, &recovered)
	rec, err := crash.Record(w.Workload(), pm.DefaultGPU())
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		model crash.Model
		want  string
	}{
		{"unset", 0, "not set"},
		{"unknown", crash.Model(200), "model(200)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := crash.Config{Model: tc.model, States: 100}
			_, err := crash.CheckFunc(w, cfg)
			require.ErrorIs(t, err, crash.ErrModel)
			require.ErrorContains(t, err, tc.want)
			_, err = crash.Check(w.Workload(), pm.DefaultGPU(), cfg)
			require.ErrorIs(t, err, crash.ErrModel)
			_, err = rec.Explore(w.Workload(), crash.Build(rec.Events, tc.model), cfg)
			require.ErrorIs(t, err, crash.ErrModel)
			_, err = rec.Advise(w.Workload(), cfg)
			require.ErrorIs(t, err, crash.ErrModel)
			_, err = rec.Mutate(w.Workload(), cfg)
			require.ErrorIs(t, err, crash.ErrModel)
		})
	}
}

// A panic in the workload's own code is reported, never the end of the
// process: in Check or Recover after a crash, as a violation naming the
// state and the seed that replays it; without a crash, as an error.
func TestWorkloadPanics(t *testing.T) {
	const seed = 1
	t.Logf("seed = %d", seed)
	recovered := 0
	panicky := flaggedLog(false, &recovered)
	check := panicky.Check
	panicky.Check = func(m *pm.Machine) error {
		if err := check(m); err != nil {
			panic("index out of range in my check") // the user's bug
		}
		return nil
	}
	rep, err := crash.CheckFunc(panicky, crash.Config{Model: crash.SBRP, States: 2000, Seed: seed})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Violations, rep.Summary())
	v := rep.Violations[0]
	require.ErrorIs(t, v.Err, crash.ErrPanic)
	t.Log(rep.Err())
	for _, want := range []string{"Check panicked at crash/func_test.go:", "index out of range in my check", "the crash state before event", "seed 1"} {
		require.ErrorContains(t, rep.Err(), want)
	}

	ok := func(*pm.Machine) error { return nil }
	boom := func(*pm.Machine) error { panic("boom") }
	for _, tc := range []struct {
		name string
		f    crash.Func
		want string
	}{
		{"recover", crash.Func{Run: ok, Recover: boom, Check: ok}, "Recover panicked"},
		{"check", crash.Func{Run: ok, Check: boom}, "Check panicked"},
		{"setup", crash.Func{Setup: boom, Run: ok, Check: ok}, "Setup panicked"},
		{"run", crash.Func{Run: boom, Check: ok}, "Run panicked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := crash.CheckFunc(tc.f, crash.Config{Model: crash.SBRP, States: 10})
			require.ErrorIs(t, err, crash.ErrWorkload)
			require.ErrorIs(t, err, crash.ErrPanic)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "boom")
		})
	}
}

// AdviseFunc and MutateFunc are Advise and Mutate for a Func, as CheckFunc
// is Check.
func TestAdviseFuncAndMutateFunc(t *testing.T) {
	const seed = 4
	t.Logf("seed = %d", seed)
	cfg := crash.Config{Model: crash.SBRP, States: 200, Seed: seed}
	adv, err := crash.AdviseFunc(handoff(pm.Block, pm.Device), cfg)
	require.NoError(t, err)
	require.Len(t, adv, 2)
	for _, a := range adv {
		require.Equal(t, pm.Device, a.Recommended(), "%s at %s", a.Kind, a.Site)
	}
	res, err := crash.MutateFunc(handoff(pm.Device, pm.Device), cfg)
	require.NoError(t, err)
	killed := 0
	for _, r := range res {
		t.Logf("%v killed=%v", r.Mutant, r.Killed)
		if r.Mutant.To == pm.Block {
			require.True(t, r.Killed, "%v", r.Mutant)
			killed++
		}
	}
	require.Equal(t, 2, killed, "the release and the acquire narrowed to block")
	_, err = crash.MutateFunc(handoff(pm.Block, pm.Device), cfg)
	require.ErrorIs(t, err, crash.ErrViolation, "a program that already fails is not mutated")
	for _, f := range []crash.Func{{Check: ok}, {Run: ok}} {
		_, err = crash.AdviseFunc(f, cfg)
		require.ErrorIs(t, err, crash.ErrFunc)
		_, err = crash.MutateFunc(f, cfg)
		require.ErrorIs(t, err, crash.ErrFunc)
	}
}

func ok(*pm.Machine) error { return nil }

func TestStrategyString(t *testing.T) {
	for _, tc := range []struct {
		s    crash.Strategy
		name string
	}{
		{crash.Mixed, "mixed"}, {crash.Prefixes, "prefix"}, {crash.RandomStates, "random"},
		{crash.Exhaustive, "exhaustive"}, {crash.SingleDrops, "single"},
	} {
		require.Equal(t, tc.name, tc.s.String())
		got, err := crash.ParseStrategy(tc.name)
		require.NoError(t, err)
		require.Equal(t, tc.s, got)
	}
	require.Equal(t, "strategy(9)", crash.Strategy(9).String())
	_, err := crash.ParseStrategy("dfs")
	require.ErrorIs(t, err, crash.ErrStrategy)
}

// Config.Context stops an exploration once it is done (after the state in
// progress), and the report says so: a time limit is a context with a
// deadline.
func TestContextStops(t *testing.T) {
	recovered := 0
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := crash.CheckFunc(flaggedLog(true, &recovered), crash.Config{Model: crash.SBRP, States: 2000, Seed: 1, Context: ctx})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Checked)
	require.True(t, rep.Stopped)
	require.False(t, rep.Complete)
	require.Contains(t, rep.Summary(), "stopped by its context")
	ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	rep, err = crash.CheckFunc(flaggedLog(true, &recovered), crash.Config{Model: crash.SBRP, States: 20, Seed: 1, Context: ctx})
	require.NoError(t, err)
	require.Equal(t, 20, rep.Checked)
	require.False(t, rep.Stopped)
	require.NotContains(t, rep.Summary(), "stopped")
}

// Advise and Mutate do not conclude from an exploration the context cut
// short: they say so.
func TestContextStopsAdviseMutate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := crash.Config{Model: crash.SBRP, States: 200, Seed: 4, Context: ctx}
	_, err := crash.AdviseFunc(handoff(pm.Device, pm.Device), cfg)
	require.ErrorIs(t, err, crash.ErrStopped)
	require.ErrorIs(t, err, context.Canceled)
	_, err = crash.MutateFunc(handoff(pm.Device, pm.Device), cfg)
	require.ErrorIs(t, err, crash.ErrStopped)
}

// A kernel that spins and writes is no deadlock: Config.Context cancels it
// too, and the error says where its threads were.
func TestContextCancelsTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spins := 0
	f := crash.Func{
		Setup: func(m *pm.Machine) error { _, err := m.CreateRegion("s", 64); return err },
		Run: func(m *pm.Machine) error {
			r, err := m.OpenRegion("s")
			if err != nil {
				return err
			}
			_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(t *scope.Thread) {
				for t.PAcq(r.Base, pm.Device) == 0 { // never released
					t.Store64(r.Base.Add(8), uint64(t.ID()))
					if spins++; spins == 50000 {
						cancel() // as a timeout would
					}
				}
			})
			return err
		},
		Check: ok,
	}
	_, err := crash.CheckFunc(f, crash.Config{Model: crash.SBRP, States: 10, Context: ctx})
	require.ErrorIs(t, err, crash.ErrWorkload)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "thread 0 (block 0, warp 0, lane 0) runs, reading")
}

// A recovery the context cancels is no violation: the exploration stops.
func TestContextCancelsARecovery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recovered := 0
	f := flaggedLog(true, &recovered)
	f.Recover = func(m *pm.Machine) error {
		if recovered++; recovered == 5 {
			cancel() // as a timeout during this recovery's kernel would
			_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
				for range 2048 {
					t.Work(1)
				}
			})
			return err
		}
		return nil
	}
	rep, err := crash.CheckFunc(f, crash.Config{Model: crash.SBRP, States: 100, Seed: 1, Context: ctx})
	require.NoError(t, err)
	require.Empty(t, rep.Violations, "a cancelled recovery is not a violation")
	require.True(t, rep.Stopped)
	require.Equal(t, 3, rep.Checked, "the uncrashed check, states 1 to 3; the 4th was cut")
}
