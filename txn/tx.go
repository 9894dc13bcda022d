package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
)

// undo entry payload: the address (8 bytes), the epoch (8 bytes, 0 outside
// epoch transactions) and the old bytes.
const undoHeader = 16

func encodeUndo(a pm.Addr, epoch uint64, old []byte) []byte {
	b := make([]byte, undoHeader+len(old))
	putUndoHeader(b, a, epoch)
	copy(b[undoHeader:], old)
	return b
}

// putUndoHeader writes an undo entry's header (address, epoch) into b.
func putUndoHeader(b []byte, a pm.Addr, epoch uint64) {
	binary.LittleEndian.PutUint64(b, uint64(a))
	binary.LittleEndian.PutUint64(b[8:], epoch)
}

// DecodeUndo decodes an undo entry's payload into the address of the range,
// the epoch it was logged in and the range's old bytes (aliasing p).
func DecodeUndo(p []byte) (a pm.Addr, epoch uint64, old []byte, err error) {
	if len(p) < undoHeader {
		return 0, 0, nil, fmt.Errorf("%w: undo entry of %d bytes", ErrCorrupt, len(p))
	}
	return pm.Addr(binary.LittleEndian.Uint64(p)), binary.LittleEndian.Uint64(p[8:]), p[undoHeader:], nil
}

type span struct {
	a pm.Addr
	n uint64
}

// Tx is an undo-log transaction of one agent on one partition of a Log: a
// conventional log's partition or the agent's HCL slot. The partition must
// belong to this transaction alone until it commits or aborts.
//
// Write-ahead undo logging: Add logs a range's old contents and orders the
// entry before the agent's later persists; the agent then updates the range
// in place (Store64, StoreBytes, or its own stores); Commit orders the
// updates and then clears the partition. The single commit point is that
// Clear: one aligned 8-byte store of the partition's control word, bumping
// its generation. For an epoch transaction (BeginEpoch) the commit point is
// instead the epoch status table's word, and the Clear that follows only
// frees the entries.
//
// Begin and Commit nest: an inner Begin counts up, an inner Commit counts
// down, and only the outermost Commit commits. Abort rolls the whole
// transaction back at any depth. A Tx is used by one agent only.
type Tx struct {
	x      Exec
	log    Log
	part   int
	depth  int
	spans  []span
	starts map[pm.Addr]uint64 // start -> longest span there, once spans is long
	est    *EST
	lane   int
	epoch  uint64
	logged int
}

// Begin starts a transaction of agent x on partition part of log. The
// partition must hold no entries (a leftover transaction is recovered
// first, see Recover); else it returns ErrNeedsRecovery.
func Begin(x Exec, log Log, part int) (*Tx, error) {
	if err := checkExec(x); err != nil {
		return nil, err
	}
	if log == nil {
		return nil, fmt.Errorf("%w: nil log", ErrBadArg)
	}
	n, err := log.Size(x, part)
	if err != nil {
		return nil, err
	}
	if n != 0 {
		return nil, fmt.Errorf("%w: partition %d holds %d bytes of entries", ErrNeedsRecovery, part, n)
	}
	return &Tx{x: x, log: log, part: part, depth: 1}, nil
}

// BeginEpoch starts a transaction for epoch (1..MaxEpoch) of lane of the
// epoch status table est. Its entries are tagged with the epoch, and its
// commit marks the epoch complete in est (scoped persist barrier paper §8.3).
func BeginEpoch(x Exec, log Log, part int, est *EST, lane int, epoch uint64) (*Tx, error) {
	if est == nil {
		return nil, fmt.Errorf("%w: nil epoch status table", ErrBadArg)
	}
	if err := est.check(x, lane); err != nil {
		return nil, err
	}
	if epoch == 0 || epoch > MaxEpoch {
		return nil, fmt.Errorf("%w: epoch %d", ErrBadArg, epoch)
	}
	tx, err := Begin(x, log, part)
	if err != nil {
		return nil, err
	}
	tx.est, tx.lane, tx.epoch = est, lane, epoch
	return tx, nil
}

// Begin nests a transaction inside tx.
func (tx *Tx) Begin() error {
	if tx.depth == 0 {
		return ErrNotActive
	}
	tx.depth++
	return nil
}

