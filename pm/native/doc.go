// Package native is the real backend: the same programs that run on the
// simulated backends run here on files with real durability.
//
// # Files
//
// A backend owns a directory. Every PM region is one file, NAME.pmr: a
// HeaderSize-byte header (magic, format version, size, base address, name,
// CRC-32C; see DecodeHeader) followed by the region's bytes. The file LOG
// is the persist log (below). Open reads every region file and replays the
// log; pm.NewMachine then sees the regions at their recorded base
// addresses, so addresses stored in PM stay valid across a crash. A
// truncated, foreign or corrupt file, or a file whose length disagrees
// with its header, is an error wrapping pm.ErrCorrupt (and ErrForeign,
// ErrVersion or ErrSizeMismatch where it applies), never a panic or an
// access out of bounds; a missing directory is an ErrIO; OpenRegion
// refuses a region reopened with another size (ErrSizeMismatch). A LOCK
// file (flock) keeps a second backend out of the directory. Every file
// operation goes through Options.FS (the operating system's by default),
// which tests wrap with InjectFS to inject faults or count syncs. The
// backend is built on Unix systems only; dax mode needs Linux and amd64.
//
// # Durability modes
//
// Mode reports the mode in use (also part of Name):
//
//   - log (any filesystem; ModeMsync is its former name): a persist log
//     with group commit, described below;
//   - dax: where the region files map with MAP_SHARED_VALIDATE|MAP_SYNC (a
//     DAX filesystem on real PM) and CPUID leaf 7 reports CLWB or
//     CLFLUSHOPT, the regions are mapped and stores are written back with
//     CLWB (or CLFLUSHOPT) and an SFENCE, epoch by epoch (see "Dax mode");
//     chosen at run time by ModeAuto, refused with ErrUnsupported
//     elsewhere;
//   - unsafe-nosync: nothing is logged or synced; Close writes the region
//     files. A crash or power failure can lose anything since Open. For
//     measuring the cost of durability only.
//
// # The persist log
//
// In log mode the visible image of each region is one byte slice in an
// anonymous mapping outside the Go heap (no file mapping, no per-word
// bookkeeping; the collector does not count it toward its heap goal, and
// pages never written take no memory), and the Go heap holds the pending
// log records. Every persist (a PM store,
// a PM atomic that wrote, a PM release flag) and every host write into PM
// is appended, in the order the engine issues them, to an in-memory
// batch of entries (address, bytes). A durability point writes the batch
// to the end of LOG as one record (CRC-32C, length, the log's generation,
// a sequence number) and syncs the log with one fdatasync. Callers that
// reach a durability point while a sync is under way share the next one
// (group commit: the log is safe across goroutines, and DeferAsync lets
// goroutines that share a machine wait for durability together). A
// record is synced before the next is written; the file grows by zeroed
// chunks, so most syncs overwrite allocated blocks.
//
// Region files are checkpoints, written in the background: when the log
// passes Options.CheckpointBytes (at the durability point that crosses
// it), that call syncs what is staged, renames LOG to LOG.old and puts a
// new, empty LOG of the next generation in its place (its sync and one
// sync of the directory); a goroutine then writes LOG.old's entries to
// the region files, syncs them, renames LOG.old to LOG.free and syncs the
// directory, while durability points go on in the new log. The next
// checkpoint's new LOG is LOG.free, its header rewritten (as Pebble
// recycles WAL files): the log's syncs then overwrite written blocks
// instead of growing the file, a growth that costs ext4 a journal commit
// at the sync (a 92 KB write and fdatasync: 400 µs growing the file by
// zeroed chunks, 245 µs over written blocks, on this project's disk). Its
// older records are of older generations, which replay does not take for
// the new log's; after a crash, though, Open reads them all in its search
// for a valid record after the last one (a 64 MiB log: about 60 ms more).
// Open and Close remove LOG.free. One checkpoint runs at a
// time; a durability point that finds the log past twice the size waits
// for it and starts the next. RemoveRegion and Close wait for it, then
// write the pages written since from memory and replace LOG (a new file
// renamed over it, the directory synced). WaitCheckpoint waits for a
// background checkpoint. No store reaches a region file except through a
// checkpoint, so page writeback cannot make a later persist durable
// before an earlier one.
//
// Open replays the log's valid prefix over the region files (LOG.old's
// first, if a checkpoint left it, then LOG's), writes the result, removes
// LOG.old and starts a new log. A record that is torn or damaged with no
// valid record after it (a power failure during its sync) is dropped: its
// sync never returned. A damaged record followed by a valid one was
// synced and then changed: Open fails with pm.ErrCorrupt.
//
// What survives a crash or power failure is therefore always a prefix of
// the issue order, cut at a durability point or later: the order of every
// persistency model of this project (a linear extension of each), and
// every acknowledged durability point.
//
// # The guarantee of each verb (log mode)
//
// "Durable" means: recovered by Open after a crash or power failure. In
// short: an ordering verb costs nothing and only orders; a durability
// verb (DFence, a durable PRel, EpochBarrier; a CPU task's SFence, CFence,
// JoinStrand), a launch's or CPU run's end, a host write, Commit and Close
// return only once everything issued before them is durable, and callers
// that reach one together share one sync of the log (group commit); a call
// that returns an error guarantees nothing about its own writes, and every
// write acknowledged before it stays durable.
//
//   - Store, atomic, PRel's flag in PM: appended to the log; durable at
//     the next durability point; never durable before a persist issued
//     earlier.
//   - OFence, PBarrier (any scope), PAcq, Fence, SyncThreads, SyncWarp,
//     L2WB, PCommit, MemBar, CLWB, SetCtx, NewStrand, PersistBarrier: no
//     cost; the log orders every persist before every later one, which
//     is at least what each verb asks, under every model (a scope is
//     never narrowed). What they cover is durable at the next durability
//     point.
//   - DFence, EpochBarrier, PRel, and a CPU task's SFence, CFence and
//     JoinStrand (the durability verbs: durable on return under SBRP,
//     scoped persist barriers, x86 or COSPlay): a durability point in the
//     middle of the launch or CPU run. When the verb returns, every
//     persist issued before it (by any thread) is durable. The GPU
//     executor holds each thread at its durability verb until no thread
//     can run, then one sync of the log serves every thread waiting
//     (group commit: 1,024 threads that each store and DFence cost one
//     sync, and the launch's end none if nothing followed); the CPU
//     executor likewise holds a task while the other contexts of its
//     window run, until every live task is held or a round passes with
//     nothing written (say, tasks yielding on a lock the held task has):
//     n tasks that each store and fence cost one sync per window of tasks.
//     Either executor serves the held ones sooner, once the others have
//     run pm.DurabilityBound (65,536) verbs since the first was held (the
//     GPU executor makes the running thread yield for it), so a thread or
//     task that never waits cannot hold them back for ever; a launch or
//     run sets another bound with scope.WithDurabilityBound or
//     coro.WithDurabilityBound. A verb with nothing pending costs
//     nothing. With Options.SBRPReleases a PRel only orders, as under
//     SBRP. Inside Defer these verbs only order (the Defer's end is the
//     durability point). In dax mode they order and the launch's end
//     makes them durable.
//   - End of a launch or CPU run (Launch, Run return): a durability point.
//     A launch that returns nil has every persist durable. A launch with
//     more than Options.MaxPending persists also syncs mid-launch, each
//     time that many are pending. A sync that fails at a mid-launch
//     durability point fails the launch: the waiting verbs never return.
//   - CopyIn into PM (a host write): a durability point; durable when it
//     returns nil.
//   - CreateRegion, RemoveRegion: durable on return (files synced,
//     renamed, directory synced). RemoveRegion checkpoints first.
//   - Commit: a durability point (none when nothing is pending).
//   - WaitDurable, MakeDurable: the pm.Durability seam the executors use
//     for the durability verbs above; not for programs.
//   - Defer(fn): durability points inside fn only order; one sync at fn's
//     end, for a data structure whose commit spans several host writes
//     and launches (a B+tree Put: 9 syncs, 1 inside Defer).
//   - DeferAtomic(fn): as Defer, and fn's persists (at most
//     AtomicDeferBytes) are one record: a crash keeps all of them or none,
//     where Defer keeps a prefix (gpKVS's host batches: no undo log).
//   - DeferAsync(fn): as Defer, but returns a wait function instead of
//     syncing: goroutines that take turns on the machine (under their own
//     lock) and wait outside it share syncs (group commit; B+tree Puts
//     from 4 goroutines: about 0.4 syncs per Put).
//   - Close: a durability point, then a checkpoint.
//
// # Errors
//
// A write or sync of the log or of a region file that fails reaches the
// call whose durability it breaks: CopyIn, CreateRegion and RemoveRegion
// (through pm.HostErrer), the launch or CPU run (Backend.End, or the
// durability verb's sync mid-launch), Commit, Defer or Close, as an error
// wrapping ErrIO and the cause (e.g. syscall.EIO, syscall.ENOSPC). A
// background checkpoint that fails breaks no acknowledged write (its log
// stays, as LOG.old, for Open to replay), but its error becomes the
// sticky error once it has finished: the next call that writes, or
// WaitCheckpoint or Close, returns it. The failed call's persists are in the
// visible image, and on file whole, in part or not at all: their outcome is
// unknown until Open recovers a prefix of the issue order (never a later
// persist without an earlier one). From then on the backend refuses every
// write (Begin, CopyIn, Commit, Close return the same error; kernels log
// nothing) until it is reopened. After Close every call returns ErrClosed,
// in every mode, and so does every access of the machine to the regions'
// addresses: the images are unmapped (pm.Memory.ClosePM).
//
// # Dax mode
//
// The machine's visible image is a private copy of each region, and the
// mapping receives stores only from the backend: persists are logged in
// memory with an epoch number; ordering verbs raise the epochs of a
// thread's later persists (an acquire, a barrier or an L2WB/PCommit those
// of other threads); at the launch's end, a host write or after
// MaxPending persists the mapping receives the log one epoch at a time,
// each epoch's lines written back with CLWB+SFENCE before any byte of the
// next epoch is stored. Persists of one 8-byte word stay in program order.
// Epochs are counted per thread, so every thread that reaches its k-th
// ordering point shares one epoch boundary (Stats.Epochs, Stats.Syncs).
//
// # Testing power failures
//
// SIGKILL leaves the page cache, so it cannot show a power failure. With
// Options.Journal (log mode) the backend records the durable image when
// StartJournal is called and the log record of every sync after it;
// PowerCut then returns the image of a power failure during any sync:
// every earlier record replayed, plus the record being synced with each
// 512-byte sector kept or lost at random (seeded) and put through the
// log's decoder (Pebble's CrashClone idea).
//
// A Backend is used by one machine at a time; its log is safe for
// concurrent commits. Close it when done: it checkpoints and closes the
// files.
package native
