package workloads

import (
	"fmt"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("hashmap", "cuckoo hashmap (SBRP Table 2): batched parallel inserts, old slot values undo-logged and ordered by OFence before the update; recovery kernel",
		func(s Size) crash.Workload { return mustWorkload(NewHashmap(hashmapConfig(s))) })
	register("hashmap-nofence", "the hashmap without the OFence between the undo log and the in-place update: an intra-thread persistency bug",
		func(s Size) crash.Workload {
			c := hashmapConfig(s)
			c.SkipLogFence = true
			return mustWorkload(NewHashmap(c))
		})
}

func hashmapConfig(s Size) HashmapConfig {
	switch s {
	case Tiny:
		// 75% full: batch 1 evicts a key of batch 0.
		return HashmapConfig{Buckets: 4, Slots: 2, Keys: 6, Batch: 3, Threads: 3, MaxChain: 6, Seed: 3}
	case Quick:
		return HashmapConfig{Buckets: 16, Slots: 8, Keys: 112, Batch: 32, Threads: 32, MaxChain: 16, Seed: 2}
	}
	// The SBRP artifact: 25,000 keys, 300 buckets of 576 slots.
	return HashmapConfig{Buckets: 300, Slots: 576, Keys: 25000, Batch: 5000, Threads: 256, MaxChain: 8, Seed: 1}
}

// HashmapConfig is the shape of a hashmap run.
type HashmapConfig struct {
	Buckets, Slots int    // the table: Buckets buckets of Slots 8-byte slots
	Keys           int    // distinct keys inserted
	Batch          int    // keys per launch, one thread each
	Threads        int    // threads per block
	MaxChain       int    // most slots one insert may write (its eviction chain)
	Seed           uint64 // draws the keys
	// SkipLogFence removes the OFence between the undo log and the
	// in-place update (a seeded bug).
	SkipLogFence bool
}

const (
	hmEmpty   = ^uint64(0) // an empty slot
	hmEntry   = 24         // log entry: old slot word, slot | gen<<32, checksum
	hmLogHead = 8          // log header: the last committed (or undone) generation
)

// Hashmap is SBRP's hashmap (Table 2, §7.1): batches of keys are
// inserted in parallel, one thread per key, into a PM-resident cuckoo hash
// table. A key lives in one of two buckets; an insert claims an empty slot
// in either, or else evicts an older key to that key's other bucket, and so
// on along a chain. Slots hold key | value<<32, one atomic 8-byte persist.
//
// Each insert is an undo-logged transaction of its own thread: it logs the
// old value of every slot it will write (with a checksum over the entry
// and the transaction's generation), orders the log before the in-place
// updates with OFence, orders the updates before the commit (the log
// header's generation) with another OFence, and makes the whole durable
// with DFence before the launch ends, so the next batch never overwrites a
// slot whose earlier insert could still be undone. Threads of a batch claim
// slots in volatile memory, so their transactions write disjoint slots.
//
// Recovery runs a kernel that undoes, from each thread's log, the entries
// of an uncommitted transaction, then checks that the table holds all keys
// of a prefix of the batches and some of the next, and re-inserts the
// missing keys (an insert of a present key does nothing).
type Hashmap struct {
	cfg   HashmapConfig
	keys  []uint32
	index map[uint32]int
}

// NewHashmap returns a hashmap workload with seeded distinct keys.
func NewHashmap(cfg HashmapConfig) (*Hashmap, error) {
	switch {
	case cfg.Buckets < 2 || cfg.Slots <= 0 || cfg.Keys < 0 || cfg.Batch <= 0 || cfg.Threads <= 0 || cfg.MaxChain <= 0:
		return nil, fmt.Errorf("%w: hashmap %+v", ErrConfig, cfg)
	case cfg.Keys > cfg.Buckets*cfg.Slots:
		return nil, fmt.Errorf("%w: %d keys for %d slots", ErrConfig, cfg.Keys, cfg.Buckets*cfg.Slots)
	case cfg.Buckets*cfg.Slots >= 1<<31:
		return nil, fmt.Errorf("%w: %d slots", ErrConfig, cfg.Buckets*cfg.Slots)
	}
	h := &Hashmap{cfg: cfg, index: map[uint32]int{}}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xc0c0))
	for len(h.keys) < cfg.Keys {
		k := rng.Uint32()
		if _, dup := h.index[k]; dup || k == 0xFFFFFFFF {
			continue
		}
		h.index[k] = len(h.keys)
		h.keys = append(h.keys, k)
	}
	return h, nil
}

