package workloads

import (
	"fmt"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// KVShape sizes a Mega-KV batch: a table of Buckets 8-way buckets (64
// bytes each), Keys keys in it before the batch, and a batch of Batch
// operations run by Blocks blocks of Threads threads, kvWays (8) lanes per
// key as in Mega-KV's kernels. Threads must be a multiple of kvWays.
type KVShape struct{ Buckets, Keys, Batch, Blocks, Threads int }

// kvShape is the shape of Mega-KV operation op at size s.
//
// Paper size is the re-study's artifact (megakv/{search,insert,delete} of
// github.com/peiyi1/memory_persistency_model_for_GPU):
//
//   - Batch 65,536 (SELEM_NUM in py_search_stream.c, py_insert_stream.c,
//     py_delete_stream.c);
//   - grid: 8 blocks of 1,024 threads for all three kernels (search and
//     delete: THREAD_NUM 1024*8, THREADS_PER_BLK 1024, gpu_hash_search and
//     gpu_hash_delete in gpu_hash.cu; insert: INSERT_BLOCK 8 blocks, each
//     with its own eighth of the batch, threads_per_blk 1024 in
//     gpu_hash_insert), so each group of 8 lanes handles 64 keys, one after
//     another;
//   - the table: buckets of 8 signatures and 8 locations, 64 bytes
//     (gpu_hash.h: ELEM_NUM_P 3; the PTX indexes buckets by 64 bytes), 2^24
//     of them (MEM_P 30: a 1 GB table). We keep 2^21 buckets (128 MB): a
//     table of 2^24 buckets would cost this model 1 GB of visible image, 1
//     GB of durable image and 2 GB of undo log per run. Both are far larger
//     than the 6 MB L2, so nearly every probe misses it, as there: at paper
//     size 96% of the search's line reads miss the L2 here (hwmodel's
//     statistics), where a random probe of the 1 GB table would find its
//     line in the L2 about 0.6% of the time.
//   - the contents: the artifact's search and delete tables have every
//     bucket full (the host fills every signature with 1..8) and every
//     query matches a slot (its signature is drawn from 1..8); its insert
//     starts from an empty table (cudaMemset 0), where no key is ever
//     displaced. Ours: search and delete start from 2×Batch keys and every
//     query is a key in the table (a delete's queries are distinct);
//     inserts go into an empty table. Our keys are distinct, so a search
//     query matches one slot, not one in each bucket as there.
//
// Quick is paper size scaled down. The tiny table is nearly full (seven
// eighths of its slots after an insert batch), so that an insert batch
// small enough to explore every crash state of still displaces entries.
func kvShape(op int, s Size) KVShape {
	keys := func(paper int) int {
		if op == KVInsert {
			return 0
		}
		return paper
	}
	return bySize(s,
		KVShape{Buckets: 4, Keys: 20, Batch: 8, Blocks: 2, Threads: 16},
		KVShape{Buckets: 1 << 14, Keys: keys(2 * 2048), Batch: 2048, Blocks: 8, Threads: 128},
		KVShape{Buckets: 1 << 21, Keys: keys(2 * 65536), Batch: 65536, Blocks: 8, Threads: 1024})
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
// each key with two candidate buckets. As in Mega-KV, a group of kvWays
// lanes of a warp handles one key at a time, lane i looking at slot i of a
// bucket, and the group shares what its lanes found through a warp vote
// (kvVoter, Mega-KV's __ballot_sync); each group takes its keys one after
// another, a grid's worth of groups apart (an insert block's worth for
// inserts, each block taking its own share of the batch), as the
// artifact's kernels do (kvShape).
//
//   - search (hash_search) probes the key's first bucket, then its second;
//     the lane whose slot holds the key stores the key's location (the key
//     itself here) to kv-search.result, word 2i for the first bucket and
//     2i+1 for the second, as Mega-KV's two output words per query (a
//     word no lane stores stays 0: not there).
//   - delete (hash_delete) probes the first bucket, and the lane holding
//     the key clears its slot; only if no lane of the group held it does
//     the group probe the second bucket.
//   - insert (hash_insert_cuckoo) reads both buckets; a key present in
//     either is left alone. Otherwise the lane of the first free slot of
//     the first bucket, counting from a lane the key's signature chooses
//     (Mega-KV's ml_mask), claims it with a compare-and-swap; the block
//     meets (Mega-KV's __syncthreads between a claim and its check) and the
//     group votes on the claim. A key whose claim failed (its first bucket
//     full, or the slot taken meanwhile) goes the slow way: lane 0 alone
//     runs the cuckoo insert (kvTable.insert: a free slot of either bucket,
//     or else an entry displaced to its other bucket; chains of kvDepth
//     moves, kvAttempts tries).
//
// Where ours differs from Mega-KV's code: a slot is one 8-byte word
// (signature and location together, durable atomically) where Mega-KV's
// bucket holds 8 signatures then 8 locations; a claim is a
// compare-and-swap where Mega-KV writes the signature, meets and reads it
// back; and an insert reads its second bucket up front, since a re-run
// after a crash must not insert a key its second bucket already holds.
//
// Each displacement makes the moved entry's copy durable (Persister.Persist)
// before overwriting its old slot, so that under every scheme but the nvm
// baseline a crash leaves every entry in the table at least once; Recover
// removes duplicates before re-running the batch. Every operation checks
// before it writes, so a re-run batch changes nothing already done. Check
// compares the table's entries with the reference set and checks that each
// is in one of its own buckets, once, and compares a search's results with
// the reference's.
func NewMegaKV(op int, sh KVShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	return newMegaKV(op, sh, s, seed, true)
}

// Compute per key (see aluCycles), counted from the kernel's Go code. The
// key's signature and buckets (kvHash) are not counted: Mega-KV's batch
// carries them, computed on the CPU (its selem_t and ielem_t hold a
// signature and a hash).
const (
	// kvIterInsts: the key's index (2) and bounds checks (2), its batch
	// address (1), the loop's increment and compare-and-branch (2).
	kvIterInsts = 7
	// kvProbeInsts: a slot's address (bucket × 8 + lane: 1; scaled and
	// added to the table's base, 64-bit: 3) and the 64-bit compare with the
	// key's word (2).
	kvProbeInsts = 6
	// kvChooseInsts: an insert's choice of a free lane from the vote
	// (Mega-KV's mask, shift, or, find-first-set and and: 6) and the test
	// of its result (1).
	kvChooseInsts = 7
)

// newMegaKV is NewMegaKV; without ordered, a displacement does not make its
// copy durable before the overwrite (a seeded bug for the tests).
func newMegaKV(op int, sh KVShape, s Scheme, seed uint64, ordered bool) (RestudyWorkload, error) {
	if sh.Buckets <= 0 || sh.Keys < 0 || sh.Batch <= 0 || sh.Blocks <= 0 || sh.Threads <= 0 || sh.Threads%kvWays != 0 ||
		op < KVSearch || op > KVDelete || op == KVSearch && sh.Keys == 0 || op == KVDelete && sh.Keys < sh.Batch {
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
	want := map[uint64]bool{}
	for range sh.Keys {
		k := fresh()
		keys = append(keys, k)
		want[kvWord(k, sh.Buckets)] = true
		if !ref.insert(kvWord(k, sh.Buckets)) {
			return nil, fmt.Errorf("%w: mega-kv %+v: the table cannot hold its keys", ErrConfig, sh)
		}
	}
	batch := make([]uint32, sh.Batch)
	var result []uint32
	if op == KVSearch {
		result = make([]uint32, 2*sh.Batch)
	}
	for i := range batch {
		switch op {
		case KVInsert:
			batch[i] = fresh()
			want[kvWord(batch[i], sh.Buckets)] = true
		case KVSearch:
			// Distinct keys while they last, as the artifact's random
			// queries seldom repeat a bucket.
			j := i % len(keys)
			if j == 0 {
				rng.Shuffle(len(keys), func(x, y int) { keys[x], keys[y] = keys[y], keys[x] })
			}
			k := keys[j]
			batch[i] = k
			w := kvWord(k, sh.Buckets)
			_, b1, b2 := kvHash(k, sh.Buckets)
			for way := range kvWays {
				if table[b1*kvWays+way] == w {
					result[2*i] = k
				}
				if table[b2*kvWays+way] == w {
					result[2*i+1] = k
				}
			}
		case KVDelete:
			j := rng.IntN(len(keys))
			batch[i] = keys[j]
			keys[j] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
			delete(want, kvWord(batch[i], sh.Buckets))
		}
	}
	nslots := len(table)
	words := make([]uint32, 2*nslots)
	for i, w := range table {
		words[2*i], words[2*i+1] = uint32(w), uint32(w>>32)
	}
	table = nil
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
	a.devs = []int{4, 4 * nslots}
	a.check = func(m *pm.Machine) error {
		if len(a.dev) > 0 {
			if err := (errWord{a.dev[0]}).check(m, "an insert found no place"); err != nil {
				return err
			}
		}
		got, err := readWords(m, a.addr("table"), nslots, 8)
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
	a.rs.repair = func(m *pm.Machine) error { return kvDedupe(m, a.addr("table"), nslots) }
	a.rs.kernels = []rsKernel{a.megaKVKernel(op, sh, names[op], ordered)}
	return a, nil
}

// megaKVKernel is the kernel of newMegaKV.
func (a *rsApp) megaKVKernel(op int, sh KVShape, name string, ordered bool) rsKernel {
	votes := &kvVotes{}
	for i := range votes.buf {
		votes.buf[i] = make([]uint8, sh.Blocks*sh.Threads)
	}
	// per keys are shared by gpb groups: the whole batch by the grid's
	// groups, or for inserts a block's share by the block's groups. Every
	// thread runs iters iterations, those past its last key idle, so that
	// every lane of a warp reaches every vote and every thread of a block
	// every barrier.
	per, gpb := sh.Batch, sh.Blocks*sh.Threads/kvWays
	if op == KVInsert {
		per, gpb = (sh.Batch+sh.Blocks-1)/sh.Blocks, sh.Threads/kvWays
	}
	iters := (per + gpb - 1) / gpb
	return rsKernel{idempotent: true, name: "hash_" + name, label: name, grid: scope.Grid{Blocks: sh.Blocks, Threads: sh.Threads},
		body: func(t *scope.Thread, p *Persister) {
			tb := a.addr("table")
			slot := func(b, way int) pm.Addr { return tb.Add(uint64(8 * (b*kvWays + way))) }
			lane, g, base := t.TID()%kvWays, t.ID()/kvWays, 0
			if op == KVInsert {
				g, base = t.TID()/kvWays, t.Block()*per
			}
			vt := kvVoter{v: votes, t: t}
			var kt *kvTable
			if op == KVInsert && lane == 0 {
				claims := a.dev[1]
				kt = &kvTable{buckets: sh.Buckets,
					load:    func(s int) uint64 { return t.Load64(tb.Add(uint64(8 * s))) },
					cas:     func(s int, old, nv uint64) bool { return p.CAS64(tb.Add(uint64(8*s)), old, nv) == old },
					claim:   func(s int) bool { return t.AtomicCAS32(word32(claims, s), 0, 1, pm.Device) == 0 },
					release: func(s int) { t.AtomicExch32(word32(claims, s), 0, pm.Device) },
					persist: func(s int) {
						if ordered {
							p.Persist(tb.Add(uint64(8 * s)))
						}
					},
				}
			}
			for k := range iters {
				j := g + k*gpb
				id := base + j
				active := j < per && id < sh.Batch
				var key uint32
				var word uint64
				var b1, b2 int
				if active {
					key = t.Load32(word32(a.addr("batch"), id))
					word = kvWord(key, sh.Buckets)
					_, b1, b2 = kvHash(key, sh.Buckets)
				}
				switch op {
				case KVSearch:
					if active {
						work(t, kvIterInsts+2*kvProbeInsts)
						if t.Load64(slot(b1, lane)) == word {
							p.Store32(word32(a.addr("result"), 2*id), key)
						}
					}
					t.SyncWarp() // Mega-KV's vote between the probes (its result unused)
					if active && t.Load64(slot(b2, lane)) == word {
						p.Store32(word32(a.addr("result"), 2*id+1), key)
					}
				case KVDelete:
					hit := false
					if active {
						work(t, kvIterInsts+kvProbeInsts)
						hit = t.Load64(slot(b1, lane)) == word
					}
					found := vt.any(hit)
					if hit {
						p.Store64(slot(b1, lane), 0)
					}
					if active && !found {
						work(t, kvProbeInsts)
						if t.Load64(slot(b2, lane)) == word {
							p.Store64(slot(b2, lane), 0)
						}
					}
				case KVInsert:
					var bits uint8
					if active {
						work(t, kvIterInsts+2*kvProbeInsts+kvChooseInsts)
						var v [2]uint64
						t.Gather64(v[:], slot(b1, lane), slot(b2, lane))
						if v[0] == word || v[1] == word {
							bits |= 1 // present
						}
						if v[0] == 0 {
							bits |= 2 // free
						}
					}
					votes := vt.vote(bits)
					present, chosen := false, -1
					for _, b := range votes {
						present = present || b&1 != 0
					}
					for i := range kvWays {
						if l := (int(word>>33) + i) % kvWays; !present && votes[l]&2 != 0 {
							chosen = l
							break
						}
					}
					claimed := chosen == lane && p.CAS64(slot(b1, lane), 0, word) == 0
					t.SyncThreads() // Mega-KV's block barrier between a claim and its check
					if done := vt.any(claimed) || present; active && !done && kt != nil && !kt.insert(word) {
						errWord{a.dev[0]}.set(t)
					}
				}
				t.SyncWarp() // the lanes reconverge after the iteration's branches
			}
		}}
}

// kvVotes holds the lanes' posts of Mega-KV's warp votes (its
// __ballot_sync), a byte per thread of the grid, in two buffers that votes
// alternate between (kvVoter).
type kvVotes struct{ buf [2][]uint8 }

// kvVoter is one thread's side of the warp votes.
type kvVoter struct {
	v *kvVotes
	t *scope.Thread
	n int // votes taken
}

// vote posts b, meets the warp (SyncWarp: a vote is a warp instruction,
// and its lanes reconverge there) and returns the bytes of the thread's
// group of kvWays lanes. Every lane of a warp must take the same votes.
// Alternating buffers keep a lane that has read one vote and posts the
// next from overwriting a byte a slower lane has yet to read: no lane
// passes the next vote's meeting before every lane of its warp has
// reached it, and so has read this one.
func (vt *kvVoter) vote(b uint8) [kvWays]uint8 {
	buf := vt.v.buf[vt.n&1]
	vt.n++
	id := vt.t.ID()
	buf[id] = b
	vt.t.SyncWarp()
	var out [kvWays]uint8
	g := id - id%kvWays
	copy(out[:], buf[g:g+kvWays])
	return out
}

// any votes pred and reports whether a lane of the group voted true.
func (vt *kvVoter) any(pred bool) bool {
	var b uint8
	if pred {
		b = 1
	}
	for _, x := range vt.vote(b) {
		if x != 0 {
			return true
		}
	}
	return false
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
