package hwmodel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/coro"
	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
)

// The CPU refinement check can fail, and caught this once: TPC-C stored a
// stock row in one strand and wrote it back (CLWB) at the next log insert,
// in the next strand. With the write-back ordered only after the
// PersistBarriers of the strand that issues the CLWB (brokenStrands), the
// row became durable before the log entry that a PersistBarrier of its
// own strand orders before it: an image StrandWeaver's rules (the COSPlay
// model, strands as contexts) forbid. The task below does the same: its
// strand stores w, x and y with PersistBarriers between them, and a new
// strand writes y back.
func TestCPURefinementCatchesBrokenStrands(t *testing.T) {
	run := func() error {
		be, err := New(PresetCOSPlay(), SBRP)
		require.NoError(t, err)
		ref := crash.NewRefiner(be, crash.COSPlay)
		m, err := pm.NewMachine(ref)
		require.NoError(t, err)
		rg, err := m.CreateRegion("d", 4096)
		require.NoError(t, err)
		w, x, y := rg.Base, rg.Base.Add(512), rg.Base.Add(1024)
		task := func(c *coro.Ctx) {
			c.NewStrand()
			for i, a := range []pm.Addr{w, x} {
				c.Store64(a, uint64(i)+1)
				c.CLWB(a)
				c.PersistBarrier()
			}
			c.Store64(y, 3)
			c.NewStrand()
			c.CLWB(y)
			c.JoinStrand()
		}
		_, err = coro.Run(m, []coro.Task{task}, coro.WithConfig(coro.Config{Mode: coro.StrandWeaver}))
		require.NoError(t, err)
		require.Equal(t, 1, ref.Launches())
		return ref.Err()
	}
	require.NoError(t, run())
	brokenStrands = true
	defer func() { brokenStrands = false }()
	require.ErrorIs(t, run(), crash.ErrRefinement)
}
