//go:build unix

package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/txn"
)

func init() {
	Register(Experiment{
		Name: "txn-vs-pebble",
		Description: "WALL-CLOCK time, not simulated: transfers between random accounts as undo-logged transactions " +
			"(txn.OpenDir on pm/native, durable mode, one sync per batch) against Pebble (read both balances, write " +
			"both, one pebble.Sync batch per transfer batch) and bbolt (one Update per batch), same accounts, same " +
			"transfers, interleaved time slices, on disk and on tmpfs: batches of 1, 100 and 1,000 transfers; " +
			"transfers/s, p50/p99 latency per batch, bytes written per transfer, RSS growth at open; directory from $" +
			EnvBenchDir,
		NoSet: true,
		Run:   runTxnVsPebble,
	})
}

// bankStore is one side of txn-vs-pebble: accounts 0..n-1 with uint64
// balances. transfer applies a batch atomically and durably, or none of
// it; balance reads one account.
type bankStore interface {
	transfer(ts []txn.Transfer) error
	balance(id uint64) (uint64, error)
	close() error
	extra(transfers int) []metric // side-specific metrics, per transfer
}

// bankSys names a side and opens it in dir with n accounts of
// bankOpening each (preloaded, not timed).
type bankSys struct {
	name string
	open func(dir string, n int) (bankStore, error)
}

// bankShape sizes txn-vs-pebble.
type bankShape struct {
	accounts int
	budget   time.Duration // timed run per batch size and side
}

func bankShapeFor(o Options) bankShape {
	if o.Quick && o.Smoke {
		return bankShape{accounts: 1 << 8, budget: 10 * time.Millisecond}
	}
	if o.Quick {
		return bankShape{accounts: 1 << 12, budget: 200 * time.Millisecond}
	}
	return bankShape{accounts: 1 << 16, budget: time.Second}
}

// bankOpening is every account's opening balance: transfers of 1 never
// run out.
const bankOpening = 1 << 40

// bankBatches are the batch sizes of txn-vs-pebble.
var bankBatches = [...]int{1, 100, 1000}

func runTxnVsPebble(ctx context.Context, o Options) ([]Row, error) {
	sh := bankShapeFor(o)
	dirs := benchFilesystems(o.Smoke)
	var rows []Row
	item := 0
	o.progress(len(dirs)*len(bankBatches), 0)
	for _, fd := range dirs {
		fsLabel, durable := fd.label, fd.durable
		systems := []bankSys{
			{"txn-native-" + durable.String(), func(dir string, n int) (bankStore, error) { return openTxnBank(dir, durable, n) }},
			{"pebble-sync", openPebbleBank},
			{"bbolt", openBoltBank},
		}
		for _, batch := range bankBatches {
			item++
			if !o.mine(item - 1) {
				continue
			}
			workload := fmt.Sprintf("transfer/b%d", batch)
			ms, err := runBankInterleaved(ctx, sh, systems, fd.dir, batch)
			if err != nil {
				return rows, fmt.Errorf("bench: txn-vs-pebble %s %s: %w", fsLabel, workload, err)
			}
			rows = append(rows, sideRows("txn-vs-pebble", workload, fsLabel, bankNames(systems), ms, "transfers_per_s")...)
			o.progress(0, 1)
		}
	}
	return rows, nil
}

// bankNames returns the sides' names.
func bankNames(systems []bankSys) []string {
	names := make([]string, len(systems))
	for i, s := range systems {
		names[i] = s.name
	}
	return names
}