// Depth returns the nesting depth: 0 once committed or aborted.
func (tx *Tx) Depth() int { return tx.depth }

// Add logs the n bytes at a (their old contents) and orders the entry before
// the agent's later persists, so the range may then be updated in place.
func (tx *Tx) Add(a pm.Addr, n int) error {
	if tx.depth == 0 {
		return ErrNotActive
	}
	if n <= 0 || n > tx.log.Capacity() {
		return fmt.Errorf("%w: range of %d bytes", ErrBadArg, n)
	}
	old := make([]byte, n)
	tx.x.LoadBytes(a, old)
	if err := tx.log.Insert(tx.x, tx.part, encodeUndo(a, tx.epoch, old)); err != nil {
		return err
	}
	tx.addSpan(a, uint64(n))
	tx.logged++
	return nil
}

// indexedSpans is the number of added ranges from which covered looks a
// range's start up in a map before it scans.
const indexedSpans = 32

func (tx *Tx) addSpan(a pm.Addr, n uint64) {
	tx.spans = append(tx.spans, span{a, n})
	if tx.starts == nil && len(tx.spans) >= indexedSpans {
		tx.starts = make(map[pm.Addr]uint64, 2*len(tx.spans))
		for _, s := range tx.spans {
			tx.starts[s.a] = max(tx.starts[s.a], s.n)
		}
	} else if tx.starts != nil {
		tx.starts[a] = max(tx.starts[a], n)
	}
}

// AddMany logs the n bytes at each address of as, as Add does for each,
// and orders the entries before the agent's later persists. On a log that
// can append several entries at once (ConvLog, CPULog) they are one batch
// (see AddRanges).
func (tx *Tx) AddMany(as []pm.Addr, n int) error {
	rs := make([]pm.Range, len(as))
	for i, a := range as {
		rs[i] = pm.Range{Base: a, Size: uint64(n)}
	}
	return tx.AddRanges(rs)
}

// AddRanges logs the old contents of every range of rs, as Add does for
// each, and orders the entries before the agent's later persists. On a log
// that can append several entries at once (ConvLog: one write and one
// store of the partition's control word; CPULog: one write and one
// ordering point) they are one batch: the write-ahead half of COSPlay's
// task (every undo entry, one fence, then the updates in place).
func (tx *Tx) AddRanges(rs []pm.Range) error {
	if tx.depth == 0 {
		return ErrNotActive
	}
	for _, r := range rs {
		if r.Size == 0 || r.Size > uint64(tx.log.Capacity()) {
			return fmt.Errorf("%w: range of %d bytes", ErrBadArg, r.Size)
		}
	}
	ml, ok := tx.log.(interface {
		InsertMany(x Exec, part int, data [][]byte) error
	})
	if !ok {
		for _, r := range rs {
			if err := tx.Add(r.Base, int(r.Size)); err != nil {
				return err
			}
		}
		return nil
	}
	es := make([][]byte, len(rs))
	for i, r := range rs {
		e := make([]byte, undoHeader+r.Size)
		tx.x.LoadBytes(r.Base, e[undoHeader:])
		putUndoHeader(e, r.Base, tx.epoch)
		es[i] = e
	}
	if err := execErr(tx.x); err != nil {
		return err
	}
	if err := ml.InsertMany(tx.x, tx.part, es); err != nil {
		return err
	}
	for _, r := range rs {
		tx.addSpan(r.Base, r.Size)
	}
	tx.logged += len(rs)
	return nil
}

func (tx *Tx) covered(a pm.Addr, n uint64) error {
	if tx.depth == 0 {
		return ErrNotActive
	}
	if m, ok := tx.starts[a]; ok && n <= m {
		return nil
	}
	// Newest first: an update most often follows the Add of its range,
	// which keeps a transaction of many ranges linear.
	for i := len(tx.spans) - 1; i >= 0; i-- {
		s := tx.spans[i]
		if a >= s.a && a-s.a <= pm.Addr(s.n) && n <= s.n-uint64(a-s.a) {
			return nil
		}
	}
	return fmt.Errorf("%w: %d bytes at %v", ErrNotAdded, n, a)
}

