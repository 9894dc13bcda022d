package workloads

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/scope"
)

// The re-study's other short-running (S) kernels and its Mega-KV and
// ProgPOW kernels, written afresh.

// ScanShape sizes a two-kernel scan: Blocks blocks of Threads elements.
type ScanShape struct{ Blocks, Threads int }

func rsScanShape(s Size) ScanShape {
	switch s {
	case Tiny:
		return ScanShape{Blocks: 2, Threads: 4}
	case Quick:
		return ScanShape{Blocks: 32, Threads: 256}
	}
	return ScanShape{Blocks: 256, Threads: 512}
}

// NewRSScan returns a two-kernel inclusive prefix sum (Parboil
// mri-gridding's scan_L1 and scan_inter1): kernel 1 scans each block's
// elements in shared memory (Hillis–Steele) and stores the partial scan
// and the block's total to PM; kernel 2 adds the totals of the blocks
// before each element's own and stores the result to a separate array, so
// that both kernels can be re-run.
func NewRSScan(sh ScanShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.Blocks <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: scan %+v", ErrConfig, sh)
	}
	a, err := newRSApp("rsscan", s)
	if err != nil {
		return nil, err
	}
	n := sh.Blocks * sh.Threads
	rng := rand.New(rand.NewPCG(seed, 0x5c))
	in := randU32s(rng, n, 100)
	part, tot, out := make([]uint32, n), make([]uint32, sh.Blocks), make([]uint32, n)
	var run uint32
	for b := range sh.Blocks {
		var local uint32
		for i := b * sh.Threads; i < (b+1)*sh.Threads; i++ {
			local += in[i]
			part[i] = local
			out[i] = run + local
		}
		tot[b] = local
		run += local
	}
	a.arrays = []rsArray{{name: "in", init: in}, {name: "part", want: part}, {name: "tot", want: tot}, {name: "out", want: out}}
	grid := scope.Grid{Blocks: sh.Blocks, Threads: sh.Threads}
	a.rs.kernels = []rsKernel{
		{idempotent: true, name: "scan_L1", grid: grid, shared: 8 * sh.Threads, body: func(t *scope.Thread, p *Persister) {
			sm, T, i := t.Shared(), sh.Threads, t.TID()
			buf := func(k, j int) pm.Addr { return word32(sm, k*T+j) }
			t.Store32(buf(0, i), t.Load32(word32(a.addr("in"), t.ID())))
			t.SyncThreads()
			k := 0
			for d := 1; d < T; d *= 2 {
				v := t.Load32(buf(k, i))
				if i >= d {
					v += t.Load32(buf(k, i-d))
				}
				t.Store32(buf(1-k, i), v)
				t.SyncThreads()
				k = 1 - k
			}
			v := t.Load32(buf(k, i))
			p.Store32(word32(a.addr("part"), t.ID()), v)
			if i == T-1 {
				p.Store32(word32(a.addr("tot"), t.Block()), v)
			}
		}},
		{idempotent: true, name: "scan_inter", grid: grid, body: func(t *scope.Thread, p *Persister) {
			var run uint32
			for b := range t.Block() {
				run += t.Load32(word32(a.addr("tot"), b))
			}
			p.Store32(word32(a.addr("out"), t.ID()), run+t.Load32(word32(a.addr("part"), t.ID())))
		}},
	}
	return a, nil
}

// KVShape sizes a Mega-KV batch: a table of Buckets 8-way buckets, Keys
// keys in it before the batch, and a batch of Batch operations run by
// Threads threads per block.
type KVShape struct{ Buckets, Keys, Batch, Threads int }

func kvShape(s Size) KVShape {
	switch s {
	case Tiny:
		return KVShape{Buckets: 8, Keys: 6, Batch: 4, Threads: 4}
	case Quick:
		return KVShape{Buckets: 2048, Keys: 2048, Batch: 2048, Threads: 128}
	}
	return KVShape{Buckets: 32768, Keys: 32768, Batch: 32768, Threads: 256}
}

// KV operations.
const (
	KVSearch = iota
	KVInsert
	KVDelete
)

const kvWays = 8

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

