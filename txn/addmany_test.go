package txn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/txn"
)

// AddMany logs many ranges at once (ConvLog: one write, one control
// word; HCL: one Add each) so that updates are covered and Abort or
// Recover restores every range; a log with no room is ErrFull and logs
// nothing.
func TestTxAddMany(t *testing.T) {
	for _, tc := range []struct {
		name   string
		log    string
		ranges int
		cap    uint64
		want   error
	}{
		{"conv few", "conv", 3, 4096, nil},
		{"conv indexed", "conv", 100, 4096, nil},
		{"hcl", "hcl", 40, 2048, nil},
		{"conv full", "conv", 10, 256, txn.ErrFull},
		{"cpu", "cpu", 40, 2048, nil},
		{"cpu full", "cpu", 10, 256, txn.ErrFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			h := txn.Host(m)
			data, err := m.CreateRegion("data", 8*128)
			require.NoError(t, err)
			var l txn.Log
			switch tc.log {
			case "hcl":
				l, err = txn.CreateHCL(m, "log", 1, 1, tc.cap)
			case "cpu":
				l, err = txn.CreateCPU(m, "log", 1, tc.cap)
			default:
				l, err = txn.CreateConv(m, "log", 1, tc.cap)
			}
			require.NoError(t, err)
			as := make([]pm.Addr, tc.ranges)
			for i := range as {
				as[i] = data.Base.Add(uint64(8 * (i * 7 % 128)))
				h.Store64(as[i], uint64(i)+1)
			}
			tx, err := txn.Begin(h, l, 0)
			require.NoError(t, err)
			err = tx.AddMany(as, 8)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				n, err := l.Size(h, 0)
				require.NoError(t, err)
				require.Zero(t, n, "nothing logged")
				require.ErrorIs(t, tx.Store64(as[0], 9), txn.ErrNotAdded)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.ranges, tx.Ranges())
			es, err := l.Entries(h, 0)
			require.NoError(t, err)
			require.Len(t, es, tc.ranges)
			for i, a := range as {
				require.NoError(t, tx.Store64(a, 1000+uint64(i)))
			}
			require.ErrorIs(t, tx.Store64(data.Base.Add(8*127+1), 0), txn.ErrNotAdded)
			// Recover, as after a crash: every range back.
			n, err := txn.Recover(h, l, 0)
			require.NoError(t, err)
			require.Equal(t, tc.ranges, n)
			for i, a := range as {
				require.Equal(t, uint64(i)+1, h.Load64(a))
			}
		})
	}
}
