package workloads

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// The re-study's scan (short-running, S) and its ProgPOW kernels, written
// afresh. Mega-KV is in restudy_kv.go.

// ScanShape sizes a two-kernel scan: Blocks blocks of Threads elements.
type ScanShape struct{ Blocks, Threads int }

func rsScanShape(s Size) ScanShape {
	return bySize(s, ScanShape{Blocks: 2, Threads: 4}, ScanShape{Blocks: 32, Threads: 256}, ScanShape{Blocks: 256, Threads: 512})
}

// NewRSScan returns a two-kernel inclusive prefix sum (Parboil
// mri-gridding's scan_L1 and scan_inter1, the re-study's
// mri-gridding-scan1 and -scan2): kernel 1 scans each block's elements in
// shared memory (Hillis–Steele) and stores the partial scan and the
// block's total to PM; kernel 2 adds the totals of the blocks before each
// element's own and stores the result to a separate array, so that both
// kernels can be re-run.
func NewRSScan(sh ScanShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.Blocks <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: scan %+v", ErrConfig, sh)
	}
	a, rng, err := newRSApp("rsscan", s, seed, 0x5c)
	if err != nil {
		return nil, err
	}
	n := sh.Blocks * sh.Threads
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
		{idempotent: true, name: "scan_L1", label: "mri-gridding-scan1", grid: grid, shared: 8 * sh.Threads, body: func(t *scope.Thread, p *Persister) {
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
		perItem("scan_inter", "mri-gridding-scan2", n, sh.Threads, func(t *scope.Thread, p *Persister, i int) {
			var run uint32
			for b := range i / sh.Threads {
				run += t.Load32(word32(a.addr("tot"), b))
			}
			p.Store32(word32(a.addr("out"), i), run+t.Load32(word32(a.addr("part"), i)))
		}),
	}
	return a, nil
}

// PoWShape sizes the ProgPOW-like kernels: a DAG of Items 16-word items
// generated from a Cache-word cache in Rounds rounds each, searched by
// Nonces nonces of Loops DAG accesses each.
type PoWShape struct{ Items, Cache, Rounds, Nonces, Loops, Threads int }

func powShape(s Size) PoWShape {
	return bySize(s,
		PoWShape{Items: 8, Cache: 16, Rounds: 2, Nonces: 8, Loops: 2, Threads: 4},
		PoWShape{Items: 2048, Cache: 1024, Rounds: 8, Nonces: 2048, Loops: 16, Threads: 128},
		// Ethash mixes DATASET_PARENTS = 256 cache nodes into every DAG
		// item, and ProgPoW's search makes 64 DAG accesses per nonce
		// (PROGPOW_CNT_DAG).
		PoWShape{Items: 1 << 15, Cache: 1 << 14, Rounds: 256, Nonces: 1 << 15, Loops: 64, Threads: 256})
}

const powItem = 16 // words per DAG item

// The arithmetic of the ProgPOW-like kernels, in warp instructions (see
// aluCycles): mix64 is three 64-bit shift-and-xor steps (2 + 2 each) and
// two 64-bit multiplies (4 each); a remainder by a loop-invariant divisor
// is a multiply by its reciprocal (a 64-bit multiply-high, a multiply and
// a subtract: 10).
const (
	powMixInsts = 3*(2+2) + 2*4
	powModInsts = 4 + 4 + 2
	// powDAGInsts: the seed mix (a 64-bit add and mix64), per round a
	// remainder, an xor, mix64, the cache address and the loop (2 + 2 +
	// 2), and per word of the item a 64-bit add, mix64 and the store's
	// address.
	powDAGSeedInsts  = 2 + powMixInsts
	powDAGRoundInsts = powModInsts + 2 + powMixInsts + 2 + 2
	powDAGWordInsts  = 2 + powMixInsts + 1
	// powSearchInsts: the nonce's mix (an xor and mix64), per loop a
	// remainder for the item and the loop (2), and per access a 64-bit
	// shift and a mask for the word, a multiply-add and an add for the
	// address, an xor and mix64.
	powSearchSeedInsts   = 2 + powMixInsts
	powSearchLoopInsts   = powModInsts + 2
	powSearchAccessInsts = 2 + 1 + 1 + 1 + 2 + powMixInsts
)

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
// and stores the 64-bit result). Both charge their hashing as compute
// (powMixInsts and the constants after it).
func NewProgPoW(dag bool, sh PoWShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.Items <= 0 || sh.Cache <= 0 || sh.Rounds <= 0 || sh.Nonces <= 0 || sh.Loops <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: progpow %+v", ErrConfig, sh)
	}
	name := "pow-search"
	if dag {
		name = "pow-dag"
	}
	a, rng, err := newRSApp(name, s, seed, 0x90)
	if err != nil {
		return nil, err
	}
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
		a.rs.kernels = []rsKernel{perItem("ethash_calculate_dag_item", "ethash_calculate_dag_item", sh.Items, sh.Threads, func(t *scope.Thread, p *Persister, i int) {
			work(t, powDAGSeedInsts+sh.Rounds*powDAGRoundInsts+powItem*powDAGWordInsts)
			it := powDAGItem(i, func(k int) uint32 { return t.Load32(word32(a.addr("cache"), k)) }, sh)
			for j, v := range it {
				p.Store32(word32(a.addr("dag"), j*sh.Items+i), v)
			}
		})}
		return a, nil
	}
	out := make([]uint32, 2*sh.Nonces)
	for n := range sh.Nonces {
		h := powSearch(n, func(k int) uint32 { return items[k] }, sh)
		out[2*n], out[2*n+1] = uint32(h), uint32(h>>32)
	}
	a.arrays = []rsArray{{name: "dag", init: items}, {name: "out", want: out}}
	a.rs.kernels = []rsKernel{perItem("progpow_search", "progpow_search", sh.Nonces, sh.Threads, func(t *scope.Thread, p *Persister, n int) {
		work(t, powSearchSeedInsts+sh.Loops*(powSearchLoopInsts+4*powSearchAccessInsts))
		h := powSearch(n, func(k int) uint32 { return t.Load32(word32(a.addr("dag"), k)) }, sh)
		p.Store64(a.addr("out").Add(uint64(8*n)), h)
	})}
	return a, nil
}