// Config returns the workload's configuration.
func (h *Hashmap) Config() HashmapConfig { return h.cfg }

// Name returns "hashmap", or "hashmap(no-log-ofence)" for the seeded bug.
func (h *Hashmap) Name() string {
	if h.cfg.SkipLogFence {
		return "hashmap(no-log-ofence)"
	}
	return "hashmap"
}

// Batches returns the number of insert launches.
func (h *Hashmap) Batches() int { return blocksFor(h.cfg.Keys, h.cfg.Batch) }

// hmValue is the value stored with key k.
func hmValue(k uint32) uint32 { return uint32(mix64(uint64(k)^0x7a11) >> 32) }

// buckets returns key k's two buckets, which differ.
func (h *Hashmap) buckets(k uint32) (int, int) {
	B := uint64(h.cfg.Buckets)
	b1 := mix64(uint64(k)) % B
	b2 := (b1 + 1 + mix64(uint64(k)^0x9e3779b97f4a7c15)%(B-1)) % B
	return int(b1), int(b2)
}

func (h *Hashmap) logBytes() int { return hmLogHead + hmEntry*h.cfg.MaxChain }

// hmSum is a log entry's checksum; it covers the generation (in w1).
func hmSum(w0, w1 uint64, j int) uint64 { return mix64(w0 ^ mix64(w1^uint64(j)<<56^0x10c)) }

// Setup creates hm.table (every slot empty) and hm.log (one log per thread
// of a batch, generation 0).
func (h *Hashmap) Setup(m *pm.Machine) error {
	if _, err := createFilled(m, "hm.table", 8*h.cfg.Buckets*h.cfg.Slots, 0xFF); err != nil {
		return err
	}
	_, err := createFilled(m, "hm.log", h.logBytes()*h.cfg.Batch, 0)
	return err
}

type hmRegions struct{ table, log pm.Addr }

func (h *Hashmap) regions(m *pm.Machine) (hmRegions, error) {
	b, err := openRegions(m, "hm.table", "hm.log")
	if err != nil {
		return hmRegions{}, err
	}
	return hmRegions{b[0], b[1]}, nil
}

// hmWrite is one planned slot write of an insert.
type hmWrite struct {
	slot     int
	new, old uint64
}

