package workloads

import (
	"fmt"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// KVShape sizes a Mega-KV batch: a table of Buckets 8-way buckets, Keys
// keys in it before the batch, and a batch of Batch operations run by
// Threads threads per block.
type KVShape struct{ Buckets, Keys, Batch, Threads int }

// kvShape fills three quarters of the table before the batch and an eighth
// more with an insert batch, a load at which cuckoo displacement is
// common (about one insert in ten of the paper-size batch displaces an
// entry). The tiny table is fuller still, so that an insert batch small
// enough to explore every crash state of still displaces entries.
func kvShape(s Size) KVShape {
	return bySize(s,
		KVShape{Buckets: 4, Keys: 20, Batch: 8, Threads: 4},
		KVShape{Buckets: 2048, Keys: 12288, Batch: 2048, Threads: 128},
		KVShape{Buckets: 32768, Keys: 196608, Batch: 32768, Threads: 256})
}

// KV operations.
const (
	KVSearch = iota
	KVInsert
	KVDelete
)

const (
	kvWays = 8
	// kvDepth is how many displacements one insert may chain: an entry
	// moved to its other bucket may move one entry of that bucket in turn.
	kvDepth = 2
	// kvAttempts is how often an insert starts over when other threads'
	// displacements held every entry it could move.
	kvAttempts = 4
)

// kvHash returns a key's signature (never zero) and its two buckets.
func kvHash(key uint32, buckets int) (sig uint32, b1, b2 int) {
	h := mix64(uint64(key) + 0x6b76)
	sig = uint32(h>>32) | 1
	return sig, int(uint32(h) % uint32(buckets)), int(uint32(h>>16) % uint32(buckets))
}

// kvWord is a slot's contents: the signature and the location (the key
// itself here, standing for the value's address), never zero.
func kvWord(key uint32, buckets int) uint64 {
	sig, _, _ := kvHash(key, buckets)
	return uint64(sig)<<32 | uint64(key)
}

// kvOther returns the bucket of word w other than b, or false if both of
// w's buckets are b (it cannot move).
func kvOther(w uint64, b, buckets int) (int, bool) {
	_, b1, b2 := kvHash(uint32(w), buckets)
	switch b {
	case b1:
		return b2, b2 != b
	case b2:
		return b1, true
	}
	return 0, false
}

// kvTable is the cuckoo insert, written once for the Go reference (host
// memory) and the kernel (PM through a Persister): load and cas access the
// slots, claim and release a volatile per-slot claim (a displacement's
// victim is claimed so that no other insert moves it meanwhile), and
// persist makes a slot's new contents durable before the caller goes on.
type kvTable struct {
	buckets int
	load    func(slot int) uint64
	cas     func(slot int, old, nv uint64) bool
	claim   func(slot int) bool
	release func(slot int)
	persist func(slot int)
}

// place puts w into a free slot of bs, or, failing that and with depth
// left, moves an entry of bs to its other bucket (recursively) and takes
// its slot; it returns the slot w went to, or -1. A move copies the entry
// first and makes the copy durable, then overwrites the old slot: a crash
// between the two leaves the entry twice, never not at all (Recover removes
// the second copy).
func (kt *kvTable) place(w uint64, bs []int, depth int) int {
	for _, b := range bs {
		for way := range kvWays {
			s := b*kvWays + way
			if kt.load(s) == 0 && kt.cas(s, 0, w) {
				return s
			}
		}
	}
	if depth == 0 {
		return -1
	}
	for _, b := range bs {
		for i := range kvWays {
			// Start at a way the word chooses, so that inserts into the
			// same bucket pick different victims.
			s := b*kvWays + (int(w>>32)+i)%kvWays
			v := kt.load(s)
			if v == 0 || !kt.claim(s) {
				continue
			}
			if kt.load(s) != v { // moved before the claim
				kt.release(s)
				continue
			}
			alt, ok := kvOther(v, b, kt.buckets)
			if ok {
				if c := kt.place(v, []int{alt}, depth-1); c >= 0 {
					kt.persist(c)
					if !kt.cas(s, v, w) {
						panic("workloads: a claimed Mega-KV slot changed") // only the claimer writes a claimed slot
					}
					kt.release(s)
					return s
				}
			}
			kt.release(s)
		}
	}
	return -1
}

// insert puts w into one of its buckets unless it is there already, and
// reports whether it is there.
func (kt *kvTable) insert(w uint64) bool {
	_, b1, b2 := kvHash(uint32(w), kt.buckets)
	for _, b := range []int{b1, b2} {
		for way := range kvWays {
			if kt.load(b*kvWays+way) == w {
				return true
			}
		}
	}
	for range kvAttempts {
		if kt.place(w, []int{b1, b2}, kvDepth) >= 0 {
			return true
		}
	}
	return false
}

// NewMegaKV returns one batch kernel of Mega-KV (hash_search,
// hash_insert_cuckoo or hash_delete) on a PM hash table (region
// kv-<op>.table) of 8-way buckets of 8-byte slots (signature, location),
// each key with two candidate buckets. A search stores each query's
// location (0: absent) to kv-search.result. A delete clears the key's slot
// with a compare-and-swap. An insert skips a key already present, then
// takes a free slot of the key's buckets with a compare-and-swap, and when
// both are full displaces an entry to its other bucket, cuckoo style
// (kvTable.place; chains of kvDepth moves, kvAttempts tries). Each
// displacement makes the moved entry's copy durable (Persister.Persist)
// before overwriting its old slot, so that under every scheme but the nvm
// baseline a crash leaves every entry in the table at least once; Recover
// removes duplicates before re-running the batch. Every operation checks
// before it writes, so a re-run batch changes nothing already done. Check
// compares the table's entries with the reference set and checks that each
// is in one of its own buckets, once.
func NewMegaKV(op int, sh KVShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	return newMegaKV(op, sh, s, seed, true)
}

// newMegaKV is NewMegaKV; without ordered, a displacement does not make its
// copy durable before the overwrite (a seeded bug for the tests).
func newMegaKV(op int, sh KVShape, s persistency.Scheme, seed uint64, ordered bool) (RestudyWorkload, error) {
	if sh.Buckets <= 0 || sh.Keys < 0 || sh.Batch <= 0 || sh.Threads <= 0 || op < KVSearch || op > KVDelete {
		return nil, fmt.Errorf("%w: mega-kv op %d %+v", ErrConfig, op, sh)
	}
	if 8*(sh.Keys+sh.Batch) > 7*sh.Buckets*kvWays {
		return nil, fmt.Errorf("%w: mega-kv %+v: more than seven eighths of the slots would be used", ErrConfig, sh)
	}
	names := [...]string{"search", "insert", "delete"}
	a, rng, err := newRSApp("kv-"+names[op], s, seed, 0x3e6a)
	if err != nil {
		return nil, err
	}
	seen, sigs := map[uint32]bool{}, map[uint32]bool{}
	fresh := func() uint32 {
		for {
			k := uint32(rng.Uint64())>>1 | 1
			sig, _, _ := kvHash(k, sh.Buckets)
			if !seen[k] && !sigs[sig] {
				seen[k], sigs[sig] = true, true
				return k
			}
		}
	}
	table := make([]uint64, sh.Buckets*kvWays)
	ref := kvTable{buckets: sh.Buckets,
		load: func(s int) uint64 { return table[s] },
		cas: func(s int, old, nv uint64) bool {
			if table[s] != old {
				return false
			}
			table[s] = nv
			return true
		},
		claim:   func(int) bool { return true },
		release: func(int) {},
		persist: func(int) {},
	}
	var keys []uint32
	for range sh.Keys {
		k := fresh()
		keys = append(keys, k)
		if !ref.insert(kvWord(k, sh.Buckets)) {
			return nil, fmt.Errorf("%w: mega-kv %+v: the table cannot hold its keys", ErrConfig, sh)
		}
	}
	init := slices.Clone(table)
	batch := make([]uint32, sh.Batch)
	want := map[uint64]bool{}
	for _, k := range keys {
		want[kvWord(k, sh.Buckets)] = true
	}
	result := make([]uint32, sh.Batch)
	for i := range batch {
		switch {
		case op == KVInsert || len(keys) == 0 || op == KVSearch && i%2 == 1:
			batch[i] = fresh()
		default:
			batch[i] = keys[rng.IntN(len(keys))]
			if op == KVDelete {
				keys = slices.DeleteFunc(keys, func(k uint32) bool { return k == batch[i] })
			}
		}
		switch op {
		case KVSearch:
			if want[kvWord(batch[i], sh.Buckets)] {
				result[i] = batch[i]
			}
		case KVInsert:
			want[kvWord(batch[i], sh.Buckets)] = true
		case KVDelete:
			delete(want, kvWord(batch[i], sh.Buckets))
		}
	}
	words := make([]uint32, 2*len(init))
	for i, w := range init {
		words[2*i], words[2*i+1] = uint32(w), uint32(w>>32)
	}
	a.arrays = []rsArray{{name: "table", init: words, rw: true}, {name: "batch", init: batch}}
	if op == KVSearch {
		a.arrays = append(a.arrays, rsArray{name: "result", want: result})
	}
	var wantWords []uint64
	for w := range want {
		wantWords = append(wantWords, w)
	}
	slices.Sort(wantWords)
	// Device memory: the error word (an insert that found no place), and
	// the inserts' claims, a word per slot.
	a.devs = []int{4, 4 * len(init)}
	a.check = func(m *pm.Machine) error {
		if len(a.dev) > 0 {
			if err := (errWord{a.dev[0]}).check(m, "an insert found no place"); err != nil {
				return err
			}
		}
		got, err := readWords(m, a.addr("table"), len(init), 8)
		if err != nil {
			return err
		}
		var have []uint64
		for s, w := range got {
			if w == 0 {
				continue
			}
			if _, b1, b2 := kvHash(uint32(w), sh.Buckets); s/kvWays != b1 && s/kvWays != b2 {
				return fmt.Errorf("%w: kv slot %d holds %#x, whose buckets are %d and %d", ErrInconsistent, s, w, b1, b2)
			}
			have = append(have, w)
		}
		slices.Sort(have)
		if !slices.Equal(have, wantWords) {
			return fmt.Errorf("%w: kv table holds %d entries, want %d (or different ones)", ErrInconsistent, len(have), len(wantWords))
		}
		return nil
	}
	a.rs.repair = func(m *pm.Machine) error { return kvDedupe(m, a.addr("table"), len(init)) }
	a.rs.kernels = []rsKernel{perItem("hash_"+names[op], names[op], sh.Batch, sh.Threads, func(t *scope.Thread, p *Persister, i int) {
		tb := a.addr("table")
		slot := func(s int) pm.Addr { return tb.Add(uint64(8 * s)) }
		key := t.Load32(word32(a.addr("batch"), i))
		word := kvWord(key, sh.Buckets)
		if op == KVInsert {
			claims := a.dev[1]
			kt := kvTable{buckets: sh.Buckets,
				load:    func(s int) uint64 { return t.Load64(slot(s)) },
				cas:     func(s int, old, nv uint64) bool { return p.CAS64(slot(s), old, nv) == old },
				claim:   func(s int) bool { return t.AtomicCAS32(word32(claims, s), 0, 1, pm.Device) == 0 },
				release: func(s int) { t.AtomicExch32(word32(claims, s), 0, pm.Device) },
				persist: func(s int) {
					if ordered {
						p.Persist(slot(s))
					}
				},
			}
			if !kt.insert(word) {
				errWord{a.dev[0]}.set(t)
			}
			return
		}
		_, b1, b2 := kvHash(key, sh.Buckets)
		found := pm.Addr(0)
		for _, b := range []int{b1, b2} {
			for w := range kvWays {
				if found == 0 && t.Load64(slot(b*kvWays+w)) == word {
					found = slot(b*kvWays + w)
				}
			}
		}
		switch op {
		case KVSearch:
			loc := uint32(0)
			if found != 0 {
				loc = key
			}
			p.Store32(word32(a.addr("result"), i), loc)
		case KVDelete:
			if found != 0 {
				p.CAS64(found, word, 0)
			}
		}
	})}
	return a, nil
}

// kvDedupe clears, on the host, every slot of the n-slot table at tb whose
// entry an earlier slot holds too: what a displacement leaves when a crash
// falls between its durable copy and its overwrite. Host writes to PM are
// durable at once.
func kvDedupe(m *pm.Machine, tb pm.Addr, n int) error {
	got, err := readWords(m, tb, n, 8)
	if err != nil {
		return err
	}
	seen := map[uint64]bool{}
	for s, w := range got {
		if w == 0 {
			continue
		}
		if seen[w] {
			if err := m.CopyIn(tb.Add(uint64(8*s)), make([]byte, 8)); err != nil {
				return err
			}
		}
		seen[w] = true
	}
	return nil
}
