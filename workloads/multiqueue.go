package workloads

import (
	"fmt"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("multiqueue", "persistent queue per block, batch transactions (SBRP Table 2): entries released at block scope to a leader that logs and moves head/tail",
		func(s Size) crash.Workload { return mustWorkload(NewMultiqueue(multiqueueConfig(s))) })
	register("multiqueue-narrow", "the multiqueue with the workers' block-scope release narrowed to thread scope: a scoped persistency bug",
		func(s Size) crash.Workload {
			c := multiqueueConfig(s)
			c.RelScope = pm.Thread
			return mustWorkload(NewMultiqueue(c))
		})
}

func multiqueueConfig(s Size) MultiqueueConfig {
	switch s {
	case Tiny:
		return MultiqueueConfig{Queues: 2, Threads: 2, Capacity: 4, Prefill: 2, Commands: 4, MaxBatch: 3, RelScope: pm.Block, Seed: 1}
	case Quick:
		return MultiqueueConfig{Queues: 4, Threads: 16, Capacity: 128, Commands: 16, Alternate: 64, RelScope: pm.Block, Seed: 1}
	}
	// The SBRP artifact (benchmarks/MQ): 120 queues of 32K elements, 128
	// threads per block, 2,000 commands to random queues, each queue
	// alternating between inserting 4,096 entries and removing 4,096,
	// starting empty (its 120 commit commands are our per-transaction
	// commits).
	return MultiqueueConfig{Queues: 120, Threads: 128, Capacity: 32 << 10, Commands: 2000, Alternate: 4096, RelScope: pm.Block, Seed: 1}
}

// MultiqueueConfig is the shape of a multiqueue run.
type MultiqueueConfig struct {
	Queues   int // one queue, and one block, per queue
	Threads  int // threads per block
	Capacity int // entries per queue
	Prefill  int // entries each queue holds before the first command
	Commands int // transactions in all; command c goes to queue c mod Queues
	MaxBatch int // most entries one command removes, and most it inserts
	// Alternate, if set, replaces random commands by the SBRP artifact's:
	// each command goes to a random queue, which alternates between
	// inserting Alternate entries and removing Alternate entries, starting
	// with an insert (MaxBatch is then unused).
	Alternate int
	// RelScope is the scope of the release by which each thread hands its
	// entries to the leader: block is right.
	RelScope pm.Scope
	Seed     uint64 // draws the commands
}

// mqCmd is one transaction: remove Remove entries from the head, then
// insert Insert entries at the tail.
type mqCmd struct{ Remove, Insert int }

// Control block of a queue, 128 bytes: head and tail counters on
// different lines, and the leader's undo log of both.
const (
	mqCtl      = 128
	mqHead     = 0
	mqLogOld   = 8  // head | tail<<32 before the transaction
	mqLogState = 16 // done<<1 | active: transactions completed, one in progress
	mqTail     = 64
	mqEmpty    = 0xFFFFFFFF
	mqMaxQueue = 1 << 12
	mqMaxIns   = 1 << 20
)

// mqValue is the value of the j-th entry ever inserted into queue q.
func mqValue(q, j int) uint32 { return uint32(q)<<20 | uint32(j) }

// Multiqueue is SBRP's multiqueue (Table 2, §7.1): each block owns one
// persistent ring-buffer queue in PM and applies a sequence of batch
// transactions to it, each removing a batch of entries from the head
// (copying them to a persistent output array) and inserting a batch at the
// tail. The threads of the block share the entries of a batch; each
// releases its part at RelScope to the block's leader (thread 0). The
// leader logs the old head and tail and marks the transaction active
// (ordered by OFence), acquires every thread's release, moves head and
// tail, and after an OFence marks the transaction complete; it then
// releases the next transaction to the block.
//
// Recovery restores head and tail from the log of a transaction still
// marked active, and resumes the remaining transactions. Inserts only
// use slots that were free before the transaction, so an undone
// transaction never destroys a live entry.
type Multiqueue struct {
	cfg     MultiqueueConfig
	cmds    [][]mqCmd // per queue
	removed []int     // per queue, entries removed by all its commands
	outCap  int       // entries per queue in the output array
}

