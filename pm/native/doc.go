// Package native is the real backend: the same programs that run on the
// simulated backends run here on memory-mapped files with real durability.
//
// # Regions
//
// Every PM region is one file, NAME.pmr, in the backend's directory: a
// HeaderSize-byte header (magic, format version, size, base address, name,
// CRC-32C; see DecodeHeader) followed by the region's bytes, mapped with
// MAP_SHARED. Open maps every region file of the directory; pm.NewMachine
// then sees them at their recorded base addresses, so addresses stored in
// PM stay valid across a crash. A truncated, foreign or corrupt file, or a
// file whose length disagrees with its header, is an error wrapping
// pm.ErrCorrupt (and ErrForeign, ErrVersion or ErrSizeMismatch where it
// applies), never a panic or an access out of the mapping; a missing
// directory is an ErrIO; OpenRegion refuses a region reopened with another
// size (ErrSizeMismatch). A LOCK file (flock) keeps a second backend out of
// the directory. The backend is built on Unix systems only; dax mode needs
// Linux and amd64.
//
// # Durability modes
//
// Mode reports the mode in use (also part of Name):
//
//   - msync (any filesystem): ordering points are made durable with
//     msync(MS_SYNC) of the dirty pages;
//   - dax: where the region files map with MAP_SHARED_VALIDATE|MAP_SYNC (a
//     DAX filesystem on real PM) and CPUID leaf 7 reports CLWB or
//     CLFLUSHOPT, lines are written back with CLWB (or CLFLUSHOPT) and an
//     SFENCE instead of msync; chosen at run time by ModeAuto, refused with
//     ErrUnsupported elsewhere;
//   - unsafe-nosync: stores go straight to the mapping and nothing is ever
//     synced, so nothing is ordered and a power failure can lose or tear
//     anything. For measuring the cost of durability only.
//
// # How ordering holds against page writeback
//
// With a plain MAP_SHARED mapping a store lands in the page cache at once
// and the kernel may write any dirty page back at any moment, in any order.
// An executor applies a verb's visible effect before it reports the verb
// (pm.Backend), so a store ordered after a persist would already be in the
// page cache before the backend could sync the persist. Hence in msync and
// dax modes the machine's visible image is a private copy of each region
// (a shadow in ordinary memory), and the mapping receives stores only from
// the backend:
//
//  1. every persist (a PM store, a PM atomic that wrote, a PM release flag)
//     is logged with its 8-byte word, its bytes and an epoch number;
//  2. ordering verbs raise the epochs of later persists (rules below);
//  3. at a flush the log is applied to the mapping one epoch at a time, in
//     increasing epoch order, and each epoch's dirty pages are synced
//     (msync(MS_SYNC), or CLWB+SFENCE) before any byte of the next epoch is
//     written to the mapping.
//
// A persist in a later epoch therefore never reaches the file (by
// writeback or otherwise) before every persist of an earlier epoch is
// durable. Within an epoch persists are unordered, as the model allows, and
// an aligned 8-byte word is never torn (it never crosses a page). The log
// is flushed when a launch or CPU run ends (End), when the host writes PM
// (CopyIn), and mid-launch when it holds MaxPending persists.
//
// Group commit: epochs are counted per thread. A thread's persists before
// its first ordering point take the lowest pending epoch, those after it the
// next one, and so on (raised by acquires and barriers, below). So every
// thread that reaches its k-th ordering point shares the same epoch
// boundary, whatever the interleaving: a batch kernel of 64 K threads with
// a log write, an OFence, an update and a DFence each costs a handful of
// syncs, not 128 K. The sync count of a run is the number of distinct
// non-empty epochs, not the number of ordering verbs (see Stats).
//
// # The guarantee of each verb
//
// "A before B" below means: A is durable before any byte of B reaches the
// file. Persists of one 8-byte word also reach the file in the order the
// program stored them (coherence).
//
//   - OFence, PBarrier(Thread): the thread's earlier persists before its
//     later ones.
//   - DFence, EpochBarrier, SFence, CFence (durability verbs): as OFence,
//     and the persists are durable at the latest when the launch or CPU run
//     returns. The sync itself is deferred and group-committed: no later
//     persist of the thread, nor of any thread that acquires from it
//     (PAcq) or meets it at a persist barrier, reaches the file first, and
//     the host learns of durability only when Launch or Run returns. As in
//     every persistency model of this project (crash/), a DFence orders
//     nothing for another thread that communicates with plain loads,
//     stores or atomics instead of a release and an acquire.
//   - PRel(flag, s): the thread's earlier persists before the flag's
//     persist (if the flag is in PM) and before its later persists.
//   - PAcq(flag, s) that reads a value a PRel wrote: that release's
//     earlier persists (and its flag) before the acquirer's later persists,
//     for any scope s (the scope is not narrowed: wider than SBRP asks).
//   - PBarrier(Warp/Block/Device/System): every member's persists before the
//     barrier before every member's persists after it.
//   - L2WB and PCommit (the re-study's write-back of the whole L2 and drain
//     of the memory controllers' queues): every persist of every thread
//     logged before it, before the thread's later persists.
//   - SyncThreads (any barrier the engine reports with Sync) passes epochs
//     on: persists a member ordered with an ordering verb before the
//     barrier are before every member's persists after it. A barrier with
//     no ordering verb before it orders nothing (as under SBRP); nor do
//     plain loads, stores and atomics. CLWB and SetCtx need nothing.
//   - Host changes: CreateRegion, RemoveRegion and CopyIn are durable on
//     return (fsync of the file and directory; msync of the copied range).
//   - A launch or CPU run that returns has every persist durable, and every
//     persist of a launch is before every persist of the next.
//
// These rules are at least as strong as SBRP (Box 2 of the SBRP paper), the
// scoped persist barrier model and the x86 and COSPlay models, so a program
// whose persist order is correct under one of them (as pmcheck checks) is
// correct here. The Epoch and GPM models also make every block barrier a
// persist barrier; a program that relies on that needs a PBarrier(Block)
// here.
//
// # Testing power failures
//
// SIGKILL leaves the page cache, so it cannot show a power failure. With
// Options.Journal the backend records the durable image when StartJournal
// is called and the words of every sync group after it; PowerCut then
// returns the image of a power failure during any sync: everything synced
// before it plus a seeded random subset of the group's words (Pebble's
// CrashClone idea).
//
// A Backend is used by one machine at a time and is not safe for
// concurrent use. Close it when done: it flushes and unmaps.
package native
