package kvs_test

import (
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/kvs"
)

// getSeed replays one seed of TestGetMatchesGetBatch:
//
//	go test ./kvs -run TestGetMatchesGetBatch -kvs.getseed=N
var getSeed = flag.Uint64("kvs.getseed", 0, "replay TestGetMatchesGetBatch with this seed only (0: seeds 1..16)")

// Metamorphic: on random tables (random SET and DELETE batches into tables
// small enough that keys spill to their second bucket and buckets fill),
// Get of each key of a random probe set, present keys and absent ones,
// answers as GetBatch of the whole set does.
func TestGetMatchesGetBatch(t *testing.T) {
	seeds := []uint64{*getSeed}
	if *getSeed == 0 {
		seeds = seeds[:0]
		for s := uint64(1); s <= 16; s++ {
			seeds = append(seeds, s)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := seeded(t, seed)
			lk := logKinds[seed%2]
			buckets := 2 + rng.IntN(30)
			st, err := kvs.Create(newMachine(t), kvs.Config{Buckets: buckets, MaxBatch: 64, BlockThreads: 32, Log: lk})
			require.NoError(t, err)
			space := uint32(buckets * kvs.Ways * 2)
			for round := range 8 {
				keys := distinctKeys(rng, 1+rng.IntN(64), space)
				if round%4 == 3 {
					_, err = st.DeleteBatch(keys)
					require.NoError(t, err)
				} else {
					vals := make([]uint64, len(keys))
					for i := range vals {
						vals[i] = rng.Uint64()
					}
					_, err = st.SetBatch(keys, vals) // ErrFull is fine: the rest commit
					if err != nil {
						require.ErrorIs(t, err, kvs.ErrFull)
					}
				}
				probe := make([]uint32, 1+rng.IntN(64))
				for i := range probe {
					probe[i] = 1 + rng.Uint32N(space)
				}
				vals, found, err := st.GetBatch(probe)
				require.NoError(t, err)
				for i, k := range probe {
					v, ok, err := st.Get(k)
					require.NoError(t, err)
					require.Equal(t, found[i], ok, "round %d key %d", round, k)
					require.Equal(t, vals[i], v, "round %d key %d", round, k)
				}
			}
		})
	}
}

// GetBatch answers a repeated key once per request; SET and DELETE
// batches refuse one.
func TestRepeatedKeys(t *testing.T) {
	st, err := kvs.Create(newMachine(t), kvs.Config{Buckets: 8, MaxBatch: 8})
	require.NoError(t, err)
	_, err = st.SetBatch([]uint32{3, 5}, []uint64{30, 50})
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		keys  []uint32
		vals  []uint64
		found []bool
	}{
		{"present twice", []uint32{3, 3}, []uint64{30, 30}, []bool{true, true}},
		{"absent twice", []uint32{4, 4}, []uint64{0, 0}, []bool{false, false}},
		{"mixed", []uint32{5, 4, 3, 5, 4, 5}, []uint64{50, 0, 30, 50, 0, 50}, []bool{true, false, true, true, false, true}},
		{"one key, whole batch", []uint32{3, 3, 3, 3, 3, 3, 3, 3}, []uint64{30, 30, 30, 30, 30, 30, 30, 30}, []bool{true, true, true, true, true, true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, found, err := st.GetBatch(tc.keys)
			require.NoError(t, err)
			require.Equal(t, tc.vals, vals)
			require.Equal(t, tc.found, found)
		})
	}
	_, err = st.SetBatch([]uint32{3, 3}, []uint64{1, 2})
	require.ErrorIs(t, err, kvs.ErrBadArg)
	_, err = st.DeleteBatch([]uint32{5, 5})
	require.ErrorIs(t, err, kvs.ErrBadArg)
	_, _, err = st.GetBatch([]uint32{3, 0})
	require.ErrorIs(t, err, kvs.ErrBadArg)
	_, _, err = st.Get(0)
	require.ErrorIs(t, err, kvs.ErrBadArg)
}

// FuzzGetMatchesGetBatch: on a table whose bucket bytes are arbitrary,
// Get of a key answers as GetBatch of that key, never panics.
func FuzzGetMatchesGetBatch(f *testing.F) {
	f.Add([]byte{7, 0, 0, 0}, uint32(7))
	f.Add(make([]byte, 4*kvs.BucketBytes), uint32(1))
	f.Add([]byte("\x2a\x00\x00\x00\x05\x00\x00\x00...arbitrary...."), uint32(42))
	f.Fuzz(func(t *testing.T, table []byte, key uint32) {
		if key == 0 {
			key = 1
		}
		const buckets = 4
		m := newMachine(t)
		st, err := kvs.Create(m, kvs.Config{Buckets: buckets, MaxBatch: 2})
		require.NoError(t, err)
		body := st.Table().Base.Add(2 * kvs.BucketBytes) // after the header and flag lines
		table = table[:min(len(table), buckets*kvs.BucketBytes)]
		require.NoError(t, m.CopyIn(body, table))
		for _, k := range []uint32{key, 7, 42} {
			v, ok, err := st.Get(k)
			require.NoError(t, err)
			vs, found, err := st.GetBatch([]uint32{k})
			require.NoError(t, err)
			require.Equal(t, found[0], ok, "key %d", k)
			require.Equal(t, vs[0], v, "key %d", k)
		}
	})
}