// NewMultiqueue returns a multiqueue workload with seeded commands.
func NewMultiqueue(cfg MultiqueueConfig) (*Multiqueue, error) {
	switch {
	case cfg.Queues <= 0 || cfg.Queues >= mqMaxQueue || cfg.Threads <= 0 || cfg.Capacity <= 0 || cfg.Commands < 0 || cfg.MaxBatch < 0 || cfg.Alternate < 0:
		return nil, fmt.Errorf("%w: multiqueue %+v", ErrConfig, cfg)
	case cfg.Prefill < 0 || cfg.Prefill > cfg.Capacity:
		return nil, fmt.Errorf("%w: multiqueue prefill %d of capacity %d", ErrConfig, cfg.Prefill, cfg.Capacity)
	case !cfg.RelScope.Valid():
		return nil, fmt.Errorf("%w: multiqueue release scope %v", ErrConfig, cfg.RelScope)
	}
	mq := &Multiqueue{cfg: cfg, cmds: make([][]mqCmd, cfg.Queues), removed: make([]int, cfg.Queues)}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x3a11))
	count, inserted := make([]int, cfg.Queues), make([]int, cfg.Queues)
	for q := range cfg.Queues {
		count[q], inserted[q] = cfg.Prefill, cfg.Prefill
	}
	for c := range cfg.Commands {
		q := c % cfg.Queues
		var r, n int
		if cfg.Alternate > 0 {
			q = rng.IntN(cfg.Queues)
			if len(mq.cmds[q])%2 == 0 {
				n = min(cfg.Alternate, cfg.Capacity-count[q])
			} else {
				r = min(cfg.Alternate, count[q])
			}
		} else {
			r = rng.IntN(min(count[q], cfg.MaxBatch) + 1)
			// Insert only into slots free before the transaction.
			n = rng.IntN(min(cfg.Capacity-count[q], cfg.MaxBatch) + 1)
		}
		mq.cmds[q] = append(mq.cmds[q], mqCmd{r, n})
		count[q] += n - r
		inserted[q] += n
		mq.removed[q] += r
		if inserted[q] >= mqMaxIns {
			return nil, fmt.Errorf("%w: multiqueue inserts %d entries into queue %d, at most %d", ErrConfig, inserted[q], q, mqMaxIns-1)
		}
	}
	for _, r := range mq.removed {
		mq.outCap = max(mq.outCap, r)
	}
	return mq, nil
}

// Config returns the workload's configuration.
func (mq *Multiqueue) Config() MultiqueueConfig { return mq.cfg }

// Name returns "multiqueue" or "multiqueue(<scope>)" for a non-block
// release scope.
func (mq *Multiqueue) Name() string {
	if mq.cfg.RelScope == pm.Block {
		return "multiqueue"
	}
	return fmt.Sprintf("multiqueue(%s)", mq.cfg.RelScope)
}

// Setup creates mq.ctl (head, tail and log per queue), mq.queue (each
// queue prefilled) and mq.out (the removed entries, empty).
func (mq *Multiqueue) Setup(m *pm.Machine) error {
	Q, C := mq.cfg.Queues, mq.cfg.Capacity
	ctl, err := createFilled(m, "mq.ctl", mqCtl*Q, 0)
	if err != nil {
		return err
	}
	qs, err := createFilled(m, "mq.queue", 4*C*Q, 0xFF)
	if err != nil {
		return err
	}
	if _, err := createFilled(m, "mq.out", 4*max(mq.outCap, 1)*Q, 0xFF); err != nil {
		return err
	}
	b := make([]byte, 4*mq.cfg.Prefill)
	for q := range Q {
		for j := range mq.cfg.Prefill {
			pm.PutLE(b[4*j:4*j+4], uint64(mqValue(q, j)))
		}
		if err := m.CopyIn(qs.Add(uint64(4*C*q)), b); err != nil {
			return err
		}
		var tail [4]byte
		pm.PutLE(tail[:], uint64(mq.cfg.Prefill))
		if err := m.CopyIn(ctl.Add(uint64(mqCtl*q+mqTail)), tail[:]); err != nil {
			return err
		}
	}
	return nil
}

type mqRegions struct {
	ctl, queue, out pm.Addr
	cap, outCap     int
}

func (mq *Multiqueue) regions(m *pm.Machine) (mqRegions, error) {
	b, err := openRegions(m, "mq.ctl", "mq.queue", "mq.out")
	if err != nil {
		return mqRegions{}, err
	}
	return mqRegions{b[0], b[1], b[2], mq.cfg.Capacity, max(mq.outCap, 1)}, nil
}

func (r mqRegions) field(q, off int) pm.Addr { return r.ctl.Add(uint64(mqCtl*q + off)) }
func (r mqRegions) slot(q, counter int) pm.Addr {
	return r.queue.Add(uint64(4 * (q*r.cap + counter%r.cap)))
}
func (r mqRegions) outAt(q, j int) pm.Addr { return r.out.Add(uint64(4 * (q*r.outCap + j))) }

