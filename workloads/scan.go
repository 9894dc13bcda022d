package workloads

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("scan", "per-block persistent scan (SBRP Table 2): 4 inputs per thread in registers, a Hillis–Steele scan of the thread sums over two PM copies, iterations handed between threads by block-scope release/acquire of PM flags, one DFence; native recovery",
		func(s Size) crash.Workload { return mustWorkload(NewScan(scanShape(s), pm.Block, 1)) })
	register("scan-narrow", "the scan with its block-scope release narrowed to thread scope: a scoped persistency bug",
		func(s Size) crash.Workload { return mustWorkload(NewScan(scanShape(s), pm.Thread, 1)) })
}

// ScanPerThread is the number of inputs each scan thread holds in registers.
const ScanPerThread = 4

func scanShape(s Size) scope.Grid {
	switch s {
	case Tiny:
		return scope.Grid{Blocks: 1, Threads: 4}
	case Quick:
		return scope.Grid{Blocks: 120, Threads: 128} // 4 blocks per SM: the persist window binds as at paper scale
	}
	// The SBRP artifact: 122,880 ints in arrays of 512, 128 threads per
	// block with 4 inputs each, so 240 blocks.
	return scope.Grid{Blocks: 240, Threads: 128}
}

// Scan is the SBRP paper's Scan (Table 2) in the shape of its artifact:
// an inclusive prefix sum of many independent arrays of 4·T ints, one per
// block of T threads. Each thread loads its 4 inputs from device memory,
// scans them in registers, and the block scans the T thread sums in PM
// with the Hillis–Steele algorithm: in iteration k (0-based) thread i adds
// the value of thread i-2^k after iteration k-1 to its own. The thread
// then adds the block scan to its 4 partial sums and writes them to device
// memory.
//
// The T values of a block live in two PM copies: iteration k reads copy
// k%2 and writes copy (k+1)%2. Each thread has a 4-byte PM flag holding
// 1 + the number of iterations it has completed. A thread acquires (block
// scope) the flag of thread i-2^k before reading its value, and before
// overwriting its own value of iteration k-2 it acquires the flag of the
// thread that read that value (thread i+2^(k-1)), waiting until that
// thread has completed iteration k-1. It then stores its value and
// releases its flag at RelScope, which must be block scope: the release
// orders the value before the other thread's later persists, so a reader
// that has moved on never needs an input that a crash lost. An OFence
// before each store orders the thread's own iterations: a value whose
// reader has not finished must not be lost while a later one survives. One DFence ends the scan.
//
// Recovery is native. A value word is 8 bytes, the value and the number
// of iterations that produced it, so it persists atomically with its tag;
// each thread resumes after its latest durable value, and a value read
// with an unexpected tag is reported as ErrInconsistent. (Under SBRP a
// released flag is not itself ordered before the acquirer's later
// persists, so flags alone cannot say where a thread stopped.)
//
// The artifact differs where its scan could not recover (its recovery
// kernel only touches the data): 4-byte values with the progress in the
// flags, a "consumed" mark the reader writes into the producer's flag as
// soon as it has read (before its own new value is durable), and no
// OFence.
type Scan struct {
	Grid     scope.Grid
	RelScope pm.Scope
	in       []uint32
}

