//go:build unix

package txn_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/txn"
)

// benchAccounts is the number of accounts of a benchmark store.
const benchAccounts = 10_000

// BenchmarkTransfer measures durable transfers between random accounts of
// a 10,000-account store on pm/native in its default, durable mode
// (wall-clock; the filesystem of $TMPDIR, set TMPDIR=/dev/shm for tmpfs),
// in batches of 1, 100 and 1,000 (one TransferBatch, one sync each):
// transfers/s, µs per call and bytes logged per transfer.
func BenchmarkTransfer(b *testing.B) {
	for _, batch := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			a, err := txn.OpenDir(b.TempDir(), &txn.DirOptions{Accounts: benchAccounts, Balance: 1 << 40})
			require.NoError(b, err)
			defer a.Close()
			rng := rand.New(rand.NewPCG(7, uint64(batch)))
			ts := make([]txn.Transfer, batch)
			s0 := a.Stats()
			for b.Loop() {
				for i := range ts {
					from := rng.Uint64N(benchAccounts)
					ts[i] = txn.Transfer{From: from, To: (from + 1 + rng.Uint64N(benchAccounts-1)) % benchAccounts, Amount: 1}
				}
				if err := a.TransferBatch(ts); err != nil {
					b.Fatal(err)
				}
			}
			sec, n := b.Elapsed().Seconds(), float64(b.N*batch)
			s := a.Stats()
			b.ReportMetric(n/sec, "transfers/s")
			b.ReportMetric(sec*1e6/float64(b.N), "µs/op")
			b.ReportMetric(float64(s.SyncBytes-s0.SyncBytes)/n, "logged_B/transfer")
		})
	}
}