// runBankInterleaved runs batches of batch transfers on every side,
// interleaved in time slices (interleave).
func runBankInterleaved(ctx context.Context, sh bankShape, systems []bankSys, parent string, batch int) ([][]metric, error) {
	return interleave(ctx, parent, "txn-vs-pebble", bankNames(systems), sh.budget, minOps, func(i int, dir string) (slicedRun, error) {
		r, err := startBank(sh, systems[i], dir, batch)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
}

func (r *bankRun) timed() int { return len(r.lat) }
func (r *bankRun) abort()     { r.st.close() }

// bankRun is one side of txn-vs-pebble in progress. Every side draws the
// same transfers (the same seed).
type bankRun struct {
	st        bankStore
	n         uint64 // accounts
	batch     int
	rng       *rand.Rand
	ts        []txn.Transfer
	wallMeter // done counts transfers
}

// startBank opens side s in dir with sh.accounts accounts and measures
// the RSS the open and the preload added.
func startBank(sh bankShape, s bankSys, dir string, batch int) (*bankRun, error) {
	r := &bankRun{n: uint64(sh.accounts), batch: batch, rng: rand.New(rand.NewPCG(uint64(batch), 0x7478)), ts: make([]txn.Transfer, batch)}
	rss0 := settledRSS()
	st, err := s.open(dir, sh.accounts)
	if err != nil {
		return nil, err
	}
	r.st = st
	if rss1 := settledRSS(); rss1 > rss0 {
		r.rssBytes = rss1 - rss0
	}
	return r, nil
}

// run runs batches until this slice lasted budget and ran at least minN.
func (r *bankRun) run(budget time.Duration, minN int) error {
	prepare := func() bool {
		for i := range r.ts {
			from := r.rng.Uint64N(r.n)
			r.ts[i] = txn.Transfer{From: from, To: (from + 1 + r.rng.Uint64N(r.n-1)) % r.n, Amount: 1 + r.rng.Uint64N(100)}
		}
		return true
	}
	return r.timeSlice(budget, minN, r.batch, prepare, func() error { return r.st.transfer(r.ts) })
}

// finish closes the side (its closing writes count) and returns its
// metrics.
func (r *bankRun) finish() ([]metric, error) {
	extra := r.st.extra(r.done)
	if err := r.closeCounted(r.st.close); err != nil {
		return nil, err
	}
	return append(r.metrics("transfer"), extra...), nil
}

// txnBank is the accounts store of package txn.
type txnBank struct {
	a  *txn.Accounts
	s0 native.Stats
}

// openTxnBank creates the store with durability off (not timed), then
// reopens it in mode.
func openTxnBank(dir string, mode native.Mode, n int) (*txnBank, error) {
	a, err := txn.OpenDir(dir, &txn.DirOptions{Accounts: n, Balance: bankOpening, Mode: native.ModeUnsafeNoSync})
	if err != nil {
		return nil, err
	}
	if err := a.Close(); err != nil {
		return nil, err
	}
	if a, err = txn.OpenDir(dir, &txn.DirOptions{Mode: mode, NoCreate: true}); err != nil {
		return nil, err
	}
	return &txnBank{a: a, s0: a.Stats()}, nil
}

func (b *txnBank) transfer(ts []txn.Transfer) error { return b.a.TransferBatch(ts) }

func (b *txnBank) balance(id uint64) (uint64, error) { return b.a.Balance(id) }

func (b *txnBank) close() error { return b.a.Close() }

// extra reports the log's fdatasyncs and logged bytes per transfer since
// the measured open.
func (b *txnBank) extra(transfers int) []metric {
	s, k := b.a.Stats(), float64(max(transfers, 1))
	return []metric{
		{"syncs_per_transfer", float64(s.Syncs-b.s0.Syncs) / k},
		{"logged_bytes_per_transfer", float64(s.SyncBytes-b.s0.SyncBytes) / k},
	}
}

// errBankFunds: a baseline's transfer moves more than its source holds
// (the bench's amounts never do; the check is the work a bank does).
var errBankFunds = errors.New("bench: insufficient funds")

// bankPlan applies ts to the balances get reads, checking funds, and
// returns the touched accounts' new balances in first-touch order.
func bankPlan(ts []txn.Transfer, next map[uint64]uint64, order []uint64, get func(id uint64) (uint64, error)) ([]uint64, error) {
	clear(next)
	order = order[:0]
	load := func(id uint64) (uint64, error) {
		if v, ok := next[id]; ok {
			return v, nil
		}
		v, err := get(id)
		if err != nil {
			return 0, err
		}
		next[id] = v
		order = append(order, id)
		return v, nil
	}
	for _, t := range ts {
		fv, err := load(t.From)
		if err != nil {
			return order, err
		}
		tv, err := load(t.To)
		if err != nil {
			return order, err
		}
		if fv < t.Amount {
			return order, fmt.Errorf("%w: %d from account %d of %d", errBankFunds, t.Amount, t.From, fv)
		}
		next[t.From], next[t.To] = fv-t.Amount, tv+t.Amount
	}
	return order, nil
}

// pebbleBank is Pebble with one synced batch per transfer batch: each
// transfer reads both balances (from the batch's own writes first) and
// writes both.
type pebbleBank struct {
	db    *pebble.DB
	lsm0  uint64
	next  map[uint64]uint64
	order []uint64
}

func openPebbleBank(dir string, n int) (bankStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	b := db.NewBatch()
	var kb, vb [8]byte
	for id := range uint64(n) {
		if err := b.Set(ordBytes(id, &kb), ordValBytes(bankOpening, &vb), nil); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := db.Apply(b, pebble.NoSync); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.Flush(); err != nil {
		db.Close()
		return nil, err
	}
	p := &pebbleBank{db: db, next: map[uint64]uint64{}}
	p.lsm0 = pebbleWritten(db)
	return p, nil
}

func (p *pebbleBank) balance(id uint64) (uint64, error) {
	var kb [8]byte
	v, c, err := p.db.Get(ordBytes(id, &kb))
	if err != nil {
		return 0, fmt.Errorf("bench: pebble account %d: %w", id, err)
	}
	if len(v) != 8 {
		c.Close()
		return 0, fmt.Errorf("bench: pebble account %d: %d-byte balance", id, len(v))
	}
	bal := le64(v)
	return bal, c.Close()
}

func (p *pebbleBank) transfer(ts []txn.Transfer) error {
	var err error
	if p.order, err = bankPlan(ts, p.next, p.order, p.balance); err != nil {
		return err
	}
	b := p.db.NewBatchWithSize(len(p.order) * 32)
	var kb, vb [8]byte
	for _, id := range p.order {
		if err := b.Set(ordBytes(id, &kb), ordValBytes(p.next[id], &vb), nil); err != nil {
			return err
		}
	}
	return p.db.Apply(b, pebble.Sync)
}

func (p *pebbleBank) close() error { return p.db.Close() }

func (p *pebbleBank) extra(transfers int) []metric {
	return []metric{{"lsm_bytes_per_transfer", float64(pebbleWritten(p.db)-p.lsm0) / float64(max(transfers, 1))}}
}

// pebbleWritten returns the bytes Pebble wrote: WAL, flushes, compactions.
func pebbleWritten(db *pebble.DB) uint64 {
	m := db.Metrics()
	t := m.Total()
	return m.WAL.BytesWritten + t.TableBytesFlushed + t.TableBytesCompacted + t.BlobBytesFlushed + t.BlobBytesCompacted
}

// boltBank is bbolt with one Update (one fsync) per transfer batch.
type boltBank struct {
	db    *bolt.DB
	w0    int64
	next  map[uint64]uint64
	order []uint64
}

func openBoltBank(dir string, n int) (bankStore, error) {
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o644, nil)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(boltBucket)
		if err != nil {
			return err
		}
		for id := range uint64(n) {
			var kb, vb [8]byte
			if err := b.Put(ordBytes(id, &kb), ordValBytes(bankOpening, &vb)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	st := db.Stats()
	return &boltBank{db: db, w0: st.TxStats.GetWrite(), next: map[uint64]uint64{}}, nil
}

func boltBalance(b *bolt.Bucket, id uint64) (uint64, error) {
	var kb [8]byte
	v := b.Get(ordBytes(id, &kb))
	if len(v) != 8 {
		return 0, fmt.Errorf("bench: bbolt account %d: %d-byte balance", id, len(v))
	}
	return le64(v), nil
}

func (s *boltBank) balance(id uint64) (uint64, error) {
	var bal uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		bal, err = boltBalance(tx.Bucket(boltBucket), id)
		return err
	})
	return bal, err
}

func (s *boltBank) transfer(ts []txn.Transfer) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		var err error
		s.order, err = bankPlan(ts, s.next, s.order, func(id uint64) (uint64, error) { return boltBalance(b, id) })
		if err != nil {
			return err
		}
		for _, id := range s.order {
			// bbolt keeps the slices until the transaction ends.
			var kb, vb [8]byte
			if err := b.Put(ordBytes(id, &kb), ordValBytes(s.next[id], &vb)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltBank) close() error { return s.db.Close() }

func (s *boltBank) extra(transfers int) []metric {
	st := s.db.Stats()
	return []metric{{"bolt_page_writes_per_transfer", float64(st.TxStats.GetWrite()-s.w0) / float64(max(transfers, 1))}}
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
