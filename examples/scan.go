package examples

import (
	"fmt"
	"math/bits"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("scan", "per-block persistent inclusive scan (SBRP Table 2): iterations ordered inside a block by block-scope release/acquire; native recovery",
		func(s Size) crash.Workload { return mustWorkload(NewScan(scanShape(s), pm.Block, 1)) })
	register("scan-narrow", "the scan with its block-scope release narrowed to thread scope: a scoped persistency bug",
		func(s Size) crash.Workload { return mustWorkload(NewScan(scanShape(s), pm.Thread, 1)) })
}

func scanShape(s Size) scope.Grid {
	switch s {
	case Tiny:
		return scope.Grid{Blocks: 1, Threads: 4}
	case Quick:
		return scope.Grid{Blocks: 3, Threads: 32}
	}
	// 128 threads per block (the SBRP artifact) and about 120K ints.
	return scope.Grid{Blocks: 938, Threads: 128}
}

// scanNone is the tag of a buffer word no iteration has written.
const scanNone = 0xFFFFFFFF

// Scan computes an inclusive prefix sum of many independent arrays, one per
// block with one element per thread, in place in PM (SBRP Table 2,
// "Scan"). It is the Hillis–Steele scan: in iteration it (1..L) thread i
// adds the value of thread i-2^(it-1) from iteration it-1 to its own.
//
// Every element is an aligned 8-byte word holding the value and the
// iteration that wrote it, so it persists atomically with its tag. The
// iterations alternate between two PM buffers: iteration it writes buffer
// it%2, overwriting the iteration it-2 value that threads i and
// i+2^(it-2) read in iteration it-1. A thread therefore waits, by a
// persist acquire of the other thread's flag, both for thread i-2^(it-1)
// to finish iteration it-1 (the value it reads) and for thread
// i+2^(it-2) to finish iteration it-1 (the reader of the value it
// overwrites). The flags are released at RelScope, which must be block
// scope: the acquire orders the other thread's persists before the
// overwrite, so that a crash never keeps a value whose overwritten input
// another thread still needs to recompute. An OFence orders each thread's
// own iterations.
//
// Recovery is native: each thread resumes after the latest iteration whose
// value of its element is durable; a value tagged with an unexpected
// iteration is reported as ErrInconsistent.
type Scan struct {
	Grid     scope.Grid
	RelScope pm.Scope
	in       []uint32
}

// NewScan returns a scan over grid (one element per thread) with inputs
// drawn from seed; rel is the scope of the per-iteration release.
func NewScan(grid scope.Grid, rel pm.Scope, seed uint64) (*Scan, error) {
	if grid.Blocks <= 0 || grid.Threads <= 0 {
		return nil, fmt.Errorf("%w: scan grid %d x %d", ErrConfig, grid.Blocks, grid.Threads)
	}
	if !rel.Valid() {
		return nil, fmt.Errorf("%w: scan release scope %v", ErrConfig, rel)
	}
	s := &Scan{Grid: grid, RelScope: rel}
	rng := rand.New(rand.NewPCG(seed, 0x5ca9))
	for range grid.Total() {
		s.in = append(s.in, uint32(rng.IntN(1000)))
	}
	return s, nil
}

// Name returns "scan" or "scan(<scope>)" for a non-block release scope.
func (s *Scan) Name() string {
	if s.RelScope == pm.Block {
		return "scan"
	}
	return fmt.Sprintf("scan(%s)", s.RelScope)
}

// Iterations returns the number of scan iterations, ceil(log2(threads)).
func (s *Scan) Iterations() int {
	if s.Grid.Threads <= 1 {
		return 0
	}
	return bits.Len(uint(s.Grid.Threads - 1))
}

// Setup creates the region scan.buf: buffer 0 holds the inputs tagged
// iteration 0, buffer 1 is untagged.
func (s *Scan) Setup(m *pm.Machine) error {
	n := s.Grid.Total()
	base, err := createFilled(m, "scan.buf", 16*n, 0xFF)
	if err != nil {
		return err
	}
	b := make([]byte, 8*n)
	for i, v := range s.in {
		pm.PutLE(b[8*i:8*i+8], uint64(v))
	}
	return m.CopyIn(base, b)
}

