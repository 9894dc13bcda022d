package txn_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/txn"
)

// Random operation sequences against an in-memory model of each partition,
// checked with Check after every step. Replay a failure with its seed.
func TestLogModel(t *testing.T) {
	for _, k := range logKinds {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(k.name, func(t *testing.T) {
				r := seeded(t, seed)
				m := newMachine(t)
				l, err := k.create(m, "log")
				require.NoError(t, err)
				h := txn.Host(m)
				model := make([][][]byte, l.Parts())
				for step := 0; step < 300; step++ {
					p := r.IntN(min(l.Parts(), 5))
					switch op := r.IntN(10); {
					case op < 6:
						e := make([]byte, r.IntN(40))
						for i := range e {
							e[i] = byte(r.Uint32())
						}
						err := l.Insert(h, p, e)
						if err == nil {
							model[p] = append(model[p], e)
						} else {
							require.ErrorIs(t, err, txn.ErrFull, "step %d", step)
						}
					case op < 8:
						err := l.Remove(h, p)
						if len(model[p]) == 0 {
							require.ErrorIs(t, err, txn.ErrEmpty)
						} else {
							require.NoError(t, err)
							model[p] = model[p][:len(model[p])-1]
						}
					case op < 9:
						require.NoError(t, l.Clear(h, p))
						model[p] = nil
					default:
						e, err := l.Read(h, p)
						if len(model[p]) == 0 {
							require.ErrorIs(t, err, txn.ErrEmpty)
						} else {
							require.NoError(t, err)
							require.True(t, bytes.Equal(model[p][len(model[p])-1], e))
						}
					}
					got, err := l.Entries(h, p)
					require.NoError(t, err)
					require.Len(t, got, len(model[p]), "step %d", step)
					for i := range got {
						require.True(t, bytes.Equal(model[p][i], got[i]), "step %d entry %d", step, i)
					}
					require.NoError(t, l.Check(h))
				}
			})
		}
	}
}
