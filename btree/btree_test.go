package btree

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomised tests (0: a fresh one, logged)")

// testSeed returns -seed or a fresh seed, and logs it so a failure replays
// with go test -run Name -seed N.
func testSeed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed = %d (replay with -seed %d)", s, s)
	return s
}

func newMachine(t testing.TB) *pm.Machine {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	require.NoError(t, err)
	return m
}

// requireContent checks the tree against a model map, through Get, Scan
// and Len, and runs Check and verifyDerived.
func requireContent(t testing.TB, tr *Tree, want map[uint64]uint64) {
	t.Helper()
	require.NoError(t, tr.Check())
	require.NoError(t, tr.verifyDerived())
	require.Equal(t, len(want), tr.Len())
	keys := slices.Sorted(maps.Keys(want))
	var got []uint64
	for k, v := range tr.All() {
		require.Equal(t, want[k], v, "key %d", k)
		got = append(got, k)
	}
	require.Equal(t, keys, got)
	for _, k := range keys[:min(len(keys), 50)] {
		v, ok, err := tr.Get(k)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want[k], v)
	}
}

// batchKinds generates the key batches of the tests: random, ascending,
// descending, with duplicates.
func batchKeys(kind string, rng *rand.Rand, n int, offset uint64) []uint64 {
	ks := make([]uint64, n)
	for i := range ks {
		switch kind {
		case "random":
			ks[i] = rng.Uint64N(1 << 40)
		case "ascending":
			ks[i] = offset + uint64(i)
		case "descending":
			ks[i] = offset + uint64(n-i)
		case "duplicates":
			ks[i] = offset + rng.Uint64N(uint64(n/4+1))
		case "dense":
			ks[i] = rng.Uint64N(uint64(4 * n))
		}
	}
	return ks
}

func TestInsertBatch(t *testing.T) {
	seed := testSeed(t)
	for _, alg := range []Alg{Alg1, Alg2} {
		for _, kind := range []string{"random", "ascending", "descending", "duplicates", "dense"} {
			for _, order := range []int{4, 5, 15} {
				t.Run(fmt.Sprintf("%s/%s/order%d", alg, kind, order), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, uint64(order)))
					m := newMachine(t)
					tr, err := Create(m, "bt", Options{Order: order, Capacity: 8000, MaxBatch: 600})
					require.NoError(t, err)
					want := map[uint64]uint64{}
					for b := range 4 {
						n := 1 + rng.IntN(500)
						ks := batchKeys(kind, rng, n, uint64(b*1000))
						vs := make([]uint64, n)
						for i := range vs {
							vs[i] = rng.Uint64()
							want[ks[i]] = vs[i]
						}
						_, err := tr.InsertBatch(ks, vs, BatchOptions{Alg: alg, BlockThreads: 16})
						require.NoError(t, err)
						requireContent(t, tr, want)
					}
				})
			}
		}
	}
}

func TestHeightGrows(t *testing.T) {
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: 4, Capacity: 4000, MaxBatch: 1000})
	require.NoError(t, err)
	ks := batchKeys("ascending", nil, 1000, 1)
	res, err := tr.InsertBatch(ks, ks, BatchOptions{Alg: Alg2, BlockThreads: 8})
	require.NoError(t, err)
	t.Logf("%+v height %d nodes %d", res.Depth, tr.Height(), tr.Nodes())
	require.GreaterOrEqual(t, tr.Height(), 5)
	res, err = tr.InsertBatch(batchKeys("ascending", nil, 1000, 5000), ks, BatchOptions{Alg: Alg2, BlockThreads: 8})
	require.NoError(t, err)
	t.Logf("lanes %d depth %d height %d", res.Lanes, res.Depth, tr.Height())
	require.NoError(t, tr.Check())
}

func TestHostAPI(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: 4, Capacity: 3000})
	require.NoError(t, err)
	want := map[uint64]uint64{}
	for i := range 300 {
		k := rng.Uint64N(200)
		switch rng.IntN(4) {
		case 0:
			ok, err := tr.Delete(k)
			require.NoError(t, err)
			_, had := want[k]
			require.Equal(t, had, ok, "op %d delete %d", i, k)
			delete(want, k)
		default:
			v := rng.Uint64()
			require.NoError(t, tr.Put(k, v))
			want[k] = v
		}
		if i%25 == 0 {
			requireContent(t, tr, want)
		}
	}
	requireContent(t, tr, want)
	// Scan of a range, and reopening.
	var got []uint64
	for k := range tr.Scan(50, 120) {
		got = append(got, k)
	}
	var exp []uint64
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if k >= 50 && k <= 120 {
			exp = append(exp, k)
		}
	}
	require.Equal(t, exp, got)
	tr2, err := Open(m, "bt")
	require.NoError(t, err)
	requireContent(t, tr2, want)
}

func TestLookupKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 2))
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: 5, Capacity: 4000, MaxBatch: 2000})
	require.NoError(t, err)
	want := map[uint64]uint64{}
	ks := batchKeys("dense", rng, 1500, 0)
	vs := make([]uint64, len(ks))
	for i := range vs {
		vs[i] = rng.Uint64()
		want[ks[i]] = vs[i]
	}
	_, err = tr.InsertBatch(ks, vs, BatchOptions{})
	require.NoError(t, err)
	requireContent(t, tr, want)
	q := batchKeys("dense", rng, 300, 0)
	got, found, err := tr.GetBatch(q)
	require.NoError(t, err)
	for i, k := range q {
		wv, ok := want[k]
		require.Equal(t, ok, found[i], "key %d", k)
		if ok {
			require.Equal(t, wv, got[i])
		}
	}
	tests := []struct {
		r     Range
		limit int
	}{{Range{0, 100}, 1000}, {Range{50, 60}, 3}, {Range{10, 5}, 10}, {Range{5000, 7000}, 100}, {Range{0, ^uint64(0)}, 2000}}
	var rs []Range
	for _, tc := range tests {
		rs = append(rs, tc.r)
	}
	for i, tc := range tests {
		res, err := tr.ScanBatch(rs[i:i+1], tc.limit)
		require.NoError(t, err)
		var exp []KV
		for k, v := range tr.Scan(tc.r.Lo, tc.r.Hi) {
			if len(exp) < tc.limit {
				exp = append(exp, KV{k, v})
			}
		}
		require.Equal(t, exp, res[0], "range %+v", tc.r)
	}
	_, err = tr.ScanBatch(rs, 0)
	require.ErrorIs(t, err, ErrBadArg)
	require.NoError(t, tr.Check())
}

func TestDelete(t *testing.T) {
	for _, order := range []int{4, 5, 8} {
		t.Run(fmt.Sprintf("order%d", order), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(testSeed(t), uint64(order)))
			m := newMachine(t)
			tr, err := Create(m, "bt", Options{Order: order, Capacity: 3000, MaxBatch: 1500})
			require.NoError(t, err)
			ks := batchKeys("dense", rng, 1500, 0)
			want := map[uint64]uint64{}
			for _, k := range ks {
				want[k] = k + 1
			}
			vs := make([]uint64, len(ks))
			for i, k := range ks {
				vs[i] = k + 1
			}
			_, err = tr.InsertBatch(ks, vs, BatchOptions{})
			require.NoError(t, err)
			for i := range 1200 {
				k := rng.Uint64N(6000)
				ok, err := tr.Delete(k)
				require.NoError(t, err)
				_, had := want[k]
				require.Equal(t, had, ok)
				delete(want, k)
				if i%100 == 0 {
					requireContent(t, tr, want)
				}
			}
			// Delete everything left: the tree shrinks to an empty root leaf.
			for _, k := range slices.Sorted(maps.Keys(want)) {
				ok, err := tr.Delete(k)
				require.NoError(t, err)
				require.True(t, ok)
				delete(want, k)
				if len(want)%97 == 0 {
					requireContent(t, tr, want)
				}
			}
			requireContent(t, tr, want)
			require.Equal(t, 1, tr.Height())
			require.Equal(t, 1, tr.Nodes())
		})
	}
}

// TestDeleteRollsForward: a delete interrupted before its commit (its
// record durable, some new nodes and the predecessor's next pointer
// written) is finished by Open.
func TestDeleteRollsForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 3))
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: 4, Capacity: 2000, MaxBatch: 500})
	require.NoError(t, err)
	ks := batchKeys("dense", rng, 400, 0)
	_, err = tr.InsertBatch(ks, ks, BatchOptions{})
	require.NoError(t, err)
	want := map[uint64]uint64{}
	for _, k := range ks {
		want[k] = k
	}
	errCrash := fmt.Errorf("crash")
	all := slices.Sorted(maps.Keys(want))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, k := range all[:80] {
		tr.setCrashBeforeCommit(errCrash)
		_, err := tr.Delete(k)
		tr.setCrashBeforeCommit(nil)
		require.ErrorIs(t, err, errCrash)
		img, err := m.Crash()
		require.NoError(t, err)
		m, err = pm.Reopen(img, functional.New(pm.GPULimits{}))
		require.NoError(t, err)
		tr, err = Open(m, "bt")
		require.NoError(t, err)
		delete(want, k)
		requireContent(t, tr, want)
	}
}

