package kvs_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// Writers and readers share one store on pm/native (durable log mode):
// each writer sets its own keys to the round number, batch after batch;
// readers see every writer's keys all at one round (a batch is atomic and
// calls are serialised), never going back, and Len and Check hold. At the
// end every key holds its writer's last round. Run under -race, it is the
// store's concurrency contract.
func TestStoreConcurrent(t *testing.T) {
	const writers, readers, keysPer, rounds = 4, 3, 8, 30
	for _, path := range batchPaths {
		t.Run(path.name, func(t *testing.T) {
			be, err := native.Open(t.TempDir(), native.Options{Mode: native.ModeLog})
			require.NoError(t, err)
			defer be.Close()
			m, err := pm.NewMachine(be)
			require.NoError(t, err)
			st, err := kvs.Create(m, kvs.Config{Buckets: 1024, MaxBatch: keysPer}, path.opts...)
			require.NoError(t, err)
			keysOf := func(w int) []uint32 {
				ks := make([]uint32, keysPer)
				for i := range ks {
					ks[i] = uint32(1000*(w+1) + i)
				}
				return ks
			}
			// round reads writer w's keys: the round they all hold (0
			// before its first batch), or an error if they disagree.
			round := func(w int) (uint64, error) {
				vals, found, err := st.GetBatch(keysOf(w))
				if err != nil {
					return 0, err
				}
				for i := range vals {
					if found[i] != found[0] || vals[i] != vals[0] {
						return 0, fmt.Errorf("writer %d's keys: %v found %v: a batch seen in part", w, vals, found)
					}
				}
				return vals[0], nil
			}
			errs := make(chan error, writers+readers)
			var wg, rg sync.WaitGroup
			done := make(chan struct{})
			for w := range writers {
				wg.Go(func() {
					vals := make([]uint64, keysPer)
					for r := uint64(1); r <= rounds; r++ {
						for i := range vals {
							vals[i] = r
						}
						if _, err := st.SetBatch(keysOf(w), vals); err != nil {
							errs <- fmt.Errorf("writer %d round %d: %w", w, r, err)
							return
						}
					}
				})
			}
			for g := range readers {
				rg.Go(func() {
					last := make([]uint64, writers)
					for n := 0; ; n++ {
						select {
						case <-done:
							return
						default:
						}
						for w := range writers {
							r, err := round(w)
							if err == nil && r < last[w] {
								err = fmt.Errorf("writer %d went back from round %d to %d", w, last[w], r)
							}
							if err != nil {
								errs <- fmt.Errorf("reader %d: %w", g, err)
								return
							}
							last[w] = r
						}
						if n%8 == g {
							if err := st.Check(); err != nil {
								errs <- fmt.Errorf("reader %d: %w", g, err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			close(done)
			rg.Wait()
			close(errs)
			var all []error
			for err := range errs {
				all = append(all, err)
			}
			require.NoError(t, errors.Join(all...))
			for w := range writers {
				r, err := round(w)
				require.NoError(t, err)
				require.Equal(t, uint64(rounds), r, "writer %d", w)
			}
			n, err := st.Len()
			require.NoError(t, err)
			require.Equal(t, writers*keysPer, n)
			require.NoError(t, st.Close())
		})
	}
}