// NewMegaKV returns one batch kernel of Mega-KV (hash_search,
// hash_insert_cuckoo or hash_delete) on a PM hash table of 8-way buckets
// of 8-byte slots (signature, location), each key with two candidate
// buckets. A search stores each query's location (0: absent) to kv.result;
// an insert puts a key not already present into the first free slot of
// its buckets with a compare-and-swap (no displacement: at most a quarter
// of the slots are used, and a key that finds both buckets full is
// reported by Check as ErrInconsistent); a delete clears the key's slot with a compare-and-swap.
// Every operation checks before it writes, so a re-run batch changes
// nothing already done.
func NewMegaKV(op int, sh KVShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.Buckets <= 0 || sh.Keys < 0 || sh.Batch <= 0 || sh.Threads <= 0 || op < KVSearch || op > KVDelete {
		return nil, fmt.Errorf("%w: mega-kv op %d %+v", ErrConfig, op, sh)
	}
	if sh.Keys+sh.Batch > sh.Buckets*kvWays/4 {
		return nil, fmt.Errorf("%w: mega-kv %+v: more than a quarter of the slots would be used", ErrConfig, sh)
	}
	names := [...]string{"search", "insert", "delete"}
	a, err := newRSApp("kv-"+names[op], s)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x3e6a))
	seen, sigs := map[uint32]bool{}, map[uint32]bool{}
	fresh := func() uint32 {
		for {
			k := uint32(rng.Uint64()) | 1
			sig, _, _ := kvHash(k, sh.Buckets)
			if !seen[k] && !sigs[sig] {
				seen[k], sigs[sig] = true, true
				return k
			}
		}
	}
	table := make([]uint64, sh.Buckets*kvWays)
	place := func(k uint32) {
		_, b1, b2 := kvHash(k, sh.Buckets)
		for _, b := range []int{b1, b2} {
			for w := range kvWays {
				if table[b*kvWays+w] == 0 {
					table[b*kvWays+w] = kvWord(k, sh.Buckets)
					return
				}
			}
		}
		panic("workloads: mega-kv reference table full") // at most a quarter of the slots used: unreachable
	}
	var keys []uint32
	for range sh.Keys {
		k := fresh()
		keys = append(keys, k)
		place(k)
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
	a.devs = []int{4} // the error word: an insert found both buckets full
	a.check = func(m *pm.Machine) error {
		if len(a.dev) > 0 {
			if err := (errWord{a.dev[0]}).check(m, "an insert found both buckets full"); err != nil {
				return err
			}
		}
		got, err := readWords(m, a.addr("table"), len(init), 8)
		if err != nil {
			return err
		}
		var have []uint64
		for _, w := range got {
			if w != 0 {
				have = append(have, w)
			}
		}
		slices.Sort(have)
		if !slices.Equal(have, wantWords) {
			return fmt.Errorf("%w: kv table holds %d entries, want %d (or different ones)", ErrInconsistent, len(have), len(wantWords))
		}
		return nil
	}
	a.rs.kernels = []rsKernel{{idempotent: true, name: "hash_" + names[op], grid: scope.Grid{Blocks: blocksFor(sh.Batch, sh.Threads), Threads: sh.Threads},
		body: func(t *scope.Thread, p *Persister) {
			i := t.ID()
			if i >= sh.Batch {
				return
			}
			key := t.Load32(word32(a.addr("batch"), i))
			word := kvWord(key, sh.Buckets)
			_, b1, b2 := kvHash(key, sh.Buckets)
			slot := func(b, w int) pm.Addr { return a.addr("table").Add(uint64(8 * (b*kvWays + w))) }
			found := pm.Addr(0)
			for _, b := range []int{b1, b2} {
				for w := range kvWays {
					if found == 0 && t.Load64(slot(b, w)) == word {
						found = slot(b, w)
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
			case KVInsert:
				if found != 0 {
					return
				}
				for _, b := range []int{b1, b2} {
					for w := range kvWays {
						if t.Load64(slot(b, w)) == 0 && p.CAS64(slot(b, w), 0, word) == 0 {
							return
						}
					}
				}
				errWord{a.dev[0]}.set(t)
			case KVDelete:
				if found != 0 {
					p.CAS64(found, word, 0)
				}
			}
		}}}
	return a, nil
}

// PoWShape sizes the ProgPOW-like kernels: a DAG of Items 16-word items
// generated from a Cache-word cache in Rounds rounds each, searched by
// Nonces nonces of Loops DAG accesses each.
type PoWShape struct{ Items, Cache, Rounds, Nonces, Loops, Threads int }

func powShape(s Size) PoWShape {
	switch s {
	case Tiny:
		return PoWShape{Items: 8, Cache: 16, Rounds: 2, Nonces: 8, Loops: 2, Threads: 4}
	case Quick:
		return PoWShape{Items: 2048, Cache: 1024, Rounds: 8, Nonces: 2048, Loops: 16, Threads: 128}
	}
	return PoWShape{Items: 1 << 15, Cache: 1 << 14, Rounds: 16, Nonces: 1 << 15, Loops: 64, Threads: 256}
}

const powItem = 16 // words per DAG item

func powDAGItem(i int, cache func(int) uint32, sh PoWShape) [powItem]uint32 {
	x := mix64(uint64(i) + 0x9e3779b9)
	for range sh.Rounds {
		x = mix64(x ^ uint64(cache(int(x%uint64(sh.Cache)))))
	}
	var it [powItem]uint32
	for j := range it {
		it[j] = uint32(mix64(x + uint64(j)))
	}
	return it
}

func powSearch(n int, dag func(int) uint32, sh PoWShape) uint64 {
	h := mix64(uint64(n) ^ 0x0b0e)
	for range sh.Loops {
		item := int(h % uint64(sh.Items))
		for j := range 4 {
			h = mix64(h ^ uint64(dag(int((h>>(8*j))%powItem)*sh.Items+item)))
		}
	}
	return h
}

// NewProgPoW returns one of the ProgPOW-like kernels: with dag set,
// ethash_calculate_dag_item (each thread hashes its DAG item out of the
// cache and stores its 16 words), else progpow_search (each thread mixes
// its nonce with Loops pseudo-random DAG items, the DAG given by the host,
// and stores the 64-bit result).
func NewProgPoW(dag bool, sh PoWShape, s persistency.Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.Items <= 0 || sh.Cache <= 0 || sh.Rounds <= 0 || sh.Nonces <= 0 || sh.Loops <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: progpow %+v", ErrConfig, sh)
	}
	name := "pow-search"
	if dag {
		name = "pow-dag"
	}
	a, err := newRSApp(name, s)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x90))
	cache := make([]uint32, sh.Cache)
	for i := range cache {
		cache[i] = uint32(rng.Uint64())
	}
	// The DAG is word-major (word j of item i at j·Items + i), so that a
	// warp's items are neighbouring words.
	items := make([]uint32, sh.Items*powItem)
	for i := range sh.Items {
		it := powDAGItem(i, func(k int) uint32 { return cache[k] }, sh)
		for j, v := range it {
			items[j*sh.Items+i] = v
		}
	}
	if dag {
		a.arrays = []rsArray{{name: "cache", init: cache}, {name: "dag", want: items}}
		a.rs.kernels = []rsKernel{{idempotent: true, name: "ethash_calculate_dag_item", grid: scope.Grid{Blocks: blocksFor(sh.Items, sh.Threads), Threads: sh.Threads},
			body: func(t *scope.Thread, p *Persister) {
				i := t.ID()
				if i >= sh.Items {
					return
				}
				it := powDAGItem(i, func(k int) uint32 { return t.Load32(word32(a.addr("cache"), k)) }, sh)
				for j, v := range it {
					p.Store32(word32(a.addr("dag"), j*sh.Items+i), v)
				}
			}}}
		return a, nil
	}
	out := make([]uint32, 2*sh.Nonces)
	for n := range sh.Nonces {
		h := powSearch(n, func(k int) uint32 { return items[k] }, sh)
		out[2*n], out[2*n+1] = uint32(h), uint32(h>>32)
	}
	a.arrays = []rsArray{{name: "dag", init: items}, {name: "out", want: out}}
	a.rs.kernels = []rsKernel{{idempotent: true, name: "progpow_search", grid: scope.Grid{Blocks: blocksFor(sh.Nonces, sh.Threads), Threads: sh.Threads},
		body: func(t *scope.Thread, p *Persister) {
			n := t.ID()
			if n >= sh.Nonces {
				return
			}
			h := powSearch(n, func(k int) uint32 { return t.Load32(word32(a.addr("dag"), k)) }, sh)
			p.Store64(a.addr("out").Add(uint64(8*n)), h)
		}}}
	return a, nil
}
