//go:build unix

package native_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/kerneltest"
	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/workloads"
)

// testConfigs are the backend configurations every metamorphic test runs:
// log, log with a sync mid-launch every few persists, and unsafe-nosync.
var testConfigs = []native.Options{
	{Mode: native.ModeLog},
	{Mode: native.ModeLog, MaxPending: 5},
	{Mode: native.ModeUnsafeNoSync},
}

func cfgName(o native.Options) string {
	if o.MaxPending > 0 {
		return fmt.Sprintf("%s/maxpending=%d", o.Mode, o.MaxPending)
	}
	return o.Mode.String()
}

// reference returns the functional backend the native one is compared
// with: both run threads in the same order, except that in log mode a
// thread waiting at a mid-launch durability point (a DFence or PRel with
// persists pending) resumes once no other thread can run; the results
// must still match exactly (the workloads do not depend on that order).
func reference() pm.Backend { return functional.New(pm.GPULimits{}) }

// mirrorOf returns the reference for configuration cfg when the run's
// order matters: the functional backend with pm.Durability answered as
// the native backend in that configuration answers it, so the executors
// hold the same threads and tasks at the same durability points and the
// two runs take the same order. CPU runs need it: package coro holds a
// task at a durability point while the other contexts run (group
// commit), which changes the order of tasks, and COSPlay's workloads
// leave images that depend on it.
func mirrorOf(cfg native.Options) pm.Backend {
	if cfg.Mode != native.ModeLog {
		return reference()
	}
	maxPending := cfg.MaxPending
	if maxPending <= 0 {
		maxPending = native.DefaultMaxPending
	}
	return &mirror{Backend: functional.New(pm.GPULimits{}), maxPending: maxPending, sbrpReleases: cfg.SBRPReleases}
}

// mirror is the functional backend with the native log mode's
// pm.Durability: a durability verb waits while persists are pending, and
// MaxPending pending persists commit on their own.
type mirror struct {
	*functional.Backend
	maxPending   int
	sbrpReleases bool
	pending      int
}

func (d *mirror) Attach(mem *pm.Memory) (pm.Caps, error) {
	c, err := d.Backend.Attach(mem)
	c.Ops = true
	return c, err
}

func (d *mirror) Op(a *pm.Agent, op *pm.Op) {
	d.Backend.Op(a, op)
	if op.Persists() {
		if d.pending++; d.pending >= d.maxPending {
			d.pending = 0
		}
	}
}

func (d *mirror) End() (pm.Stats, error) {
	d.pending = 0
	return d.Backend.End()
}

func (d *mirror) WaitDurable(_ *pm.Agent, op *pm.Op) bool {
	switch op.Kind {
	case pm.OpDFence, pm.OpEpochBarrier, pm.OpSFence, pm.OpCFence, pm.OpJoinStrand:
	case pm.OpPRel:
		if d.sbrpReleases {
			return false
		}
	default:
		return false
	}
	return d.pending > 0
}

func (d *mirror) MakeDurable() error {
	d.pending = 0
	return nil
}

// The foundation kernels end in the same memory (volatile and PM) on the
// native backend as on the functional one.
func TestMetamorphicKernels(t *testing.T) {
	for _, c := range kerneltest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			for _, cfg := range testConfigs {
				mode := cfgName(cfg)
				want, _, err := kerneltest.Final(c, reference())
				require.NoError(t, err)
				be, err := native.Open(t.TempDir(), cfg)
				require.NoError(t, err)
				got, _, err := kerneltest.Final(c, be)
				require.NoError(t, err, mode)
				require.Empty(t, kerneltest.Diff(want, got), mode)
				require.NoError(t, be.Close())
			}
		})
	}
}

// Every workload of package workloads, written once, runs unchanged on the
// native backend, passes its check, and leaves the same PM as on the
// functional backend, both in the visible image and in the files after a
// reopen.
func TestMetamorphicWorkloads(t *testing.T) {
	for _, nd := range workloads.Names() {
		name := nd[0]
		t.Run(name, func(t *testing.T) {
			for _, cfg := range testConfigs {
				mode := cfgName(cfg)
				w, err := workloads.New(name, workloads.Tiny)
				require.NoError(t, err)
				fm, err := pm.NewMachine(mirrorOf(cfg))
				require.NoError(t, err)
				require.NoError(t, w.Setup(fm))
				require.NoError(t, w.Run(fm))
				want := fm.Memory().Snapshot()
				dir := t.TempDir()
				w, err = workloads.New(name, workloads.Tiny)
				require.NoError(t, err)
				be, m := open(t, dir, cfg)
				require.NoError(t, w.Setup(m))
				require.NoError(t, w.Run(m))
				require.NoError(t, w.Check(m))
				require.True(t, want.Equal(m.Memory().Snapshot()), "%s: visible image differs", mode)
				img, err := m.Crash()
				require.NoError(t, err)
				require.True(t, want.Equal(img), "%s: durable image differs", mode)
				t.Logf("%s: %+v", mode, be.Stats())

				be2, m2 := open(t, dir, cfg)
				require.True(t, want.Equal(m2.Memory().Snapshot()), "%s: reopened image differs", mode)
				require.NoError(t, w.Recover(m2))
				require.NoError(t, w.Check(m2))
				require.NoError(t, be2.Close())
			}
		})
	}
}

// gpKVS used directly (both logs, SET, DELETE, GET, recovery) ends in the
// same memory as on the functional backend.
func TestMetamorphicKVS(t *testing.T) {
	run := func(t *testing.T, m *pm.Machine, log kvs.LogKind) (*pm.Image, map[uint32]uint64) {
		st, err := kvs.Create(m, kvs.Config{Buckets: 32, MaxBatch: 64, BlockThreads: 32, Log: log})
		require.NoError(t, err)
		keys := make([]uint32, 64)
		vals := make([]uint64, 64)
		for i := range keys {
			keys[i], vals[i] = uint32(1000+i*7), uint64(i*i+1)
		}
		_, err = st.SetBatch(keys, vals)
		require.NoError(t, err)
		_, err = st.DeleteBatch(keys[:10])
		require.NoError(t, err)
		require.NoError(t, st.Put(5, 55))
		_, err = st.Recover()
		require.NoError(t, err)
		vs, found, err := st.GetBatch(keys)
		require.NoError(t, err)
		require.NoError(t, st.Check())
		for i := range vs {
			require.Equal(t, i >= 10, found[i])
			if found[i] {
				require.Equal(t, vals[i], vs[i])
			}
		}
		got, err := st.Contents()
		require.NoError(t, err)
		return m.Memory().Snapshot(), got
	}
	for _, log := range []kvs.LogKind{kvs.LogHCL, kvs.LogConv} {
		t.Run(log.String(), func(t *testing.T) {
			fm, err := pm.NewMachine(functional.New(pm.GPULimits{}))
			require.NoError(t, err)
			_, wantVals := run(t, fm, log)
			for _, cfg := range testConfigs {
				mode := cfgName(cfg)
				rm, err := pm.NewMachine(reference())
				require.NoError(t, err)
				want, _ := run(t, rm, log)
				be, m := open(t, t.TempDir(), cfg)
				got, gotVals := run(t, m, log)
				require.True(t, want.Equal(got), mode)
				require.Equal(t, wantVals, gotVals)
				img, err := m.Crash()
				require.NoError(t, err)
				require.True(t, want.Equal(img), mode)
				_ = be
			}
		})
	}
}