// insertKernel returns the kernel that inserts batch b (thread i inserts
// key b*Batch+i) and the word it reports a full table in.
func (h *Hashmap) insertKernel(m *pm.Machine, b int) (scope.Kernel, errWord, error) {
	r, err := h.regions(m)
	if err != nil {
		return nil, errWord{}, err
	}
	if b < 0 || b >= h.Batches() {
		return nil, errWord{}, fmt.Errorf("%w: hashmap batch %d of %d", ErrConfig, b, h.Batches())
	}
	S, nslots := h.cfg.Slots, h.cfg.Buckets*h.cfg.Slots
	claims, err := m.Alloc(pm.DeviceMem, uint64(4*nslots))
	if err != nil {
		return nil, errWord{}, err
	}
	full, err := newErrWord(m)
	if err != nil {
		return nil, errWord{}, err
	}
	keys := h.keys[b*h.cfg.Batch : min((b+1)*h.cfg.Batch, len(h.keys))]
	fence, maxChain, logBytes := !h.cfg.SkipLogFence, h.cfg.MaxChain, h.logBytes()
	slotAddr := func(s int) pm.Addr { return r.table.Add(uint64(8 * s)) }
	return func(t *scope.Thread) {
		g := t.ID()
		if g >= len(keys) {
			return
		}
		key := keys[g]
		word := uint64(key) | uint64(hmValue(key))<<32
		claim := func(s int) bool { return t.AtomicCAS32(claims.Add(uint64(4*s)), 0, uint32(g+1), pm.Device) == 0 }
		buf := make([]byte, 8*S)
		scan := func(bk int) { t.LoadBytes(slotAddr(bk*S), buf) }
		at := func(s int) uint64 { return pm.GetLE(buf[8*s : 8*s+8]) }
		b1, b2 := h.buckets(key)
		for _, bk := range []int{b1, b2} {
			scan(bk)
			for s := range S {
				if uint32(at(s)) == key {
					return // present: inserted before a crash
				}
			}
		}
		// Plan the chain: claim an empty slot in one of cur's buckets,
		// else evict a slot's key from cur's alternate bucket and carry on
		// with it.
		var plan []hmWrite
		cur, from := word, -1
		for len(plan) < maxChain {
			c1, c2 := h.buckets(uint32(cur))
			order := [2]int{c1, c2}
			if from == c1 {
				order = [2]int{c2, c1}
			}
			placed := false
			for _, bk := range order {
				scan(bk)
				for s := range S {
					if at(s) == hmEmpty && claim(bk*S+s) {
						plan, placed = append(plan, hmWrite{bk*S + s, cur, hmEmpty}), true
						break
					}
				}
				if placed {
					break
				}
			}
			if placed {
				break
			}
			bk, start, evicted := order[0], int(mix64(cur)>>40)+len(plan), false
			for k := range S {
				s := bk*S + (start+k)%S
				if !claim(s) {
					continue
				}
				// An unclaimed slot holds what an earlier batch left.
				old := t.Load64(slotAddr(s))
				plan, evicted = append(plan, hmWrite{s, cur, old}), true
				placed = old == hmEmpty
				cur, from = old, bk
				break
			}
			if !evicted || placed {
				break
			}
		}
		if len(plan) == 0 || plan[len(plan)-1].old != hmEmpty {
			full.set(t)
			return
		}
		logAt := r.log.Add(uint64(logBytes * g))
		gen := uint32(t.Load64(logAt)) + 1
		entries := make([]byte, hmEntry*len(plan))
		for j, w := range plan {
			w1 := uint64(w.slot) | uint64(gen)<<32
			e := entries[hmEntry*j : hmEntry*(j+1)]
			pm.PutLE(e[0:8], w.old)
			pm.PutLE(e[8:16], w1)
			pm.PutLE(e[16:24], hmSum(w.old, w1, j))
		}
		t.StoreBytes(logAt.Add(hmLogHead), entries) // hashmap: log
		if fence {
			t.OFence() // the undo log before the in-place update
		}
		for _, w := range plan {
			t.Store64(slotAddr(w.slot), w.new) // hashmap: update
		}
		t.OFence()                    // the update before the commit
		t.Store64(logAt, uint64(gen)) // commit
		t.DFence()
	}, full, nil
}

// RecoveryKernel returns the kernel (one thread per log) that undoes the
// logged slot writes of every uncommitted insert and retires its log.
func (h *Hashmap) RecoveryKernel(m *pm.Machine) (scope.Kernel, error) {
	r, err := h.regions(m)
	if err != nil {
		return nil, err
	}
	nslots, batch, maxChain, logBytes := h.cfg.Buckets*h.cfg.Slots, h.cfg.Batch, h.cfg.MaxChain, h.logBytes()
	return func(t *scope.Thread) {
		g := t.ID()
		if g >= batch {
			return
		}
		logAt := r.log.Add(uint64(logBytes * g))
		gen := t.Load64(logAt) + 1
		buf := make([]byte, hmEntry*maxChain)
		t.LoadBytes(logAt.Add(hmLogHead), buf)
		var undo []hmWrite
		for j := range maxChain {
			e := buf[hmEntry*j : hmEntry*(j+1)]
			w0, w1, sum := pm.GetLE(e[0:8]), pm.GetLE(e[8:16]), pm.GetLE(e[16:24])
			if w1>>32 != gen || sum != hmSum(w0, w1, j) || int(uint32(w1)) >= nslots {
				continue // another generation's, or torn: nothing written under it
			}
			undo = append(undo, hmWrite{slot: int(uint32(w1)), old: w0})
		}
		if len(undo) == 0 {
			return
		}
		for j := len(undo) - 1; j >= 0; j-- {
			t.Store64(r.table.Add(uint64(8*undo[j].slot)), undo[j].old)
		}
		t.DFence() // the restored slots before the log is retired
		t.Store64(logAt, gen)
		t.DFence()
	}, nil
}