// kernel returns the transaction kernel (one block per queue; it resumes
// after the transactions the log marks done) and the word it reports
// inconsistencies in.
func (mq *Multiqueue) kernel(m *pm.Machine) (scope.Kernel, errWord, error) {
	r, err := mq.regions(m)
	if err != nil {
		return nil, errWord{}, err
	}
	Q, T := mq.cfg.Queues, mq.cfg.Threads
	flags, err := m.Alloc(pm.DeviceMem, uint64(4*(Q*T+Q)))
	if err != nil {
		return nil, errWord{}, err
	}
	bad, err := newErrWord(m)
	if err != nil {
		return nil, errWord{}, err
	}
	rel, cmds := mq.cfg.RelScope, mq.cmds
	return func(t *scope.Thread) {
		q, i := t.Block(), t.TID()
		done := flags.Add(uint64(4 * (q*T + i))) // this thread's part of a transaction is done
		next := flags.Add(uint64(4 * (Q*T + q))) // the leader finished transaction k-1
		state := t.Load64(r.field(q, mqLogState))
		t.SyncThreads() // everyone has read where to start before the leader logs
		if state&1 != 0 {
			bad.set(t) // an active transaction: recovery did not run
			return
		}
		start := int(state >> 1)
		if i == 0 {
			t.PRel(next, uint32(start), pm.Block)
		}
		for k := start; k < len(cmds[q]); k++ {
			for t.PAcq(next, pm.Block) < uint32(k) {
			}
			var ht [2]uint32
			t.Gather32(ht[:], r.field(q, mqHead), r.field(q, mqTail))
			h, tl := int(ht[0]), int(ht[1])
			if i == 0 {
				t.Store64(r.field(q, mqLogOld), uint64(h)|uint64(tl)<<32)
				t.OFence() // the log before the transaction is marked active
				t.Store64(r.field(q, mqLogState), uint64(k)<<1|1)
				t.OFence() // the log before head and tail move
			}
			// Where a SIMT GPU reconverges the warp's lanes after a
			// divergent branch or loop (its immediate post-dominator), the
			// kernel says so: the lanes issue together again.
			t.SyncWarp()
			c := cmds[q][k]
			for e := i; e < c.Remove; e += T {
				t.Store32(r.outAt(q, h+e), t.Load32(r.slot(q, h+e)))
			}
			t.SyncWarp()
			for e := i; e < c.Insert; e += T {
				t.Store32(r.slot(q, tl+e), mqValue(q, tl+e))
			}
			t.SyncWarp()
			t.PRel(done, uint32(k+1), rel) // multiqueue: entries to the leader
			if i == 0 {
				for j := range T {
					for t.PAcq(flags.Add(uint64(4*(q*T+j))), pm.Block) < uint32(k+1) {
					}
				}
				t.Store32(r.field(q, mqHead), uint32(h+c.Remove))
				t.Store32(r.field(q, mqTail), uint32(tl+c.Insert))
				t.OFence() // head and tail before the transaction is complete
				t.Store64(r.field(q, mqLogState), uint64(k+1)<<1)
				// The next transaction may reuse slots this one freed: its
				// inserts must persist after this one is complete.
				t.PRel(next, uint32(k+1), pm.Block)
			}
			t.SyncWarp()
		}
	}, bad, nil
}

// RecoveryKernel returns the kernel that, for each queue (one thread per
// block), restores head and tail from the log of an active transaction
// and marks it not done.
func (mq *Multiqueue) RecoveryKernel(m *pm.Machine) (scope.Kernel, error) {
	r, err := mq.regions(m)
	if err != nil {
		return nil, err
	}
	return func(t *scope.Thread) {
		q := t.Block()
		state := t.Load64(r.field(q, mqLogState))
		if state&1 == 0 {
			return
		}
		old := t.Load64(r.field(q, mqLogOld))
		t.Store32(r.field(q, mqHead), uint32(old))
		t.Store32(r.field(q, mqTail), uint32(old>>32))
		t.DFence() // head and tail restored before the log is retired
		t.Store64(r.field(q, mqLogState), state&^1)
		t.DFence()
	}, nil
}

func (mq *Multiqueue) launch(m *pm.Machine) error {
	k, bad, err := mq.kernel(m)
	if err != nil {
		return err
	}
	if _, err := scope.Launch(m, scope.Grid{Blocks: mq.cfg.Queues, Threads: mq.cfg.Threads}, k, scope.WithName("multiqueue")); err != nil {
		return err
	}
	return bad.check(m, "multiqueue kernel found a transaction still active")
}

// CommitPoint returns the transaction state word of the queue with the
// most commands (crash.CommitPointer): its last transaction completes with
// the last persist to that word.
func (mq *Multiqueue) CommitPoint(m *pm.Machine) (pm.Addr, error) {
	r, err := mq.regions(m)
	if err != nil {
		return 0, err
	}
	q := 0
	for i := range mq.cmds {
		if len(mq.cmds[i]) > len(mq.cmds[q]) {
			q = i
		}
	}
	return r.field(q, mqLogState), nil
}