// NewScan returns a scan over grid (ScanPerThread inputs per thread) with
// inputs drawn from seed; rel is the scope of the per-iteration release.
func NewScan(grid scope.Grid, rel pm.Scope, seed uint64) (*Scan, error) {
	if grid.Blocks <= 0 || grid.Threads <= 0 {
		return nil, fmt.Errorf("%w: scan grid %d x %d", ErrConfig, grid.Blocks, grid.Threads)
	}
	if !rel.Valid() {
		return nil, fmt.Errorf("%w: scan release scope %v", ErrConfig, rel)
	}
	s := &Scan{Grid: grid, RelScope: rel}
	rng := rand.New(rand.NewPCG(seed, 0x5ca9))
	for range ScanPerThread * grid.Total() {
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

// Setup creates the PM regions scan.data (two copies of each block's T
// value words) and scan.flags (one flag per thread), zeroed.
func (s *Scan) Setup(m *pm.Machine) error {
	n := s.Grid.Total()
	if _, err := m.CreateRegion("scan.data", uint64(2*8*n)); err != nil {
		return err
	}
	_, err := m.CreateRegion("scan.flags", uint64(4*n))
	return err
}

// scanLayout addresses a scan's PM and device-memory words.
type scanLayout struct {
	data, flags, in, out pm.Addr
	T                    int
	bad                  errWord
}

// value is the address of copy c of thread i's value in block b.
func (l scanLayout) value(b, c, i int) pm.Addr {
	return l.data.Add(uint64(8 * ((2*b+c)*l.T + i)))
}

// flag is the address of global thread g's flag.
func (l scanLayout) flag(g int) pm.Addr { return l.flags.Add(uint64(4 * g)) }

// kernel returns the scan kernel for machine m, with its inputs copied to
// fresh device memory and its outputs in fresh device memory.
// kernel returns the scan kernel. With sync its warps reconverge at
// SyncWarp where a SIMT GPU does (after each divergent branch); a recovery
// launch runs without: its lanes resume at different iterations, and a lane
// waiting for a flag of a lane of its own warp further ahead must not hold
// that lane at a warp barrier.
func (s *Scan) kernel(m *pm.Machine, sync bool) (scope.Kernel, scanLayout, error) {
	bases, err := openRegions(m, "scan.data", "scan.flags")
	if err != nil {
		return nil, scanLayout{}, err
	}
	n := len(s.in)
	l := scanLayout{data: bases[0], flags: bases[1], T: s.Grid.Threads}
	if l.in, err = m.Alloc(pm.DeviceMem, uint64(4*n)); err != nil {
		return nil, scanLayout{}, err
	}
	if l.out, err = m.Alloc(pm.DeviceMem, uint64(4*n)); err != nil {
		return nil, scanLayout{}, err
	}
	buf := make([]byte, 4*n)
	for k, v := range s.in {
		binary.LittleEndian.PutUint32(buf[4*k:], v)
	}
	if err := m.CopyIn(l.in, buf); err != nil {
		return nil, scanLayout{}, err
	}
	bad, err := newErrWord(m)
	if err != nil {
		return nil, scanLayout{}, err
	}
	l.bad = bad
	T, rel := s.Grid.Threads, s.RelScope
	return func(t *scope.Thread) {
		g, i, b := t.ID(), t.TID(), t.Block()
		// The thread's 4 inputs, scanned in registers.
		var in [2]uint64
		t.Gather64(in[:], l.in.Add(uint64(16*g)), l.in.Add(uint64(16*g+8)))
		lo, hi := in[0], in[1]
		x := [ScanPerThread]uint32{uint32(lo), uint32(lo >> 32), uint32(hi), uint32(hi >> 32)}
		for k := 1; k < ScanPerThread; k++ {
			x[k] += x[k-1]
		}
		sum := x[ScanPerThread-1]
		// Progress: the latest iteration count among the durable values.
		k := -1
		for c := range 2 {
			if w := t.Load64(l.value(b, c, i)); w != 0 && int(w>>32)-1 > k {
				k = int(w>>32) - 1
			}
		}
		if k < 0 {
			t.Store64(l.value(b, 0, i), scanWord(0, sum))
			k = 0
		}
		syncWarp := func() {
			if sync {
				t.SyncWarp()
			}
		}
		syncWarp()
		t.PRel(l.flag(g), uint32(k+1), rel) // scan: first release
		for ; 1<<k < T; k++ {
			d := 1 << k
			own := t.Load64(l.value(b, k%2, i))
			if scanTag(own) != k {
				bad.set(t)
			}
			v := uint32(own)
			if i >= d { // the value read: thread i-d's after iteration k-1
				for t.PAcq(l.flag(g-d), pm.Block) < uint32(k+1) {
				}
				other := t.Load64(l.value(b, k%2, i-d))
				if scanTag(other) != k {
					bad.set(t)
				}
				v += uint32(other)
			}
			syncWarp()               // a SIMT GPU reconverges the lanes after the branch
			if k >= 1 && i+d/2 < T { // the value overwritten was read by thread i+d/2 in iteration k-1
				for t.PAcq(l.flag(g+d/2), pm.Block) < uint32(k+1) { // scan: wait for the reader
				}
			}
			syncWarp()
			t.OFence() // scan: own iterations in order
			t.Store64(l.value(b, (k+1)%2, i), scanWord(k+1, v))
			t.PRel(l.flag(g), uint32(k+2), rel) // scan: release
		}
		t.DFence()
		excl := uint32(t.Load64(l.value(b, k%2, i))) - sum // the block's sum before this thread
		for j := range x {
			x[j] += excl
		}
		t.Store64(l.out.Add(uint64(16*g)), uint64(x[0])|uint64(x[1])<<32)
		t.Store64(l.out.Add(uint64(16*g+8)), uint64(x[2])|uint64(x[3])<<32)
	}, l, nil
}

// scanWord is a value word: v after k iterations. Tag k+1 is stored so
// that an all-zero word means "never written".
func scanWord(k int, v uint32) uint64 { return uint64(k+1)<<32 | uint64(v) }

// scanTag returns the iteration count of value word w (-1: never written).
func scanTag(w uint64) int { return int(w>>32) - 1 }

func (s *Scan) launch(m *pm.Machine, sync bool) (scanLayout, error) {
	k, l, err := s.kernel(m, sync)
	if err != nil {
		return l, err
	}
	if _, err := scope.Launch(m, s.Grid, k, scope.WithName("scan")); err != nil {
		return l, err
	}
	return l, l.bad.check(m, "a scan value was overwritten before its reader's value was durable")
}

// Run launches the scan.
func (s *Scan) Run(m *pm.Machine) error {
	_, err := s.launch(m, true)
	return err
}

// Recover resumes the scan from the durable flags and values.
func (s *Scan) Recover(m *pm.Machine) error {
	_, err := s.launch(m, false)
	return err
}

// Output runs the scan on m (set up already) and returns what it wrote to
// device memory: the inclusive scan of each block's 4·T inputs.
func (s *Scan) Output(m *pm.Machine) ([]uint32, error) {
	l, err := s.launch(m, true)
	if err != nil {
		return nil, err
	}
	words, err := readWords(m, l.out, len(s.in), 4)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, len(words))
	for k, w := range words {
		out[k] = uint32(w)
	}
	return out, nil
}

// Want returns the correct output: the inclusive scan of each block's
// inputs.
func (s *Scan) Want() []uint32 {
	out := make([]uint32, len(s.in))
	per := ScanPerThread * s.Grid.Threads
	for b := range s.Grid.Blocks {
		var sum uint32
		for k := b * per; k < (b+1)*per; k++ {
			sum += s.in[k]
			out[k] = sum
		}
	}
	return out
}

// Check requires every thread's value of the last iteration to be the
// inclusive scan of the thread sums, tagged with that iteration.
func (s *Scan) Check(m *pm.Machine) error {
	bases, err := openRegions(m, "scan.data")
	if err != nil {
		return err
	}
	T, L := s.Grid.Threads, s.Iterations()
	l := scanLayout{data: bases[0], T: T}
	want := s.Want()
	for b := range s.Grid.Blocks {
		words, err := readWords(m, l.value(b, L%2, 0), T, 8)
		if err != nil {
			return err
		}
		for i, w := range words {
			g := b*T + i
			if v := want[ScanPerThread*(g+1)-1]; scanTag(w) != L || uint32(w) != v {
				return fmt.Errorf("%w: scan thread %d: value %d after %d iterations, want %d after %d",
					ErrInconsistent, g, uint32(w), scanTag(w), v, L)
			}
		}
	}
	return nil
}
