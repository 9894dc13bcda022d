package txn_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

// Group 0 holds two elements, group 1 one.
var ckptSizes = [][]uint64{{200, 64}, {300}}

func fill(n uint64, v byte) []byte { return bytes.Repeat([]byte{v}, int(n)) }

// registerAll allocates device buffers for every element, fills them with
// v (if v != 0) and registers them in order.
func registerAll(t testing.TB, m *pm.Machine, cp *txn.Checkpoint, v byte) [][]pm.Addr {
	h := txn.Host(m)
	out := make([][]pm.Addr, len(ckptSizes))
	for g, sizes := range ckptSizes {
		for _, s := range sizes {
			a, err := m.Alloc(pm.DeviceMem, s)
			require.NoError(t, err)
			if v != 0 {
				require.NoError(t, m.CopyIn(a, fill(s, v+byte(g))))
			}
			require.NoError(t, cp.Register(h, g, a, s))
			out[g] = append(out[g], a)
		}
	}
	return out
}

func TestCheckpointSaveRestore(t *testing.T) {
	m := newMachine(t)
	cp, err := txn.CreateCheckpoint(m, "cp", 2, 4, 1000)
	require.NoError(t, err)
	h := txn.Host(m)
	bufs := registerAll(t, m, cp, 0x10)
	require.ErrorIs(t, cp.Restore(h, 0), txn.ErrNoCheckpoint)
	require.NoError(t, cp.Save(h, 0))
	require.NoError(t, cp.Save(h, 1))
	seq, err := cp.Seq(h, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(1), seq)
	require.NoError(t, cp.Check(h))

	// Bad input.
	require.ErrorIs(t, cp.Save(h, 2), txn.ErrBadArg)
	require.ErrorIs(t, cp.Register(h, 0, bufs[0][0], 0), txn.ErrBadArg)
	require.ErrorIs(t, cp.Register(h, 1, bufs[0][0], 1000), txn.ErrFull)

	// Crash; volatile buffers are lost; register again and restore.
	img, err := m.Crash()
	require.NoError(t, err)
	m2 := reopen(t, img)
	cp2, err := txn.OpenCheckpoint(m2, "cp")
	require.NoError(t, err)
	h2 := txn.Host(m2)
	bufs2 := registerAll(t, m2, cp2, 0)
	for g := range ckptSizes {
		require.NoError(t, cp2.Restore(h2, g))
		for i, s := range ckptSizes[g] {
			require.Equal(t, fill(s, 0x10+byte(g)), readPM(t, m2, bufs2[g][i], int(s)))
		}
	}
	// A registration that differs from the recorded one is refused.
	cp3, err := txn.OpenCheckpoint(m2, "cp")
	require.NoError(t, err)
	require.ErrorIs(t, cp3.Register(h2, 0, bufs2[0][0], 199), txn.ErrMismatch)
	require.ErrorIs(t, cp3.Restore(h2, 0), txn.ErrMismatch, "nothing registered")

	// A corrupt copy is detected, not restored.
	data := mustRegion(t, m2, "cp")
	seqAddr := data.Add(txn.Line + 16 + 16) // group 0, copy 1 metadata
	require.NoError(t, m2.CopyIn(seqAddr, []byte{9}))
	require.ErrorIs(t, cp2.Restore(h2, 0), txn.ErrCorrupt)
	require.ErrorIs(t, cp2.Check(h2), txn.ErrCorrupt)
}

// A checkpoint interrupted after any prefix of its persists restores, for
// every group, either the old copy or the new one.
func TestCheckpointCrashEveryPrefix(t *testing.T) {
	for _, how := range []string{"thread", "kernel"} {
		t.Run(how, func(t *testing.T) {
			m, rec := newRecorded(t)
			cp, err := txn.CreateCheckpoint(m, "cp", 2, 4, 1000)
			require.NoError(t, err)
			h := txn.Host(m)
			bufs := registerAll(t, m, cp, 0x10)
			for g := range ckptSizes {
				require.NoError(t, cp.Save(h, g))
			}
			// New contents, then checkpoint both groups again.
			for g, sizes := range ckptSizes {
				for i, s := range sizes {
					require.NoError(t, m.CopyIn(bufs[g][i], fill(s, 0x20+byte(g))))
				}
			}
			base := m.Memory().Snapshot()
			if how == "thread" {
				var errs [2]error
				_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 2}, func(th *scope.Thread) {
					errs[th.ID()] = cp.Save(txn.GPU(th), th.ID())
				})
				require.NoError(t, err)
				require.NoError(t, errs[0])
				require.NoError(t, errs[1])
			} else {
				for g := range ckptSizes {
					require.NoError(t, cp.SaveKernel(m, g, scope.Grid{Blocks: 2, Threads: 2}))
				}
			}
			ps := rec.Persists()
			t.Logf("%d persists", len(ps))
			seen := map[byte]bool{}
			forEachPrefix(t, base, ps, func(k int, m2 *pm.Machine) {
				cp2, err := txn.OpenCheckpoint(m2, "cp")
				require.NoError(t, err)
				h2 := txn.Host(m2)
				require.NoError(t, cp2.Check(h2), "prefix %d", k)
				bufs2 := registerAll(t, m2, cp2, 0)
				for g, sizes := range ckptSizes {
					require.NoError(t, cp2.Restore(h2, g), "prefix %d", k)
					first := readPM(t, m2, bufs2[g][0], 1)[0]
					require.Contains(t, []byte{0x10 + byte(g), 0x20 + byte(g)}, first)
					seen[first] = true
					for i, s := range sizes {
						require.Equal(t, fill(s, first), readPM(t, m2, bufs2[g][i], int(s)), "prefix %d group %d element %d", k, g, i)
					}
					if k == len(ps) {
						require.Equal(t, 0x20+byte(g), first)
					}
				}
			})
			require.Len(t, seen, 4, "both groups seen old and new")
		})
	}
}