// kernel returns the scan kernel for machine m (its flags live in fresh
// device memory) and the word it reports inconsistencies in.
func (s *Scan) kernel(m *pm.Machine) (scope.Kernel, errWord, error) {
	bases, err := openRegions(m, "scan.buf")
	if err != nil {
		return nil, errWord{}, err
	}
	n, T, L := s.Grid.Total(), s.Grid.Threads, s.Iterations()
	bufs := [2]pm.Addr{bases[0], bases[0].Add(uint64(8 * n))}
	flags, err := m.Alloc(pm.DeviceMem, uint64(4*n))
	if err != nil {
		return nil, errWord{}, err
	}
	bad, err := newErrWord(m)
	if err != nil {
		return nil, errWord{}, err
	}
	rel := s.RelScope
	word := func(buf, i int) pm.Addr { return bufs[buf].Add(uint64(8 * i)) }
	flag := func(i int) pm.Addr { return flags.Add(uint64(4 * i)) }
	return func(t *scope.Thread) {
		g, i := t.ID(), t.TID()
		first := g - i // the block's first element
		// Progress: the latest iteration whose value of this element is
		// durable. A flag holds 1 + the latest iteration completed.
		h := 0
		for buf := range 2 {
			if tag := uint32(t.Load64(word(buf, g)) >> 32); tag != scanNone && int(tag) > h {
				h = int(tag)
			}
		}
		t.PRel(flag(g), uint32(h+1), rel)
		for it := h + 1; it <= L; it++ {
			d := 1 << (it - 1)
			if i >= d { // the value read: thread i-d's iteration it-1
				for t.PAcq(flag(g-d), pm.Block) < uint32(it) {
				}
			}
			if it >= 2 { // the value overwritten was read by thread i+2^(it-2)
				if j := i + 1<<(it-2); j < T {
					for t.PAcq(flag(first+j), pm.Block) < uint32(it) { // scan: wait for the reader
					}
				}
			}
			own := t.Load64(word((it-1)%2, g))
			if uint32(own>>32) != uint32(it-1) {
				bad.set(t)
			}
			v := uint32(own)
			if i >= d {
				other := t.Load64(word((it-1)%2, g-d))
				if uint32(other>>32) != uint32(it-1) {
					bad.set(t)
				}
				v += uint32(other)
			}
			t.Store64(word(it%2, g), uint64(it)<<32|uint64(v))
			t.OFence()                         // this iteration's value before the next one's
			t.PRel(flag(g), uint32(it+1), rel) // scan: release
		}
	}, bad, nil
}

func (s *Scan) launch(m *pm.Machine) error {
	k, bad, err := s.kernel(m)
	if err != nil {
		return err
	}
	if _, err := scope.Launch(m, s.Grid, k, scope.WithName("scan")); err != nil {
		return err
	}
	return bad.check(m, "a scan input was overwritten before its reader's value was durable")
}

// Run launches the scan.
func (s *Scan) Run(m *pm.Machine) error { return s.launch(m) }

// Recover resumes the scan from the durable buffers.
func (s *Scan) Recover(m *pm.Machine) error { return s.launch(m) }

// Want returns the correct result: the inclusive scan of each block's
// inputs.
func (s *Scan) Want() []uint32 {
	out := make([]uint32, len(s.in))
	for b := range s.Grid.Blocks {
		var sum uint32
		for i := range s.Grid.Threads {
			k := b*s.Grid.Threads + i
			sum += s.in[k]
			out[k] = sum
		}
	}
	return out
}

// Check requires every element to hold its scan value, tagged with the last
// iteration.
func (s *Scan) Check(m *pm.Machine) error {
	bases, err := openRegions(m, "scan.buf")
	if err != nil {
		return err
	}
	n, L := s.Grid.Total(), s.Iterations()
	words, err := readWords(m, bases[0].Add(uint64(8*n*(L%2))), n, 8)
	if err != nil {
		return err
	}
	want := s.Want()
	for i, w := range words {
		if uint32(w>>32) != uint32(L) || uint32(w) != want[i] {
			return fmt.Errorf("scan element %d: value %d tag %d, want %d tag %d", i, uint32(w), int32(w>>32), want[i], L)
		}
	}
	return nil
}