// TestAlgorithmsAgree: Algorithm 1, Algorithm 2 and key-by-key Put build
// trees with the same content from the same batches, all passing Check.
func TestAlgorithmsAgree(t *testing.T) {
	seed := testSeed(t)
	for _, kind := range []string{"random", "ascending", "descending", "duplicates"} {
		t.Run(kind, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			var batches [][]uint64
			for b := range 3 {
				batches = append(batches, batchKeys(kind, rng, 120, uint64(b*37)))
			}
			var contents [][]KV
			for _, how := range []string{"alg1", "alg2", "put"} {
				m := newMachine(t)
				tr, err := Create(m, "bt", Options{Order: 4, Capacity: 2000, MaxBatch: 200})
				require.NoError(t, err)
				for _, ks := range batches {
					switch how {
					case "put":
						for _, k := range ks {
							require.NoError(t, tr.Put(k, k*3))
						}
					default:
						vs := make([]uint64, len(ks))
						for i, k := range ks {
							vs[i] = k * 3
						}
						alg := Alg1
						if how == "alg2" {
							alg = Alg2
						}
						_, err := tr.InsertBatch(ks, vs, BatchOptions{Alg: alg, BlockThreads: 8})
						require.NoError(t, err)
					}
					require.NoError(t, tr.Check(), how)
				}
				var kvs []KV
				for k, v := range tr.All() {
					kvs = append(kvs, KV{k, v})
				}
				contents = append(contents, kvs)
			}
			require.NotEmpty(t, contents[0])
			require.Equal(t, contents[0], contents[1])
			require.Equal(t, contents[0], contents[2])
		})
	}
}

func TestBadInput(t *testing.T) {
	m := newMachine(t)
	tr, err := Create(m, "bt", Options{Order: 4, Capacity: 12, MaxBatch: 8, MaxLanes: 2})
	require.NoError(t, err)
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"lengths", func() error { _, err := tr.InsertBatch([]uint64{1}, nil, BatchOptions{}); return err }, ErrBadArg},
		{"batch too big", func() error {
			ks := batchKeys("ascending", nil, 9, 1)
			_, err := tr.InsertBatch(ks, ks, BatchOptions{})
			return err
		}, ErrBadArg},
		{"negative block", func() error {
			_, err := tr.InsertBatch([]uint64{1}, []uint64{1}, BatchOptions{BlockThreads: -1})
			return err
		}, ErrBadArg},
		{"too many lanes", func() error {
			ks := batchKeys("ascending", nil, 8, 1)
			_, err := tr.InsertBatch(ks, ks, BatchOptions{Alg: Alg1, BlockThreads: 1})
			return err
		}, ErrBadArg},
		{"pool full", func() error {
			for k := range uint64(40) {
				if err := tr.Put(k, k); err != nil {
					return err
				}
			}
			return nil
		}, ErrFull},
		{"scan limit", func() error { _, err := tr.ScanBatch([]Range{{1, 2}}, -1); return err }, ErrBadArg},
		{"bad order", func() error { _, err := Create(m, "o", Options{Order: MaxOrder + 1}); return err }, ErrBadArg},
		{"bad capacity", func() error { _, err := Create(m, "c", Options{Capacity: -5}); return err }, ErrBadArg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.run(), tc.want)
			require.NoError(t, tr.Check())
		})
	}
	// A staged batch blocks the next one until recovered.
	tr, err = Create(m, "bt2", Options{Order: 4, Capacity: 100, MaxBatch: 8})
	require.NoError(t, err)
	require.NoError(t, tr.Put(1, 1))
	require.NoError(t, tr.Stage([]uint64{100}, []uint64{1}, BatchOptions{}))
	_, err = tr.InsertBatch([]uint64{101}, []uint64{1}, BatchOptions{})
	require.ErrorIs(t, err, ErrRecovery)
	_, err = tr.Delete(1)
	require.ErrorIs(t, err, ErrRecovery)
	_, _, err = tr.GetBatch([]uint64{1})
	require.ErrorIs(t, err, ErrRecovery)
	_, err = tr.Recover(BatchOptions{})
	require.NoError(t, err)
	v, ok, err := tr.Get(100)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(1), v)
	require.NoError(t, tr.Check())
}
