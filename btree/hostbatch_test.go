package btree

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// The host insert path (insertHost, the DB's) writes the very bytes the
// insert kernel does: after every batch, on trees of several orders, the
// region of a tree written by InsertBatch and that of one written by
// insertHost are equal, byte for byte (nodes, piece records, marks,
// result, bitmaps, meta). So a crash in the host path leaves what a crash
// in the kernel could, and the kernel's recovery finishes it.
func TestInsertHostMatchesKernel(t *testing.T) {
	seed := testSeed(t)
	for _, tc := range []struct {
		name            string
		order, maxBatch int
		keySpace        uint64
		rounds          int
	}{
		{"order4", 4, 64, 500, 60},
		{"order7", 7, 128, 2000, 40},
		{"default", 0, 256, 5000, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(tc.order)))
			o := Options{Order: tc.order, Capacity: 8192, MaxBatch: tc.maxBatch}
			ma, mb := newMachine(t), newMachine(t)
			ta, err := Create(ma, "t", o)
			require.NoError(t, err)
			tb, err := Create(mb, "t", o)
			require.NoError(t, err)
			for r := range tc.rounds {
				n := 1 + rng.IntN(tc.maxBatch)
				if r%5 == 0 {
					n = 1
				}
				ks, vs := make([]uint64, n), make([]uint64, n)
				for i := range ks {
					ks[i], vs[i] = 1+rng.Uint64N(tc.keySpace), rng.Uint64()
				}
				_, err := ta.InsertBatch(ks, vs, BatchOptions{})
				require.NoError(t, err, "round %d", r)
				require.NoError(t, tb.insertHost(ks, vs), "round %d", r)
				if r%7 == 3 {
					k := ks[0]
					fa, err := ta.Delete(k)
					require.NoError(t, err)
					fb, err := tb.Delete(k)
					require.NoError(t, err)
					require.Equal(t, fa, fb)
				}
				ra, _ := ma.Memory().Snapshot().Region("t")
				rb, _ := mb.Memory().Snapshot().Region("t")
				require.True(t, bytes.Equal(ra.Data, rb.Data), "round %d (batch of %d): regions differ", r, n)
			}
			require.NoError(t, tb.Check())
			require.Equal(t, ta.Len(), tb.Len())
			t.Logf("%d batches, %d keys, height %d", tc.rounds, tb.Len(), tb.Height())
		})
	}
}

// On pm/native's log mode the host path issues each batch as one atomic
// record (DeferAtomic) and skips what only resuming a kernel needs: the
// region then holds the kernel path's bytes (functional backend, the same
// batches) everywhere but the batch record and the resume areas (marks,
// lanes, staged keys, values and free list, piece records), which keep
// the bytes Create gave them; each batch costs one sync.
func TestInsertHostAtomic(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 41))
	o := Options{Order: 4, Capacity: 4096, MaxBatch: 64}
	be, err := native.Open(t.TempDir(), native.Options{Mode: native.ModeLog})
	require.NoError(t, err)
	defer be.Close()
	mh, err := pm.NewMachine(be)
	require.NoError(t, err)
	mk := newMachine(t)
	th, err := Create(mh, "t", o)
	require.NoError(t, err)
	tk, err := Create(mk, "t", o)
	require.NoError(t, err)
	region := func(m *pm.Machine) []byte {
		r, _ := m.Memory().Snapshot().Region("t")
		return r.Data
	}
	created := slices.Clone(region(mh))
	resume := [][2]uint64{{recordOff, recordOff + line}, {th.g.marksOff(), th.g.bitmapOff(0)}}
	for r := range 40 {
		n := 1 + rng.IntN(o.MaxBatch)
		ks, vs := make([]uint64, n), make([]uint64, n)
		for i := range ks {
			ks[i], vs[i] = 1+rng.Uint64N(3000), rng.Uint64()
		}
		_, err := tk.InsertBatch(ks, vs, BatchOptions{})
		require.NoError(t, err, "round %d", r)
		syncs := be.Stats().Syncs
		require.NoError(t, th.insertHost(ks, vs), "round %d", r)
		require.EqualValues(t, 1, be.Stats().Syncs-syncs, "round %d: one sync", r)
		require.NoError(t, th.Check(), "round %d", r)
		h, k := slices.Clone(region(mh)), slices.Clone(region(mk))
		for _, a := range resume {
			require.True(t, bytes.Equal(created[a[0]:a[1]], h[a[0]:a[1]]), "round %d: resume area %d..%d written", r, a[0], a[1])
			copy(h[a[0]:a[1]], k[a[0]:a[1]])
		}
		require.True(t, bytes.Equal(k, h), "round %d (batch of %d): the trees' bytes differ", r, n)
	}
}
