//go:build unix

package native

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

// DeferAtomic's persists survive a power cut all together or not at all.
// Inside a Defer, batch 1 fills most of a record (records are cut at
// 4 KiB here, batchBytes), and batch 2, about 3 KiB, follows: as a nested
// Defer it is cut across two records, and some power cut keeps part of
// it; as a DeferAtomic none does. Every cut, at every sync under
// 8 draws of the torn sectors, keeps a prefix of batch 1 then of batch 2.
// Over its limit, DeferAtomic fails the backend with ErrIO.
func TestDeferAtomic(t *testing.T) {
	const writes = 120 // 24 bytes each in the log: 2,880 a batch
	for _, atomic := range []bool{false, true} {
		t.Run(fmt.Sprintf("atomic=%v", atomic), func(t *testing.T) {
			be, err := Open(t.TempDir(), Options{Mode: ModeLog, Journal: true})
			require.NoError(t, err)
			defer be.Close()
			be.batchBytes = 4 << 10
			require.Equal(t, 4<<10, be.AtomicDeferBytes())
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			r, err := m.CreateRegion("d", 2*8*writes)
			require.NoError(t, err)
			require.NoError(t, be.StartJournal())
			batch := func(k uint64) []pm.Write {
				ws := make([]pm.Write, writes)
				for i := range ws {
					data := make([]byte, 8)
					pm.PutLE(data, k*1000+uint64(i)+1)
					// Batch 1 the even words, batch 2 the odd
					// ones: no two writes of a batch merge into
					// one entry.
					ws[i] = pm.Write{Addr: r.Base.Add(16*uint64(i) + 8*(k-1)), Data: data}
				}
				return ws
			}
			inner := be.Defer
			if atomic {
				inner = be.DeferAtomic
			}
			require.NoError(t, be.Defer(func() error {
				if err := m.CopyInMany(batch(1)); err != nil {
					return err
				}
				return inner(func() error { return m.CopyInMany(batch(2)) })
			}))
			n, torn := be.Syncs(), 0
			for s := 0; s <= n; s++ {
				for seed := range uint64(8) {
					img, err := be.PowerCut(s, seed)
					require.NoError(t, err)
					rg, ok := img.Region("d")
					require.True(t, ok)
					what := fmt.Sprintf("cut at sync %d of %d, seed %d", s, n, seed)
					// prefix returns how many of batch k's words,
					// from the first, hold their value, and
					// requires the rest to be 0.
					prefix := func(k uint64) int {
						n := 0
						for i := range writes {
							w := pm.GetLE(rg.Data[16*i+8*int(k-1):][:8])
							switch {
							case w == k*1000+uint64(i)+1 && n == i:
								n++
							case w != 0:
								t.Fatalf("%s: batch %d's word %d = %d after %d of its words", what, k, i, w, n)
							}
						}
						return n
					}
					ones, twos := prefix(1), prefix(2)
					if twos > 0 {
						require.Equal(t, writes, ones, "%s: batch 2 before the whole of batch 1", what)
					}
					if twos > 0 && twos < writes {
						torn++
					}
				}
			}
			if atomic {
				require.Zero(t, torn, "cuts that kept part of DeferAtomic's batch")
				err = be.DeferAtomic(func() error { return m.CopyInMany(append(batch(1), batch(2)...)) })
				require.ErrorIs(t, err, ErrIO)
				require.ErrorContains(t, err, "DeferAtomic")
			} else {
				require.Positive(t, torn, "no cut kept part of the nested Defer's batch: the test cannot tell")
			}
		})
	}
}

// A DeferAtomic whose function fails before any persist only returns its
// error; one that fails after making persists drops them and fails the
// backend (the visible image holds them), and the directory reopens
// without them.
func TestDeferAtomicFails(t *testing.T) {
	dir := t.TempDir()
	be, err := Open(dir, Options{Mode: ModeLog})
	require.NoError(t, err)
	m, err := pm.NewMachine(be)
	require.NoError(t, err)
	r, err := m.CreateRegion("d", 64)
	require.NoError(t, err)
	word := func(v uint64) []byte {
		b := make([]byte, 8)
		pm.PutLE(b, v)
		return b
	}
	require.NoError(t, m.CopyIn(r.Base, word(1)))
	boom := errors.New("boom")
	err = be.DeferAtomic(func() error { return boom })
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, ErrIO)
	require.NoError(t, m.CopyIn(r.Base.Add(8), word(2)), "the backend still takes writes")

	err = be.DeferAtomic(func() error {
		if err := m.CopyInMany([]pm.Write{{Addr: r.Base, Data: word(3)}, {Addr: r.Base.Add(16), Data: word(4)}}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, ErrIO)
	require.Error(t, m.CopyIn(r.Base.Add(24), word(5)), "a failed backend takes no writes")
	require.Error(t, be.Close())

	be, err = Open(dir, Options{Mode: ModeLog})
	require.NoError(t, err)
	defer be.Close()
	m, err = pm.NewMachine(be)
	require.NoError(t, err)
	r, err = m.OpenRegion("d")
	require.NoError(t, err)
	got := make([]byte, 32)
	require.NoError(t, m.CopyOut(r.Base, got))
	for i, want := range []uint64{1, 2, 0, 0} {
		require.Equal(t, want, pm.GetLE(got[8*i:8*i+8]), "word %d", i)
	}
}
