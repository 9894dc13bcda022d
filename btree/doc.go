// Package btree is a persistent B+tree of uint64 keys and values in one PM
// region, with batched parallel insertion as GPU kernels after the scoped
// persist barrier paper (§5.1, Algorithms 1 and 2), point and range
// lookups as kernels and from the host, and a plain Go API (Create, Open,
// Put, Get, Delete, Scan, Len, Check).
//
// # An embedded store
//
// OpenDir is the one-call way to use the tree as an embedded ordered store:
// it opens (or creates) a tree in a directory on the real backend
// (pm/native) and returns a DB, safe for concurrent use (reads run on a
// snapshot beside writes), whose writes are
// durable when they return; Close releases the directory. Create and Open
// are the general form, on any machine (the simulated backends included).
//
// # Layout
//
// The region starts with a header line (magic, geometry, format version,
// CRC-32C); a tree of another format version is refused with ErrVersion.
// Nodes have a fixed size (a header word, the next-leaf word, Order keys
// and Order values or children; 256 bytes at the default order 15) and
// come from a pool in the region; a bitmap marks the nodes in use. Every
// node carries a CRC-32C of its id, header and used keys and values in the
// header word's high half, and the next-leaf word a check of its pointer in
// its own high half (it is written in place, in one store); every read of
// a node, by the host, Check, recovery or a kernel, verifies them, and a
// node that fails is ErrCorrupt with its id. Changes
// are copy-on-write: a batch writes fresh nodes for every node it changes.
// The one commit point of a batch is the commit word, an aligned 8-byte
// store of the batch's number, which selects one of two meta lines (root,
// height, key count) and one of two bitmaps.
//
// # Batched insertion
//
// InsertBatch sorts and deduplicates the keys on the host, plans the
// batch (Algorithm 2's depth d: the shallowest depth with at least as many
// nodes as the batch needs workgroups of BlockThreads threads; the
// workgroups, one per subtree rooted at d that receives keys; a share of
// free nodes for each), writes the keys and the plan durably (the batch
// record), and launches one kernel:
//
//   - every thread finds the leaf of its keys;
//   - Algorithm 2: each workgroup processes its subtree level by level from
//     the leaves to depth d: the first key of each run of keys under one
//     node merges the run into copies of the node, split evenly into
//     pieces of at most Order entries (splits propagate upward as pieces
//     the parent level merges); each level ends with a block-scope persist
//     barrier and the workgroup's epoch status mark;
//   - the levels above d (every level, for Algorithm 1) end with a
//     device-scope persist barrier, a kernel-wide barrier, and the mark of
//     the device-scope part; a root that splits grows the tree;
//   - a last device-scope step links the new leaves into the leaf chain.
//
// The host then reads the nodes the batch wrote and the committed nodes
// they replace (not the whole tree: copy-on-write leaves every other
// subtree as it was), updates the bitmap and key count it keeps in memory,
// writes the bitmap of the batch's parity where it differs (one span, from
// the first differing word to the last) and the meta line of that parity,
// and stores the commit word. A commit costs what the batch
// changed, and free nodes are found from a hint below which all are in use.
// The DRAM-only baseline of the paper is Algorithm 2 on a hwmodel
// configuration with persist.none set, under the None model (the only one
// such a machine runs).
//
// # Recovery
//
// A batch is all-or-nothing at the commit word, and recovery rolls it
// forward: once the batch record is durable the batch will happen. The
// marks are the epoch status table of the paper's §8.3 (one 8-byte word
// per workgroup and one for the device-scope part: the batch, the levels
// done). The host's plan gives every run owner at every level its own
// slice of the batch's free list, so node ids do not depend on the order
// threads run in, and an epoch redone writes the very same bytes. No undo log is needed: an epoch writes
// only fresh nodes and its piece records, so a partly persisted epoch has
// nothing to undo, and running it again overwrites the same kind of state.
// A level's mark shares an epoch with the next level's writes, so those
// may be durable while the mark is not; the level is then redone, and its
// input (the piece records of the level below) must still be there: the
// internal depths rotate over three piece buffers, so the next level
// never writes into it.
// The only write to a node of the committed tree is the next pointer of an
// unchanged leaf whose right neighbour the batch replaced; it happens after
// every level is durable, and redoing it writes the same value. Recover
// (and Open) relaunches the kernel: each workgroup whose subtree's marks
// are durable skips its levels, and only the others, and the device-scope
// part from its last mark, run again. With kernel scope (Algorithm 1) a
// crash in a level repeats that level for the whole kernel; with
// workgroup scope, only for the workgroups whose level did not persist
// (the paper's Table 3).
//
// # Deviations from the paper
//
// The paper updates nodes in place under an undo log; here nodes are
// copied, which writes whole nodes (more NV writes per key) but needs no
// log. The host walks the old tree to bound each workgroup's allocations
// (the kernel still finds the leaves itself). The DB (OpenDir) runs its
// batches on the host instead, issuing the kernel's writes byte for byte
// in an order the kernel's barriers allow (no launch, no coroutines), so
// its recovery is the kernel's; in pm/native's log mode a batch is one
// atomic record of the log (DeferAtomic), and the writes that only
// resuming a cut batch needs (staged keys, piece records, marks) are left
// out. Delete is a host operation,
// one key at a time (see Delete). Lookup and insertion kernels read their arguments (the
// plan) from Go values, as kernel arguments.
package btree