func (h *Hashmap) grid(n int) scope.Grid {
	th := min(h.cfg.Threads, n)
	return scope.Grid{Blocks: blocksFor(n, th), Threads: th}
}

// insert launches batches from..Batches()-1.
func (h *Hashmap) insert(m *pm.Machine, from int) error {
	for b := from; b < h.Batches(); b++ {
		k, full, err := h.insertKernel(m, b)
		if err != nil {
			return err
		}
		n := min(h.cfg.Batch, len(h.keys)-b*h.cfg.Batch)
		if _, err := scope.Launch(m, h.grid(n), k, scope.WithName("hashmap-insert")); err != nil {
			return err
		}
		if v, err := m.Memory().Load(full.a, 4); err != nil {
			return err
		} else if v != 0 {
			return fmt.Errorf("%w: batch %d: no place for key %#x within %d moves", ErrFull, b, h.keys[b*h.cfg.Batch+int(v)-1], h.cfg.MaxChain)
		}
	}
	return nil
}

// Run inserts every batch.
func (h *Hashmap) Run(m *pm.Machine) error { return h.insert(m, 0) }

// Recover undoes uncommitted inserts from the logs, checks that the table
// holds a prefix of the batches and part of the next, and inserts the
// missing keys.
func (h *Hashmap) Recover(m *pm.Machine) error {
	k, err := h.RecoveryKernel(m)
	if err != nil {
		return err
	}
	if _, err := scope.Launch(m, h.grid(h.cfg.Batch), k, scope.WithName("hashmap-recover")); err != nil {
		return err
	}
	present, err := h.contents(m)
	if err != nil {
		return err
	}
	first := -1 // the first batch with a missing key
	for i, key := range h.keys {
		b := i / h.cfg.Batch
		switch _, ok := present[key]; {
		case !ok && first < 0:
			first = b
		case ok && first >= 0 && b > first:
			return fmt.Errorf("%w: key %#x of batch %d is in the table but batch %d is incomplete", ErrInconsistent, key, b, first)
		}
	}
	if first < 0 {
		return nil
	}
	return h.insert(m, first)
}

// contents reads the table and returns the slot of every key, failing on
// an unknown key, a wrong value, a key in neither of its buckets, or a key
// stored twice.
func (h *Hashmap) contents(m *pm.Machine) (map[uint32]int, error) {
	r, err := h.regions(m)
	if err != nil {
		return nil, err
	}
	words, err := readWords(m, r.table, h.cfg.Buckets*h.cfg.Slots, 8)
	if err != nil {
		return nil, err
	}
	present := map[uint32]int{}
	for s, w := range words {
		if w == hmEmpty {
			continue
		}
		key, val := uint32(w), uint32(w>>32)
		b1, b2 := h.buckets(key)
		switch _, known := h.index[key]; {
		case !known:
			return nil, fmt.Errorf("%w: slot %d holds unknown key %#x", ErrInconsistent, s, key)
		case val != hmValue(key):
			return nil, fmt.Errorf("%w: key %#x has value %#x, want %#x", ErrInconsistent, key, val, hmValue(key))
		case s/h.cfg.Slots != b1 && s/h.cfg.Slots != b2:
			return nil, fmt.Errorf("%w: key %#x in bucket %d, not in its buckets %d or %d", ErrInconsistent, key, s/h.cfg.Slots, b1, b2)
		}
		if prev, dup := present[key]; dup {
			return nil, fmt.Errorf("%w: key %#x in slots %d and %d", ErrInconsistent, key, prev, s)
		}
		present[key] = s
	}
	return present, nil
}

// Check requires the table to hold exactly the inserted keys, each once,
// in one of its buckets, with its value.
func (h *Hashmap) Check(m *pm.Machine) error {
	present, err := h.contents(m)
	if err != nil {
		return err
	}
	for _, key := range h.keys {
		if _, ok := present[key]; !ok {
			return fmt.Errorf("key %#x missing (%d of %d keys present)", key, len(present), len(h.keys))
		}
	}
	return nil
}
