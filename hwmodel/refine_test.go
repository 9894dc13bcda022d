package hwmodel_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/long"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/internal/testkit/kerneltest"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// timedPresets are the presets whose PM is timed as PM (dram times PM as
// DRAM and makes no persist durable on its own).
var timedPresets = []string{"pm-near", "pm-far", "pm-far-eadr", "gope", "volta"}

// presetsToTime are the timed presets a test crosses with every model and
// kernel in the default run: pm-near, where every model's persist path
// (the SBRP window, the NVW-FIFOs, the write-back queues) is timed against
// the ADR point. The rest of timedPresets (longPresetsToTime: eADR across
// PCIe, gope's FIFO sizes, volta) are the long run's
// (internal/testkit/long), in a test of their own that CI's long step
// names, so that no case runs twice in CI. With three presets here the two
// tests took 76 s of go test ./... on two cores.
func presetsToTime() []string { return []string{"pm-near"} }

// longPresetsToTime are the timed presets presetsToTime leaves to the long
// run.
func longPresetsToTime() []string {
	return slices.DeleteFunc(slices.Clone(timedPresets), func(p string) bool { return slices.Contains(presetsToTime(), p) })
}

// Every crash image hwmodel produces for the foundation kernels, under
// every model and timed preset, is one the model's PMO allows (the presets
// of the long run in TestFoundationKernelsRefinePMOLong).
func TestFoundationKernelsRefinePMO(t *testing.T) { foundationKernelsRefinePMO(t, presetsToTime()) }

// TestFoundationKernelsRefinePMOLong is TestFoundationKernelsRefinePMO on
// the timed presets the default run leaves out.
func TestFoundationKernelsRefinePMOLong(t *testing.T) {
	long.Skip(t, "pm-far, pm-far-eadr, gope and volta")
	foundationKernelsRefinePMO(t, longPresetsToTime())
}

func foundationKernelsRefinePMO(t *testing.T, presets []string) {
	for _, c := range kerneltest.Cases() {
		for _, preset := range presets {
			cfg, err := hwmodel.Preset(preset)
			require.NoError(t, err)
			for _, model := range hwmodel.Models() {
				be, err := hwmodel.New(cfg, model)
				require.NoError(t, err)
				ref := crash.NewRefiner(be, model)
				_, _, err = kerneltest.Final(c, ref)
				require.NoError(t, err, "%s %s %s", c.Name, preset, model)
				require.NoError(t, ref.Err(), "%s %s %s", c.Name, preset, model)
			}
		}
	}
}

// lockedAppend appends one entry per thread to a PM log under a spin lock:
// acquire the lock (PAcq, then CAS), store the entry, DFence, store the
// tail, release (PRel). A durable tail must never cover an entry that is
// not durable.
func lockedAppend(m *pm.Machine, grid scope.Grid) (check func(img *pm.Image) error, err error) {
	n := grid.Total()
	log, err := m.CreateRegion("log", uint64(8*n))
	if err != nil {
		return nil, err
	}
	tail, err := m.CreateRegion("tail", 8)
	if err != nil {
		return nil, err
	}
	lock, err := m.Alloc(pm.DeviceMem, 8)
	if err != nil {
		return nil, err
	}
	_, err = scope.Launch(m, grid, func(t *scope.Thread) {
		for t.PAcq(lock, pm.Device) != 0 || t.AtomicCAS32(lock, 0, 1, pm.Device) != 0 {
		}
		i := t.Load64(tail.Base)
		t.Store64(log.Base.Add(8*i), 1000+i)
		t.DFence()
		t.Store64(tail.Base, i+1)
		t.PRel(lock, 0, pm.Device)
	})
	if err != nil {
		return nil, err
	}
	return func(img *pm.Image) error {
		l, _ := img.Region("log")
		tl, _ := img.Region("tail")
		k := pm.GetLE(tl.Data)
		for i := range k {
			if got := pm.GetLE(l.Data[8*i : 8*i+8]); got != 1000+i {
				return fmt.Errorf("tail %d covers entry %d = %d", k, i, got)
			}
		}
		return nil
	}, nil
}

// The locked append refines the PMO under every model and timed preset,
// and its invariant holds at every cycle where the durable image changes
// (the presets of the long run in TestLockedAppendEveryCycleLong).
func TestLockedAppendEveryCycle(t *testing.T) { lockedAppendEveryCycle(t, presetsToTime()) }

// TestLockedAppendEveryCycleLong is TestLockedAppendEveryCycle on the
// timed presets the default run leaves out.
func TestLockedAppendEveryCycleLong(t *testing.T) {
	long.Skip(t, "pm-far, pm-far-eadr, gope and volta")
	lockedAppendEveryCycle(t, longPresetsToTime())
}

func lockedAppendEveryCycle(t *testing.T, presets []string) {
	for _, preset := range presets {
		cfg, err := hwmodel.Preset(preset)
		require.NoError(t, err)
		for _, model := range hwmodel.Models() {
			be, err := hwmodel.New(cfg, model)
			require.NoError(t, err)
			ref := crash.NewRefiner(be, model)
			m, err := pm.NewMachine(ref)
			require.NoError(t, err)
			check, err := lockedAppend(m, scope.Grid{Blocks: 4, Threads: 64})
			require.NoError(t, err)
			require.NoError(t, ref.Err(), "%s %s", preset, model)
			var cycles []uint64
			be.Durability(func(_ pm.Addr, _ int, ack uint64) { cycles = append(cycles, ack-1, ack) })
			require.NotEmpty(t, cycles)
			for _, c := range cycles {
				img, err := be.CrashAt(c)
				require.NoError(t, err)
				if model == hwmodel.None {
					continue // None promises no order: the invariant may break
				}
				require.NoError(t, check(img), "%s %s cycle %d", preset, model, c)
			}
		}
	}
}
