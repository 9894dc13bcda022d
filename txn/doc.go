// Package txn builds crash-consistent persistent structures on the scopedpm
// API: write-ahead undo logs (a conventional partitioned log whose partitions
// are appended under a lock, GPM's hierarchical coalesced log, HCL, in
// which every GPU thread owns a lock-free slot, and a CPU log whose batch of
// entries takes one ordering point, for COSPlay's tasks), undo-log
// transactions, the
// epoch status table of the scoped persist barrier paper (§8.3), and GPM's double-buffered
// checkpoints.
//
// # Executors
//
// Every operation that touches persistent memory takes an Exec: the agent
// that issues the loads, stores and fences. GPU returns one for a kernel
// thread (ordering is OFence, durability DFence), CPU one for a coroutine
// task (CLWB of the lines written since the last fence, then SFence), and
// Host one for host code between runs (every write is a durable copy-in).
// The same log, transaction or checkpoint code therefore runs in a kernel,
// in a CPU task or on the host.
//
// # Commit points
//
// Each persistent structure has exactly one commit point, an aligned 8-byte
// store, named in its doc comment:
//
//   - a log partition or HCL slot: its control word, which packs the
//     partition's generation and tail; Clear bumps the generation, which
//     discards every entry at once because each entry's checksum covers it
//     (a CPU log's control word is the generation alone: recovery finds
//     its entries by their checksums);
//   - a transaction: the Clear of its partition after the updates (or, for
//     an epoch transaction, the epoch status table word);
//   - the epoch status table: one word per lane;
//   - a checkpoint group: its index word, which names the consistent copy.
//
// # Accounts on pm/native
//
// OpenDir opens a directory as an Accounts store: a table of uint64
// balances on the real backend whose Transfer and TransferBatch are
// undo-logged transactions run by the host, atomic and durable on return
// with one durability point (one sync of the persist log) per call.
//
// # Errors
//
// Bad arguments and corrupt bytes are reported as errors wrapping the
// sentinels below (test with errors.Is); decoding never panics. A bad
// address used from a kernel or task faults that thread or task, as any
// verb does, and the launch or run returns the error.
package txn

import "errors"

// Sentinel errors; functions wrap them with %w and context.
var (
	// ErrBadArg: an argument is out of range (a partition, a size, a group).
	ErrBadArg = errors.New("txn: bad argument")
	// ErrCorrupt: persistent bytes do not decode (bad magic, version,
	// checksum or bounds).
	ErrCorrupt = errors.New("txn: corrupt data")
	// ErrFull: a log partition, slot or checkpoint group has no room.
	ErrFull = errors.New("txn: full")
	// ErrEmpty: a log partition or slot holds no entry.
	ErrEmpty = errors.New("txn: empty")
	// ErrNotAdded: a transactional update touches bytes that were not
	// added to the transaction first.
	ErrNotAdded = errors.New("txn: range not added to the transaction")
	// ErrNotActive: the transaction has committed or aborted.
	ErrNotActive = errors.New("txn: transaction not active")
	// ErrNeedsRecovery: a transaction was begun on a partition that still
	// holds the undo entries of an unrecovered transaction.
	ErrNeedsRecovery = errors.New("txn: partition needs recovery")
	// ErrMismatch: a registration after reopening differs from the one
	// the checkpoint recorded.
	ErrMismatch = errors.New("txn: registration mismatch")
	// ErrNoCheckpoint: a checkpoint group has never been saved.
	ErrNoCheckpoint = errors.New("txn: no checkpoint saved")
	// ErrHost: a host-side access failed (see Host).
	ErrHost = errors.New("txn: host access failed")
	// ErrClosed: an Accounts store was closed; every later call on it
	// returns an error wrapping ErrClosed.
	ErrClosed = errors.New("txn: store closed")
	// ErrNoAccount: a transfer or a balance names an account id the
	// store does not have.
	ErrNoAccount = errors.New("txn: no such account")
	// ErrInsufficient: a transfer moves more than its source account
	// holds.
	ErrInsufficient = errors.New("txn: insufficient funds")
)
