package txn_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

// txWorkload: every GPU thread moves its two words (a, b) from (i, i) to
// (i+1000, i+1000) in one undo-logged transaction on its HCL slot (or a
// conventional partition). After a crash and RecoverAll, each thread's pair
// must be all old or all new.
type txWorkload struct {
	blocks, threads int
	hcl             bool
}

func (w *txWorkload) Name() string { return fmt.Sprintf("tx(hcl=%v)", w.hcl) }

func (w *txWorkload) n() int { return w.blocks * w.threads }

func (w *txWorkload) Setup(m *pm.Machine) error {
	d, err := m.CreateRegion("data", uint64(16*w.n()))
	if err != nil {
		return err
	}
	buf := make([]byte, 16*w.n())
	for i := range w.n() {
		pm.PutLE(buf[16*i:16*i+8], uint64(i))
		pm.PutLE(buf[16*i+8:16*i+16], uint64(i))
	}
	if err := m.CopyIn(d.Base, buf); err != nil {
		return err
	}
	if w.hcl {
		_, err = txn.CreateHCL(m, "log", w.blocks, w.threads, 256)
	} else {
		_, err = txn.CreateConv(m, "log", w.n(), 1024)
	}
	return err
}

func (w *txWorkload) open(m *pm.Machine) (txn.Log, pm.Range, error) {
	d, err := m.OpenRegion("data")
	if err != nil {
		return nil, d, err
	}
	if w.hcl {
		l, err := txn.OpenHCL(m, "log")
		return l, d, err
	}
	l, err := txn.OpenConv(m, "log")
	return l, d, err
}

func (w *txWorkload) Run(m *pm.Machine) error {
	log, d, err := w.open(m)
	if err != nil {
		return err
	}
	var kerr error
	_, err = scope.Launch(m, scope.Grid{Blocks: w.blocks, Threads: w.threads}, func(t *scope.Thread) {
		x := txn.GPU(t)
		part := t.ID() // a transaction owns its partition
		if w.hcl {
			part, _ = log.(*txn.HCL).Part(x)
		}
		fail := func(err error) {
			if err != nil && kerr == nil {
				kerr = err
			}
		}
		tx, err := txn.Begin(x, log, part)
		if err != nil {
			fail(err)
			return
		}
		me := d.Base.Add(uint64(16 * t.ID()))
		fail(tx.Add(me, 16))
		fail(tx.Store64(me, uint64(t.ID()+1000)))
		fail(tx.Store64(me.Add(8), uint64(t.ID()+1000)))
		fail(tx.Commit())
	})
	if err != nil {
		return err
	}
	return kerr
}

func (w *txWorkload) Recover(m *pm.Machine) error {
	log, _, err := w.open(m)
	if err != nil {
		return err
	}
	_, err = txn.RecoverAll(txn.Host(m), log)
	return err
}

func (w *txWorkload) Check(m *pm.Machine) error {
	_, d, err := w.open(m)
	if err != nil {
		return err
	}
	for i := range w.n() {
		a, _ := m.Memory().Load(d.Base.Add(uint64(16*i)), 8)
		b, _ := m.Memory().Load(d.Base.Add(uint64(16*i+8)), 8)
		if a != b || (a != uint64(i) && a != uint64(i+1000)) {
			return fmt.Errorf("thread %d: pair (%d, %d) is torn", i, a, b)
		}
	}
	return nil
}

// Undo-log transactions are all-or-nothing at every crash cycle of the
// timing model (hwmodel SBRP and Epoch), and in every crash state the
// persistency model allows that the exploration reaches.
func TestTransactionsTimedAndExplored(t *testing.T) {
	const seed = 9
	t.Logf("seed = %d", seed)
	gpu := pm.GPULimits{SMs: 2, WarpSize: 32, MaxThreadsPerSM: 64, MaxBlocksPerSM: 2, MaxThreadsPerBlock: 64}
	for _, hcl := range []bool{true, false} {
		w := &txWorkload{blocks: 2, threads: 32, hcl: hcl}
		for _, model := range []hwmodel.Model{hwmodel.SBRP, hwmodel.Epoch} {
			newBE := func() (crash.TimedBackend, error) { return hwmodel.New(hwmodel.PresetPMNear(), model) }
			rep, err := crash.CheckTimed(w, newBE, gpu, 300, seed)
			require.NoError(t, err)
			require.Empty(t, rep.Violations, "%s %s: %v", w.Name(), model, rep.Violations)
			require.Greater(t, rep.Checked, 100)
		}
		for _, model := range []crash.Model{crash.SBRP, crash.Epoch} {
			rep, err := crash.Check(w, gpu, crash.Config{Model: model, States: 1500, Seed: seed})
			require.NoError(t, err)
			require.Empty(t, rep.Violations, "%s %s: %v", w.Name(), model, rep.Violations)
		}
	}
}