// Run applies every command.
func (mq *Multiqueue) Run(m *pm.Machine) error { return mq.launch(m) }

// Recover restores head and tail of in-progress transactions from the log,
// checks that every queue's live entries and removed entries are present,
// and resumes the remaining transactions.
func (mq *Multiqueue) Recover(m *pm.Machine) error {
	k, err := mq.RecoveryKernel(m)
	if err != nil {
		return err
	}
	if _, err := scope.Launch(m, scope.Grid{Blocks: mq.cfg.Queues, Threads: 1}, k, scope.WithName("multiqueue-recover")); err != nil {
		return err
	}
	r, err := mq.regions(m)
	if err != nil {
		return err
	}
	for q := range mq.cfg.Queues {
		st, err := mq.queueState(m, r, q)
		if err != nil {
			return err
		}
		for j := st.head; j < st.tail; j++ {
			if st.entries[j-st.head] == mqEmpty {
				return fmt.Errorf("%w: queue %d: entry %d is live (head %d, tail %d) but empty", ErrInconsistent, q, j, st.head, st.tail)
			}
		}
		for j, v := range st.out {
			if v == mqEmpty {
				return fmt.Errorf("%w: queue %d: removed entry %d (head %d) missing from the output", ErrInconsistent, q, j, st.head)
			}
		}
	}
	return mq.launch(m)
}

// mqState is one queue as PM holds it.
type mqState struct {
	head, tail, done int
	active           bool
	entries, out     []uint32 // the live entries, and out[0:head]
}

func (mq *Multiqueue) queueState(m *pm.Machine, r mqRegions, q int) (mqState, error) {
	mem := m.Memory()
	var st mqState
	h, err1 := mem.Load(r.field(q, mqHead), 4)
	tl, err2 := mem.Load(r.field(q, mqTail), 4)
	s, err3 := mem.Load(r.field(q, mqLogState), 8)
	if err := firstErr(err1, err2, err3); err != nil {
		return st, err
	}
	st.head, st.tail, st.done, st.active = int(h), int(tl), int(s>>1), s&1 != 0
	if st.tail < st.head || st.tail-st.head > mq.cfg.Capacity || st.head > r.outCap {
		return st, fmt.Errorf("%w: queue %d: head %d tail %d, capacity %d", ErrInconsistent, q, st.head, st.tail, mq.cfg.Capacity)
	}
	ring, err := readWords(m, r.slot(q, 0), mq.cfg.Capacity, 4)
	if err != nil {
		return st, err
	}
	for j := st.head; j < st.tail; j++ {
		st.entries = append(st.entries, uint32(ring[j%mq.cfg.Capacity]))
	}
	out, err := readWords(m, r.outAt(q, 0), st.head, 4)
	if err != nil {
		return st, err
	}
	for _, v := range out {
		st.out = append(st.out, uint32(v))
	}
	return st, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Want returns, per queue, the head and tail counters after every command,
// computed in plain Go. Entry j of queue q is mqValue(q, j): the live
// entries are those from head to tail, and the output holds those below
// head.
func (mq *Multiqueue) Want() (head, tail []int) {
	for q := range mq.cfg.Queues {
		h, tl := 0, mq.cfg.Prefill
		for _, c := range mq.cmds[q] {
			h, tl = h+c.Remove, tl+c.Insert
		}
		head, tail = append(head, h), append(tail, tl)
	}
	return head, tail
}

// Check requires every queue to be in its state after all its commands:
// head, tail, the completion count, the live entries and the output.
func (mq *Multiqueue) Check(m *pm.Machine) error {
	r, err := mq.regions(m)
	if err != nil {
		return err
	}
	head, tail := mq.Want()
	for q := range mq.cfg.Queues {
		st, err := mq.queueState(m, r, q)
		if err != nil {
			return err
		}
		if st.head != head[q] || st.tail != tail[q] || st.done != len(mq.cmds[q]) || st.active {
			return fmt.Errorf("queue %d: head %d tail %d done %d active %v, want head %d tail %d done %d",
				q, st.head, st.tail, st.done, st.active, head[q], tail[q], len(mq.cmds[q]))
		}
		for j, v := range st.entries {
			if want := mqValue(q, st.head+j); v != want {
				return fmt.Errorf("queue %d: entry %d = %#x, want %#x", q, st.head+j, v, want)
			}
		}
		for j, v := range st.out {
			if want := mqValue(q, j); v != want {
				return fmt.Errorf("queue %d: removed entry %d = %#x, want %#x", q, j, v, want)
			}
		}
	}
	return nil
}
