//go:build unix

package txn

import (
	"errors"
	"fmt"
	"sync"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// Defaults of OpenDir.
const (
	// DefaultAccounts is the number of accounts of a store OpenDir
	// creates with DirOptions.Accounts 0.
	DefaultAccounts = 1024
	// DefaultMaxBatch is the most transfers of one TransferBatch of a
	// store created with DirOptions.MaxBatch 0.
	DefaultMaxBatch = 4096
)

// Regions of an accounts store: the balances, and the undo log of the
// transaction in progress.
const (
	accountsRegion = "accounts"
	undoRegion     = "accounts.undo"
	magicAccounts  = "TXNACCT\x00"
)

// undoEntryBytes is the stream bytes of one logged balance: the undo
// payload (address, epoch, 8 old bytes) and the entry trailer.
const undoEntryBytes = undoHeader + 8 + trailerSize

// DirOptions configure OpenDir. A nil *DirOptions, like the zero value,
// means every default. Accounts, Balance and MaxBatch shape a new store; a
// store that exists keeps the shape it was created with.
type DirOptions struct {
	// Accounts is the number of accounts of a new store, with ids
	// 0..Accounts-1 (0: DefaultAccounts). The table does not grow.
	Accounts int
	// Balance is the opening balance of every account of a new store.
	Balance uint64
	// MaxBatch is the most transfers of one TransferBatch (0:
	// DefaultMaxBatch); it sizes the undo log (64 bytes per transfer).
	MaxBatch int
	// Mode is the durability mode of pm/native. The zero value,
	// native.ModeAuto, picks dax on a DAX filesystem whose CPU has CLWB
	// or CLFLUSHOPT and the persist log (native.ModeLog: one fdatasync per
	// durability point) everywhere else; both make every acknowledged
	// transfer survive a crash or power cut. native.ModeUnsafeNoSync gives
	// durability up (for measurement and preloading only).
	Mode native.Mode
	// NoCreate refuses a directory that holds no store (an error wrapping
	// pm.ErrNoRegion) instead of creating one there.
	NoCreate bool
}

// Transfer moves Amount from account From to account To.
type Transfer struct {
	From, To, Amount uint64
}

// Accounts is a persistent table of uint64 balances indexed by account id,
// stored in a directory on the real backend (pm/native), whose transfers
// are undo-logged transactions (Begin, Tx.Add, Tx.Store64, Tx.Commit) run
// by the host: each balance a transfer changes is logged, then updated in
// place, and the Clear of the log commits. OpenDir opens or creates one
// and rolls back a transaction a crash interrupted; Close releases it.
//
// # Durability
//
// Transfer and TransferBatch are atomic and durable when they return nil:
// a crash or power cut at any later moment keeps them, and one at any
// earlier moment leaves all of a call's transfers or none (the next
// OpenDir rolls a partial one back). A call is one durability point: in
// log mode, one sync of the persist log, whatever the batch size. A call
// that fails validation (ErrNoAccount, ErrInsufficient, ErrBadArg) writes
// nothing. The sum of the balances never changes.
//
// # Concurrency
//
// An Accounts is safe for concurrent use by several goroutines: its calls
// are serialised, reads included.
type Accounts struct {
	mu       sync.Mutex
	be       *native.Backend
	m        *pm.Machine
	log      *ConvLog
	bal0     pm.Addr // balance of account 0
	n        uint64
	maxBatch int
	dir      string
	closed   bool
	noDefer  bool // test: a sync per host write, to cut power inside a transaction

	// Scratch of TransferBatch: the new balance of each account touched,
	// and the touched ids in first-touch order.
	next  map[uint64]uint64
	order []uint64
	addrs []pm.Addr
}

// OpenDir opens the accounts store in directory dir, creating the
// directory and a store if there is none (see DirOptions.NoCreate), and
// rolls back a transfer that a crash interrupted. The directory is locked
// until Close: a second OpenDir of it fails with an error wrapping
// native.ErrLocked. A missing or unusable directory is an error wrapping
// native.ErrIO; damaged files wrap ErrCorrupt or pm.ErrCorrupt.
func OpenDir(dir string, opts *DirOptions) (*Accounts, error) {
	var o DirOptions
	if opts != nil {
		o = *opts
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory name", ErrBadArg)
	}
	if o.Accounts < 0 || o.MaxBatch < 0 || o.MaxBatch > MaxPartCap/(2*undoEntryBytes) {
		return nil, fmt.Errorf("%w: %d accounts, batches of %d", ErrBadArg, o.Accounts, o.MaxBatch)
	}
	be, err := native.Open(dir, native.Options{Mode: o.Mode, Create: !o.NoCreate})
	if err != nil {
		return nil, fmt.Errorf("txn: open %s: %w", dir, err)
	}
	m, err := pm.NewMachine(be)
	if err != nil {
		_ = be.Close()
		return nil, fmt.Errorf("txn: open %s: %w", dir, err)
	}
	a, err := openAccounts(be, m, dir, o)
	if err != nil {
		_ = be.Close()
		return nil, fmt.Errorf("txn: open %s: %w", dir, err)
	}
	return a, nil
}

// openAccounts opens the store on machine m over be, or creates it, and
// recovers it. A creation that a crash interrupted (the balances' header,
// written last, is still zero) is started again. A nil be (tests: an image
// reopened on another backend) runs every step as its own durability
// point.
func openAccounts(be *native.Backend, m *pm.Machine, dir string, o DirOptions) (*Accounts, error) {
	a := &Accounts{be: be, m: m, dir: dir, next: map[uint64]uint64{}}
	r, err := m.OpenRegion(accountsRegion)
	switch {
	case errors.Is(err, pm.ErrNoRegion):
		return a, a.create(o)
	case err != nil:
		return nil, err
	}
	hb, err := readHeader(m, r)
	if err != nil {
		return nil, err
	}
	if allZero(hb) {
		if err := m.RemoveRegion(accountsRegion); err != nil {
			return nil, err
		}
		return a, a.create(o)
	}
	f, err := decodeHeader(hb, magicAccounts, 3)
	if err != nil {
		return nil, fmt.Errorf("region %q: %w", accountsRegion, err)
	}
	n, maxBatch, off := f[0], f[1], f[2]
	if n == 0 || maxBatch == 0 || maxBatch > MaxPartCap/(2*undoEntryBytes) || off != Line || n > (r.Size-Line)/8 {
		return nil, fmt.Errorf("%w: region %q: %d accounts, batches of %d, balances at %d, %d bytes",
			ErrCorrupt, accountsRegion, n, maxBatch, off, r.Size)
	}
	a.n, a.maxBatch, a.bal0 = n, int(maxBatch), r.Base.Add(off)
	if a.log, err = OpenConv(m, undoRegion); err != nil {
		return nil, err
	}
	if a.log.Capacity() < 2*a.maxBatch*undoEntryBytes {
		return nil, fmt.Errorf("%w: undo log of %d bytes for batches of %d", ErrCorrupt, a.log.Capacity(), a.maxBatch)
	}
	err = a.deferred(func() error {
		_, err := RecoverAll(Host(m), a.log)
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// create makes a new store: the undo log, the balances, and last the
// balances' header, which marks the creation done; one durability point.
func (a *Accounts) create(o DirOptions) error {
	if o.NoCreate {
		return fmt.Errorf("%w: no accounts (region %q)", pm.ErrNoRegion, accountsRegion)
	}
	if o.Accounts == 0 {
		o.Accounts = DefaultAccounts
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	n := uint64(o.Accounts)
	if n > (pm.MaxRangeSize-Line)/8 || (o.Balance != 0 && n > ^uint64(0)/o.Balance) {
		return fmt.Errorf("%w: %d accounts of %d (the total must fit 64 bits)", ErrBadArg, n, o.Balance)
	}
	if _, err := a.m.OpenRegion(undoRegion); err == nil {
		if err := a.m.RemoveRegion(undoRegion); err != nil {
			return err
		}
	}
	return a.deferred(func() error {
		log, err := CreateConv(a.m, undoRegion, 1, uint64(2*o.MaxBatch*undoEntryBytes))
		if err != nil {
			return err
		}
		r, err := a.m.CreateRegion(accountsRegion, Line+8*n)
		if err != nil {
			return err
		}
		if o.Balance != 0 {
			b := make([]byte, 8*n)
			for i := range n {
				pm.PutLE(b[8*i:8*i+8], o.Balance)
			}
			if err := a.m.CopyIn(r.Base.Add(Line), b); err != nil {
				return err
			}
		}
		if err := a.m.CopyIn(r.Base, encodeHeader(magicAccounts, n, uint64(o.MaxBatch), Line)); err != nil {
			return err
		}
		a.log, a.n, a.maxBatch, a.bal0 = log, n, o.MaxBatch, r.Base.Add(Line)
		return nil
	})
}

// deferred runs fn with its durability points deferred to its end
// (native.Backend.Defer): in log mode its host writes go to the persist
// log in issue order and one sync at the end makes them durable. The undo
// protocol needs only that order (a crash recovers a prefix of the
// writes, as if each had synced), so a transaction costs one sync instead
// of one per write. Without a native backend, or with noDefer (tests),
// each write is its own durability point.
func (a *Accounts) deferred(fn func() error) error {
	if a.be == nil || a.noDefer {
		return fn()
	}
	return a.be.Defer(fn)
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// use returns an error wrapping ErrClosed after Close; the caller holds
// a.mu.
func (a *Accounts) use() error {
	if a.closed {
		return fmt.Errorf("%w: %s", ErrClosed, a.dir)
	}
	return nil
}

func (a *Accounts) addr(id uint64) pm.Addr { return a.bal0.Add(8 * id) }

// load returns the stored balance of id < a.n.
func (a *Accounts) load(id uint64) (uint64, error) {
	return a.m.Memory().Load(a.addr(id), 8)
}

// Len returns the number of accounts (ids 0..Len()-1).
func (a *Accounts) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int(a.n)
}

// MaxBatch returns the most transfers of one TransferBatch.
func (a *Accounts) MaxBatch() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.maxBatch
}

// Balance returns the balance of account id as of the last transfer that
// returned; it is durable. An id out of range is ErrNoAccount.
func (a *Accounts) Balance(id uint64) (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.use(); err != nil {
		return 0, err
	}
	if id >= a.n {
		return 0, fmt.Errorf("%w: %d of %d", ErrNoAccount, id, a.n)
	}
	return a.load(id)
}

// Total returns the sum of every balance, which transfers conserve.
func (a *Accounts) Total() (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.use(); err != nil {
		return 0, err
	}
	var t uint64
	for id := range a.n {
		v, err := a.load(id)
		if err != nil {
			return 0, err
		}
		t += v
	}
	return t, nil
}

// Transfer moves amount from account from to account to, atomically; it
// is durable when Transfer returns nil (one sync of the persist log in log
// mode). An unknown account is ErrNoAccount, a balance of from below
// amount ErrInsufficient, from equal to to ErrBadArg; each writes nothing.
func (a *Accounts) Transfer(from, to, amount uint64) error {
	return a.TransferBatch([]Transfer{{From: from, To: to, Amount: amount}})
}

// TransferBatch applies the transfers in order as one transaction: all of
// them or, on any error, none. It is durable when it returns nil, with one
// durability point for the whole batch (one sync of the persist log in
// log mode). Each transfer is checked as Transfer checks it, against the
// balances its predecessors in the batch left; the error names the first
// that fails, by index, and nothing is written. A batch holds at most
// MaxBatch transfers (ErrBadArg beyond); an empty one does nothing.
func (a *Accounts) TransferBatch(ts []Transfer) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.use(); err != nil {
		return err
	}
	if len(ts) == 0 {
		return nil
	}
	if len(ts) > a.maxBatch {
		return fmt.Errorf("%w: batch of %d transfers, at most %d", ErrBadArg, len(ts), a.maxBatch)
	}
	if err := a.plan(ts); err != nil {
		return err
	}
	return a.deferred(a.apply)
}

// plan checks the batch and computes the new balance of every account it
// touches (a.next, a.order) without writing.
func (a *Accounts) plan(ts []Transfer) error {
	clear(a.next)
	a.order = a.order[:0]
	get := func(id uint64) (uint64, error) {
		if v, ok := a.next[id]; ok {
			return v, nil
		}
		v, err := a.load(id)
		if err != nil {
			return 0, err
		}
		a.next[id] = v
		a.order = append(a.order, id)
		return v, nil
	}
	for i, t := range ts {
		switch {
		case t.From >= a.n || t.To >= a.n:
			return fmt.Errorf("%w: transfer %d from %d to %d (%d accounts)", ErrNoAccount, i, t.From, t.To, a.n)
		case t.From == t.To:
			return fmt.Errorf("%w: transfer %d from account %d to itself", ErrBadArg, i, t.From)
		}
		fv, err := get(t.From)
		if err != nil {
			return err
		}
		tv, err := get(t.To)
		if err != nil {
			return err
		}
		if fv < t.Amount {
			return fmt.Errorf("%w: transfer %d of %d from account %d, which holds %d", ErrInsufficient, i, t.Amount, t.From, fv)
		}
		if tv+t.Amount < tv {
			return fmt.Errorf("%w: transfer %d overflows account %d", ErrBadArg, i, t.To)
		}
		a.next[t.From], a.next[t.To] = fv-t.Amount, tv+t.Amount
	}
	return nil
}

// apply writes a planned batch as one undo-log transaction: log the old
// value of every touched balance (one write of the undo entries, one
// store of the log's control word), store the new ones, commit. The caller defers its
// durability points to one.
func (a *Accounts) apply() error {
	x := Host(a.m)
	tx, err := Begin(x, a.log, 0)
	if err != nil {
		return err
	}
	a.addrs = a.addrs[:0]
	for _, id := range a.order {
		a.addrs = append(a.addrs, a.addr(id))
	}
	if err := tx.AddMany(a.addrs, 8); err != nil {
		return a.abort(tx, err)
	}
	for i, id := range a.order {
		if err := tx.Store64(a.addrs[i], a.next[id]); err != nil {
			return a.abort(tx, err)
		}
	}
	return tx.Commit()
}

// abort rolls tx back after err; the backend's sticky error, if any,
// makes every later call fail and OpenDir recover.
func (a *Accounts) abort(tx *Tx, err error) error {
	return errors.Join(err, tx.Abort())
}

// Stats returns the counts of the store's backend since OpenDir: in log
// mode, Syncs is the fdatasyncs of the persist log and SyncBytes the bytes
// logged (see native.Stats). They stay readable after Close.
func (a *Accounts) Stats() native.Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.be == nil {
		return native.Stats{}
	}
	return a.be.Stats()
}

// Dir returns the directory the store is in.
func (a *Accounts) Dir() string { return a.dir }

// Close writes the checkpoint of the stored files and releases the
// directory (every transfer is already durable). It returns the I/O error
// of the backend, if any. Every later call returns an error wrapping
// ErrClosed; a second Close returns nil.
func (a *Accounts) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	if a.be == nil {
		return nil
	}
	if err := a.be.Close(); err != nil {
		return fmt.Errorf("txn: close %s: %w", a.dir, err)
	}
	return nil
}