// Store64 updates the aligned 8 bytes at a, which must lie in an added range.
func (tx *Tx) Store64(a pm.Addr, v uint64) error {
	if err := tx.covered(a, 8); err != nil {
		return err
	}
	tx.x.Store64(a, v)
	return execErr(tx.x)
}

// StoreBytes updates the bytes at a, which must lie in one added range.
func (tx *Tx) StoreBytes(a pm.Addr, data []byte) error {
	if err := tx.covered(a, uint64(len(data))); err != nil {
		return err
	}
	tx.x.StoreBytes(a, data)
	return execErr(tx.x)
}

// Ranges returns the number of ranges logged so far.
func (tx *Tx) Ranges() int { return tx.logged }

// Commit ends one nesting level. The outermost Commit orders the updates
// and then performs the commit point (see Tx), durably.
func (tx *Tx) Commit() error {
	if tx.depth == 0 {
		return ErrNotActive
	}
	tx.depth--
	if tx.depth > 0 {
		return nil
	}
	tx.spans, tx.starts = nil, nil
	join(tx.x)
	if tx.est != nil {
		if err := tx.est.Complete(tx.x, tx.lane, tx.epoch); err != nil {
			return err
		}
	}
	return tx.log.Clear(tx.x, tx.part)
}

// Abort rolls the transaction back at any depth: it restores every logged
// range, newest first, orders the restores, and clears the partition.
func (tx *Tx) Abort() error {
	if tx.depth == 0 {
		return ErrNotActive
	}
	tx.depth = 0
	tx.spans, tx.starts = nil, nil
	_, err := rollback(tx.x, tx.log, tx.part, nil, 0)
	return err
}

// rollback restores the entries of part newest first, skipping those of an
// epoch at or before done when est is set, then clears the part.
func rollback(x Exec, log Log, part int, est *EST, done uint64) (int, error) {
	es, err := log.Entries(x, part)
	if err != nil {
		return 0, err
	}
	if len(es) == 0 {
		return 0, nil
	}
	n := 0
	for i := len(es) - 1; i >= 0; i-- {
		a, epoch, old, err := DecodeUndo(es[i])
		if err != nil {
			return n, fmt.Errorf("partition %d entry %d: %w", part, i, err)
		}
		if est != nil && epoch <= done {
			continue
		}
		x.StoreBytes(a, old)
		n++
	}
	if err := execErr(x); err != nil {
		return n, err
	}
	join(x)
	return n, log.Clear(x, part)
}

// Recover rolls back the uncommitted transaction, if any, left in partition
// part of log: it restores every logged range, newest first (so the oldest
// logged value of a twice-logged range wins), orders the restores, then
// clears the partition. It is idempotent: a crash during recovery leaves the
// entries for the next attempt. It returns the number of ranges restored.
func Recover(x Exec, log Log, part int) (int, error) {
	if err := checkExec(x); err != nil {
		return 0, err
	}
	if log == nil {
		return 0, fmt.Errorf("%w: nil log", ErrBadArg)
	}
	return rollback(x, log, part, nil, 0)
}

// RecoverAll runs Recover on every partition of log.
func RecoverAll(x Exec, log Log) (int, error) {
	if err := checkExec(x); err != nil {
		return 0, err
	}
	if log == nil {
		return 0, fmt.Errorf("%w: nil log", ErrBadArg)
	}
	total := 0
	for p := 0; p < log.Parts(); p++ {
		n, err := rollback(x, log, p, nil, 0)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// RecoverEpoch recovers partition part after a crash of epoch transactions
// of lane of est: it restores the ranges logged by epochs after the last
// completed one, frees the partition, and returns that last completed
// epoch, from which the program resumes, and the ranges restored.
func RecoverEpoch(x Exec, log Log, part int, est *EST, lane int) (last uint64, restored int, err error) {
	if log == nil || est == nil {
		return 0, 0, fmt.Errorf("%w: nil log or table", ErrBadArg)
	}
	last, err = est.Last(x, lane)
	if err != nil {
		return 0, 0, err
	}
	restored, err = rollback(x, log, part, est, last)
	return last, restored, err
}
