// Package kvs is gpKVS, the GPU key-value store of GPM (§5.2) as
// the SBRP paper runs it (SBRP §5.1, Figure 4): a persistent hash table
// in a PM region, updated by batched GPU kernels with one thread per
// request, made crash-consistent by write-ahead undo logging through
// package txn and a transaction flag.
//
// # Table
//
// The table is an array of 8-way set-associative buckets, each one aligned
// 128-byte line: eight 32-bit signatures, then eight 64-bit values, then 32
// unused bytes. A key has two candidate buckets (two-choice hashing); a new
// key goes to the candidate with more free ways. Keys are 32-bit and
// nonzero, and the signature stored is the key itself, so a lookup needs no
// second read to confirm a match (MegaKV and GPM keep a hash signature here
// and the full key behind a 64-bit location; with 32-bit keys the two
// coincide). Signature 0 marks a free way.
//
// # Batches and crash consistency
//
// A SET or DELETE batch runs four kernels:
//
//  1. begin: one thread persists the transaction flag "batch n active"
//     and waits for it (DFence);
//  2. the batch kernel: each thread finds its key's way (claiming a free
//     way with an atomic on a volatile occupancy mask for a new key), logs
//     the way's old signature and value in the undo log, issues an OFence
//     so the entry persists before the update, updates the way in place,
//     and waits for its persists (DFence);
//  3. commit: one thread persists "batch n committed" (the commit point);
//  4. truncate: one thread per log partition the batch wrote discards its
//     entries (the log is empty before a batch, so the others are too: a
//     batch of one costs the same on a store of any MaxBatch).
//
// On a backend that can defer its durability points (pm/native's
// Backend.Defer) the four launches share one: the protocol needs only the
// order of their persists, which the persist log keeps, so a batch costs
// one fdatasync there, and is durable when SetBatch or DeleteBatch
// returns nil.
//
// With the HostBatches option, SET, DELETE and GET batches run as host
// code instead of kernels: the same persists (batch thread i's log slot,
// the same ways, the same flag words) in one order the kernels' fences
// allow, issued in one vectored host write, so a crash leaves a state the
// kernels could have left. On pm/native's log mode, whose DeferAtomic makes
// a batch's persists durable all together or not at all, a host write
// batch needs no undo log and writes only its updates and the flag. It is
// the path for a Go program on pm/native, where simulating a GPU thread
// per request costs more than the batch's work; its batches take no
// simulated time.
//
// Recovery (Store.Recover) reads the flag: if a batch was active, a
// recovery kernel restores every logged way, waits for the restores, clears
// the log and then the flag; otherwise it only discards leftover entries.
// Recovery is idempotent, so a crash during recovery is recovered by
// running it again.
//
// The undo log is either GPM's HCL (every thread of the batch grid owns a
// lock-free slot; a warp's entries coalesce into whole 128-byte lines) or a
// conventional log whose partitions are appended under locks
// (LogHCL, LogConv). The same kernels run on every backend and under every
// persistency model: with hwmodel they are timed, with the crash checker's
// recorder their persists are explored.
//
// A SET or DELETE batch's keys must be distinct: a way changed twice in one
// batch would be logged twice, and restoring the entries of different
// threads has no defined order. A GET batch may repeat keys: reads log
// nothing.
//
// Store.Get reads one key from the host, in the table's visible image,
// with the GET kernel's lookup: no launch.
//
// # Concurrency
//
// A Store is safe for concurrent use by several goroutines: its calls are
// serialised, reads included, so each sees the store as the last batch
// that returned left it. The pm.Machine under it is not: while a Store is
// in use, nothing else may use its machine.
package kvs

import "errors"

// Sentinel errors; functions wrap them with %w and context.
var (
	// ErrBadArg: an argument is out of range (a key of 0, a duplicate key
	// in a SET or DELETE batch, a batch larger than the store's, a bad
	// configuration).
	ErrBadArg = errors.New("kvs: bad argument")
	// ErrCorrupt: persistent bytes do not decode (header, flag, log
	// entries) or break the table's invariant.
	ErrCorrupt = errors.New("kvs: corrupt store")
	// ErrFull: both candidate buckets of a new key have no free way.
	ErrFull = errors.New("kvs: table full")
	// ErrNeedsRecovery: the store holds an uncommitted batch or leftover
	// log entries; call Recover first. When a batch of this handle failed
	// part-way, the error also wraps that batch's error (an I/O error or
	// a closed backend, say).
	ErrNeedsRecovery = errors.New("kvs: store needs recovery")
	// ErrKernel: a batch kernel reported a failure (a log insert that did
	// not fit or an undo entry that did not decode).
	ErrKernel = errors.New("kvs: kernel failed")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("kvs: store closed")
)
