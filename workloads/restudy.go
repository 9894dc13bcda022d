package workloads

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// This file is the common part of the persistency re-study's kernels
// (restudy_*.go): a kernel is written once against a per-thread Persister,
// and the scheme (Scheme: SP_wt, EP_K, EP_C_clwb, ...) decides
// where the write-backs, fences and PCommits go.
//
// Every re-study workload is a sequence of idempotent kernels with durable
// progress markers in PM: one per kernel (written after the kernel by a
// one-thread epilogue launch), one per block under CTA- and loop-level
// schemes (written by the block's thread 0 once the block's persists are
// durable), and a per-block iteration count under loop-level schemes. A
// marker is the unit's one commit point. Recovery re-runs every kernel
// whose marker is not durable, and in it every block whose marker is not;
// the invariant is that a durable marker's unit is durable, so that the
// recovered output equals the reference computed in Go. A scheme too weak
// for the kernel (the nvm baseline, a PCT machine without PCommit, an epoch
// without its fence) lets a marker persist before its unit, which the crash
// checker finds.

// Persister places one thread's PM stores and epoch ends by a scheme. Make
// one per thread at the start of the kernel (rsRun does) and use it for
// every PM store the kernel must make durable.
type Persister struct {
	S     Scheme
	T     *scope.Thread
	lines []pm.Addr // lines written since the last epoch end (CLWB schemes)
	log   *rsLog    // undo logging (Undo schemes, unless skipped by +idem), else nil
}

// lineOf is the line a GPU CLWB writes back.
func lineOf(a pm.Addr) pm.Addr { return a &^ 127 }

// after places what the scheme does right after a PM store to a.
func (p *Persister) after(a pm.Addr) {
	s, t := p.S, p.T
	switch s.Gran {
	case PerStore:
		if s.Mech == CLWB {
			t.CLWB(a)
		}
		p.fence()
	case PerCTA, PerLoop:
		if s.Mech == CLWB {
			l := lineOf(a)
			if n := len(p.lines); n == 0 || p.lines[n-1] != l && (n > 32 || !slices.Contains(p.lines, l)) {
				p.lines = append(p.lines, l)
			}
		}
	}
}

// Persist makes the PM word at a, which the thread has stored, durable
// before the thread goes on, under every scheme but the nvm baseline: a
// kernel calls it where its own recovery needs an order inside an epoch
// (a displaced Mega-KV entry's copy before the overwrite of its old slot).
// Under the strict schemes every store is durable when it returns already.
func (p *Persister) Persist(a pm.Addr) {
	switch p.S.Gran {
	case Baseline, PerStore:
		return
	}
	p.T.CLWB(a)
	p.fence()
}

// fence waits for the thread's write-backs and, on a PCT machine, commits
// them.
func (p *Persister) fence() {
	p.T.MemBar()
	if p.S.PCT {
		p.T.PCommit()
		p.T.MemBar()
	}
}

// wt reports whether PM stores are write-through stores.
func (p *Persister) wt() bool {
	switch p.S.Gran {
	case PerStore, PerCTA, PerLoop:
		return p.S.Mech == WT
	}
	return false
}

// Store16 stores v at a (2-byte aligned, in PM) as the scheme requires.
func (p *Persister) Store16(a pm.Addr, v uint16) { p.store(a, 2, uint64(v)) }

// Store32 stores v at a (4-byte aligned, in PM) as the scheme requires.
func (p *Persister) Store32(a pm.Addr, v uint32) { p.store(a, 4, uint64(v)) }

// Store64 stores v at a (8-byte aligned, in PM) as the scheme requires.
func (p *Persister) Store64(a pm.Addr, v uint64) { p.store(a, 8, v) }

func (p *Persister) store(a pm.Addr, size int, v uint64) {
	if p.log != nil {
		p.logBefore(a, size)
	}
	switch wt := p.wt(); {
	case wt && size == 2:
		p.T.StoreWT16(a, uint16(v))
	case wt && size == 4:
		p.T.StoreWT32(a, uint32(v))
	case wt:
		p.T.StoreWT64(a, v)
	case size == 2:
		p.T.Store16(a, uint16(v))
	case size == 4:
		p.T.Store32(a, uint32(v))
	default:
		p.T.Store64(a, v)
	}
	p.after(a)
}

// writeBack64 stores v at a and sends it towards PM: a write-through
// store if wt, else a store and a CLWB of its line. It does not wait.
func writeBack64(t *scope.Thread, wt bool, a pm.Addr, v uint64) {
	if wt {
		t.StoreWT64(a, v)
		return
	}
	t.Store64(a, v)
	t.CLWB(a)
}

// CAS64 is an atomic compare-and-swap of the 8-byte PM word at a at
// device scope, made durable as the scheme requires. An atomic executes at
// the L2, so no scheme can write it through: under write-through schemes
// its line is written back with a CLWB instead, like the CLWB schemes do.
func (p *Persister) CAS64(a pm.Addr, old, nv uint64) uint64 {
	if p.log != nil && p.T.Load64(a) == old {
		p.logBefore(a, 8)
	}
	got := p.T.AtomicCAS64(a, old, nv, pm.Device)
	if got != old {
		return got
	}
	switch p.S.Gran {
	case PerStore:
		p.T.CLWB(a)
		p.fence()
	case PerCTA, PerLoop:
		if p.S.Mech != L2WB {
			p.lines = append(p.lines, lineOf(a))
		}
	}
	return got
}

// EndEpoch ends a block-wide epoch: every thread of the block calls it
// (it contains SyncThreads). Under a block-granularity scheme g (PerCTA,
// or PerLoop for a loop epoch) the block's persists are written back and
// fenced, then thread 0 stores value to the marker at mark and makes it
// durable; under other schemes it only synchronises the block.
func (p *Persister) EndEpoch(g Granularity, mark pm.Addr, value uint64) {
	s, t := p.S, p.T
	if s.Gran != g {
		t.SyncThreads()
		return
	}
	if s.Mech != L2WB {
		for _, l := range p.lines {
			t.CLWB(l)
		}
		p.lines = p.lines[:0]
		t.MemBar()
	}
	t.SyncThreads()
	if t.TID() == 0 {
		if s.Mech == L2WB {
			t.L2WB()
			t.MemBar()
		}
		if s.PCT {
			t.PCommit()
			t.MemBar()
		}
		writeBack64(t, s.Mech == WT, mark, value)
		p.fence()
	}
	t.SyncThreads()
	if p.log != nil {
		p.log.tag = 0 // the next epoch logs afresh
	}
}

// rsKernel is one kernel of a re-study workload.
type rsKernel struct {
	name string
	// label is the re-study's name for the kernel (histo2, sad1, ...): the
	// row its time is reported under. Launches of the same kernel (the
	// time steps of a stencil) share a label and add up.
	label string
	grid  scope.Grid
	// body runs one thread; it stores PM through p and, if it has a main
	// loop, ends each iteration with p.EndEpoch(PerLoop, ...)
	// (see rsState.loopMark). It must be idempotent: a block re-run after
	// a crash must produce the same PM contents.
	body func(t *scope.Thread, p *Persister)
	// shared bytes of shared memory per block.
	shared int
	// idempotent declares that re-running the kernel from any crash state
	// gives its result without rolling back: "+idem" schemes skip its undo
	// log (see restudy_undo.go).
	idempotent bool
}

// rsState is a re-study workload's scheme, kernels and marker region.
type rsState struct {
	scheme  Scheme
	prefix  string
	kernels []rsKernel
	marks   pm.Addr // region <prefix>.marks: per kernel, a kernel marker then one per block
	loops   pm.Addr // region <prefix>.loops: per kernel and block, the last durable loop iteration + 1
	// undoWords is the number of PM words the kernels may overwrite, in
	// ranges (set when the machine's regions are opened); undo holds a
	// slot for each (region <prefix>.undo, Undo schemes only).
	undoWords int
	ranges    []rsRange
	undo      pm.Addr
	// launches counts the launches of the last Run or Recover: each
	// kernel's and its epilogue's.
	launches int
	// repair, if set, mends on the host what re-running the kernels
	// cannot, after the rollback of a recovery and before its kernels.
	repair func(m *pm.Machine) error
	// times holds the simulated cycles of each kernel label in the last
	// Run or Recover, in the order the labels first ran.
	times []KernelCycles
}

// rsSetup creates the marker regions (zero: nothing done).
func (r *rsState) setup(m *pm.Machine) error {
	if !r.scheme.Valid() {
		return fmt.Errorf("%w: re-study scheme %+v", ErrConfig, r.scheme)
	}
	n := 0
	for _, k := range r.kernels {
		n += 1 + k.grid.Blocks
	}
	var err error
	if r.marks, err = createFilled(m, r.prefix+".marks", 8*n, 0); err != nil {
		return err
	}
	if r.loops, err = createFilled(m, r.prefix+".loops", 8*n, 0); err != nil {
		return err
	}
	if r.scheme.Undo && r.undoWords > 0 {
		r.undo, err = createFilled(m, r.prefix+".undo", 8*r.undoWords, 0)
	}
	return err
}

// writable records the writable arrays of the machine being run, in a
// fixed order; their words must add up to undoWords.
func (r *rsState) writable(rs ...rsRange) error {
	r.ranges = append(r.ranges[:0], rs...)
	n := 0
	for _, rg := range rs {
		n += rg.words
	}
	if n != r.undoWords {
		return fmt.Errorf("%w: %s: writable arrays of %d words, want %d", ErrConfig, r.prefix, n, r.undoWords)
	}
	return nil
}

// open finds the marker regions after a reopen.
func (r *rsState) open(m *pm.Machine) error {
	b, err := openRegions(m, r.prefix+".marks", r.prefix+".loops")
	if err != nil {
		return err
	}
	r.marks, r.loops = b[0], b[1]
	if r.scheme.Undo && r.undoWords > 0 {
		u, err := openRegions(m, r.prefix+".undo")
		if err != nil {
			return err
		}
		r.undo = u[0]
	}
	return nil
}

// kernelMark returns the address of kernel k's marker; blockMark that of
// block b of kernel k; loopMark that of its loop count.
func (r *rsState) kernelMark(k int) pm.Addr {
	off := 0
	for i := range k {
		off += 1 + r.kernels[i].grid.Blocks
	}
	return r.marks.Add(uint64(8 * off))
}

func (r *rsState) blockMark(k, b int) pm.Addr { return r.kernelMark(k).Add(uint64(8 * (1 + b))) }

func (r *rsState) loopMark(k, b int) pm.Addr {
	return r.loops.Add(uint64(r.blockMark(k, b) - r.marks))
}

// run launches every kernel whose marker is not durable (all of them on a
// fresh machine), each followed by its epilogue. Blocks whose marker is
// set return at once. A recovery first rolls back uncommitted undo-logged
// epochs, then repairs.
func (r *rsState) run(m *pm.Machine, recovery bool) error {
	r.launches = 0
	r.times = r.times[:0]
	for _, k := range r.kernels {
		r.timed(k.label, 0)
	}
	if r.scheme.Undo {
		if err := r.rollback(m); err != nil {
			return err
		}
	}
	if recovery && r.repair != nil {
		if err := r.repair(m); err != nil {
			return err
		}
	}
	for k := range r.kernels {
		v, err := m.Memory().Load(r.kernelMark(k), 8)
		if err != nil {
			return err
		}
		if v != 0 {
			continue
		}
		t0 := now(m)
		if err := r.launch(m, k); err != nil {
			return err
		}
		elapsed := now(m) - t0
		if r.scheme.Gran != PerKernel {
			// The epilogue launch that writes the kernel's marker is this
			// package's recovery scaffolding, not part of the re-study's
			// kernel: its launch latency is not the kernel's. Under
			// kernel-level epochs it stands for the scheme's own L2WB
			// kernel, whose launch the re-study's EP_K pays.
			elapsed -= min(elapsed, launchLatency(m))
		}
		r.timed(r.kernels[k].label, elapsed)
	}
	return nil
}

// launchLatency returns the cycles a launch on m waits before its first
// instruction, or 0 for a backend without a clock.
func launchLatency(m *pm.Machine) uint64 {
	if l, ok := pm.As[interface{ LaunchLatency() uint64 }](m.Backend()); ok {
		return l.LaunchLatency()
	}
	return 0
}

// now returns the simulated cycle of m's backend, or 0 for a backend
// without a clock (the functional one).
func now(m *pm.Machine) uint64 {
	if c, ok := m.Backend().(interface{ Now() uint64 }); ok {
		return c.Now()
	}
	return 0
}

// timed adds cycles to the time of the kernel labelled label.
func (r *rsState) timed(label string, cycles uint64) {
	for i := range r.times {
		if r.times[i].Name == label {
			r.times[i].Cycles += cycles
			return
		}
	}
	r.times = append(r.times, KernelCycles{Name: label, Cycles: cycles})
}

// KernelCycles is the simulated time of one of a re-study workload's
// kernels in the workload's last Run or Recover: from the cycle its launch
// began to the cycle the backend had drained it and its epilogue (the
// launch that writes the kernel's durable marker, and under kernel-level
// epochs its L2WB), so that a scheme's end-of-kernel cost is the kernel's.
// The epilogue's launch latency counts only under kernel-level epochs,
// where it stands for the re-study's extra L2WB kernel; under the other
// schemes the epilogue exists only for this package's recovery markers.
type KernelCycles struct {
	// Name is the re-study's name for the kernel (histo2, sad1, ...).
	Name string
	// Cycles is 0 on a backend without a clock, and for a kernel a
	// recovery did not need to re-run.
	Cycles uint64
}

func (r *rsState) launch(m *pm.Machine, k int) error {
	kn := r.kernels[k]
	s := r.scheme
	opts := []scope.Option{scope.WithName(r.prefix + "." + kn.name)}
	if kn.shared > 0 {
		opts = append(opts, scope.WithShared(kn.shared))
	}
	_, err := scope.Launch(m, kn.grid, func(t *scope.Thread) {
		mark := r.blockMark(k, t.Block())
		if t.Load64(mark) != 0 {
			return // the block is durable: nothing to redo
		}
		p := &Persister{S: s, T: t}
		if s.Undo && r.undoWords > 0 && !(s.Idem && kn.idempotent) {
			p.log = &rsLog{r: r, mark: int(mark-r.marks) / 8}
			switch s.Gran {
			case PerKernel:
				p.log.mark = int(r.kernelMark(k)-r.marks) / 8
			case PerLoop:
				p.log.loop = r.loopMark(k, t.Block())
			}
		}
		kn.body(t, p)
		p.EndEpoch(PerCTA, mark, 1)
		if s.Gran == PerLoop {
			// The block's last loop epoch ended inside the body; the
			// block marker is its final commit.
			p.EndEpoch(PerLoop, mark, 1)
		}
	}, opts...)
	if err != nil {
		return err
	}
	r.launches++
	// The epilogue: the kernel's marker, after an L2WB for kernel-level
	// epochs.
	_, err = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		km := r.kernelMark(k)
		switch s.Gran {
		case Baseline:
			t.Store64(km, 1)
			return
		case PerKernel:
			t.L2WB()
			t.MemBar()
			if s.PCT {
				t.PCommit()
				t.MemBar()
			}
			writeBack64(t, false, km, 1)
		default:
			writeBack64(t, s.Mech == WT, km, 1)
		}
		t.MemBar()
		if s.PCT {
			t.PCommit()
			t.MemBar()
		}
	}, scope.WithName(r.prefix+"."+kn.name+".epilogue"))
	r.launches++
	return err
}

// readU32s reads n 4-byte words at a.
func readU32s(m *pm.Machine, a pm.Addr, n int) ([]uint32, error) {
	w, err := readWords(m, a, n, 4)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, n)
	for i, v := range w {
		out[i] = uint32(v)
	}
	return out, nil
}

// compareU32 returns an ErrInconsistent error naming the first index where
// got differs from want.
func compareU32(what string, got, want []uint32) error {
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("%w: %s[%d] = %d, want %d", ErrInconsistent, what, i, got[i], want[i])
		}
	}
	return nil
}

// RestudyWorkload is a re-study kernel workload: a crash.Workload whose
// kernels follow a persistency scheme.
type RestudyWorkload interface {
	crash.Workload
	// Scheme returns the scheme the kernels follow; check crash states
	// under Scheme().Model().
	Scheme() Scheme
	// Kernels returns the time of each kernel in the last Run or Recover,
	// in the order of RestudyInfo.Kernels.
	Kernels() []KernelCycles
}

// RestudyInfo describes one re-study workload.
type RestudyInfo struct {
	Name string
	// Kernels are the workload's kernels, each a row of the re-study's
	// figures, in the order they run.
	Kernels []RestudyKernel
	// Recommended is the scheme the workload is registered and crash-checked
	// under: the re-study's Table V recommendation for its main kernel.
	Recommended Scheme
	make        func(Size, Scheme) (RestudyWorkload, error)
}

// Categories returns the categories of the workload's kernels, each once,
// in the order of Kernels.
func (w RestudyInfo) Categories() []string {
	var out []string
	for _, k := range w.Kernels {
		if !slices.Contains(out, k.Category) {
			out = append(out, k.Category)
		}
	}
	return out
}

// RestudyKernel is one kernel of a re-study workload.
type RestudyKernel struct {
	// Name is the re-study's name for the kernel (Table II: histo2,
	// mri-gridding-scan1, sad1, ...; Tables III and IV for Mega-KV and
	// ProgPOW), or the workload's name for a kernel the re-study does not
	// have.
	Name string
	// Function is the name of the CUDA kernel it stands for.
	Function string
	// Category is the re-study's class: "S" (short-running kernels), "LS"
	// (long-running, short CTAs), "LL" (long-running, long CTAs), or the
	// application of its Mega-KV ("KV", short kernels) and ProgPOW ("PoW",
	// long kernels with short CTAs) figures.
	Category string
}

// restudyPaperKernels are the kernels of the re-study's Tables II, III and
// IV (its Figures 1 to 6 and Table V).
var restudyPaperKernels = []string{
	"bfs_v1", "bfs", "histo1", "histo2", "histo4", "mri-gridding-scan1", "mri-gridding-scan2",
	"mri-gridding-sort1", "mri-gridding-sort2", "mri-q1", "mri-q2", "sad2", "sad1", "lbm", "stencil", "spmv", "sgemm",
	"search", "insert", "delete", "ethash_calculate_dag_item", "progpow_search",
}

// InPaper reports whether the kernel stands for one of the re-study's
// (Tables II to IV): the averages compared with the re-study's are taken
// over those alone, not over a kernel of ours it does not have (the
// non-idempotent accumulation).
func (k RestudyKernel) InPaper() bool { return slices.Contains(restudyPaperKernels, k.Name) }

var restudyWorkloads = []RestudyInfo{
	{"histo", []RestudyKernel{{"histo1", "histo_prescan_kernel", "S"}, {"histo2", "histo_intermediates_kernel", "S"}, {"histo3", "histo_main_kernel", "S"}, {"histo4", "histo_final_kernel", "S"}},
		KernelSchemes()[0], func(s Size, sc Scheme) (RestudyWorkload, error) { return NewHisto(histoShape(s), sc, 1) }},
	{"stencil", []RestudyKernel{{"stencil", "naive_kernel", "LS"}}, CTASchemes()[2],
		func(s Size, sc Scheme) (RestudyWorkload, error) {
			return NewStencil(stencilShape(s), sc, 1)
		}},
	{"bfs", []RestudyKernel{{"bfs", "BFS_in_GPU_kernel", "LL"}}, LoopSchemes()[1],
		func(s Size, sc Scheme) (RestudyWorkload, error) { return NewBFS(bfsShape(s), sc, 1) }},
	{"sgemm", []RestudyKernel{{"sgemm", "mysgemmNT", "LS"}}, CTASchemes()[2],
		func(s Size, sc Scheme) (RestudyWorkload, error) { return NewSGEMM(sgemmShape(s), sc, 1) }},
	{"spmv", []RestudyKernel{{"spmv", "spmv_jds", "LS"}}, CTASchemes()[0],
		func(s Size, sc Scheme) (RestudyWorkload, error) { return NewSpMV(spmvShape(s), sc, 1) }},
	{"lbm", []RestudyKernel{{"lbm", "performStreamCollide_kernel", "LS"}}, CTASchemes()[0],
		func(s Size, sc Scheme) (RestudyWorkload, error) { return NewLBM(lbmShape(s), sc, 1) }},
	{"sad", []RestudyKernel{{"sad1", "mb_sad_calc", "LS"}, {"sad2", "larger_sad_calc_8", "S"}}, CTASchemes()[0],
		func(s Size, sc Scheme) (RestudyWorkload, error) { return NewSAD(sadShape(s), sc, 1) }},
	{"accumulate", []RestudyKernel{{"accumulate", "accumulate", "LS"}}, UndoSchemes()[4],
		func(s Size, sc Scheme) (RestudyWorkload, error) {
			return NewAccumulate(accumulateShape(s), sc, 1, false)
		}},
	{"mri-q", []RestudyKernel{{"mri-q1", "ComputePhiMag_GPU", "S"}}, KernelSchemes()[0],
		func(s Size, sc Scheme) (RestudyWorkload, error) { return NewMRIQ(mriqShape(s), sc, 1) }},
	{"scan", []RestudyKernel{{"mri-gridding-scan1", "scan_L1_kernel", "S"}, {"mri-gridding-scan2", "scan_inter1_kernel", "S"}}, StrictSchemes()[1],
		func(s Size, sc Scheme) (RestudyWorkload, error) { return NewRSScan(rsScanShape(s), sc, 1) }},
	{"kv-search", []RestudyKernel{{"search", "hash_search", "KV"}}, KernelSchemes()[0],
		megaKVMaker(KVSearch)},
	{"kv-insert", []RestudyKernel{{"insert", "hash_insert_cuckoo", "KV"}}, KernelSchemes()[0],
		megaKVMaker(KVInsert)},
	{"kv-delete", []RestudyKernel{{"delete", "hash_delete", "KV"}}, KernelSchemes()[0],
		megaKVMaker(KVDelete)},
	{"pow-dag", []RestudyKernel{{"ethash_calculate_dag_item", "ethash_calculate_dag_item", "PoW"}}, CTASchemes()[0],
		progPoWMaker(true)},
	{"pow-search", []RestudyKernel{{"progpow_search", "progpow_search", "PoW"}}, CTASchemes()[0],
		progPoWMaker(false)},
}

// megaKVMaker makes the Mega-KV kernel op's workload at a size.
func megaKVMaker(op int) func(Size, Scheme) (RestudyWorkload, error) {
	return func(s Size, sc Scheme) (RestudyWorkload, error) {
		return NewMegaKV(op, kvShape(op, s), sc, 1)
	}
}

// progPoWMaker makes a ProgPOW kernel's workload at a size.
func progPoWMaker(dag bool) func(Size, Scheme) (RestudyWorkload, error) {
	return func(s Size, sc Scheme) (RestudyWorkload, error) {
		return NewProgPoW(dag, powShape(s), sc, 1)
	}
}

func init() {
	for _, w := range restudyWorkloads {
		register("restudy-"+w.Name, fmt.Sprintf("persistency re-study %s kernels of %s under %v (its Table V recommendation); check with -model %v", strings.Join(w.Categories(), "+"), w.Name, w.Recommended, w.Recommended.Model()),
			func(s Size) crash.Workload { return mustWorkload(w.make(s, w.Recommended)) })
	}
}

// RestudyWorkloads lists the re-study workloads in a fixed order.
func RestudyWorkloads() []RestudyInfo { return slices.Clone(restudyWorkloads) }

// NewRestudy returns the re-study workload called name at size under
// scheme s.
func NewRestudy(name string, size Size, s Scheme) (RestudyWorkload, error) {
	for _, w := range restudyWorkloads {
		if w.Name == name {
			return w.make(size, s)
		}
	}
	return nil, fmt.Errorf("%w: re-study workload %q", ErrUnknown, name)
}

// createU32s creates the PM region name holding vals (host-written, so
// durable at once) and returns its base.
func createU32s(m *pm.Machine, name string, vals []uint32) (pm.Addr, error) {
	base, err := createFilled(m, name, 4*max(len(vals), 1), 0)
	if err != nil {
		return 0, err
	}
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		pm.PutLE(b[4*i:4*i+4], uint64(v))
	}
	return base, m.CopyIn(base, b)
}

// word32 is the address of 4-byte word i of an array at base.
func word32(base pm.Addr, i int) pm.Addr { return base.Add(uint64(4 * i)) }

// rsArray is a PM array of 32-bit words of a re-study app: its initial
// contents (host-written) and, for an output, the reference result.
type rsArray struct {
	name string
	init []uint32 // nil: zero-filled, of len(want) words
	want []uint32 // nil: not checked (an input)
	rw   bool     // kernels overwrite it (implied for an array without init)
}

func (ar *rsArray) writable() bool { return ar.rw || ar.init == nil }

func (ar *rsArray) words() int {
	if ar.init != nil {
		return len(ar.init)
	}
	return len(ar.want)
}

// rsApp is a re-study workload made of PM arrays and kernels; the kernels
// find the arrays with addr and device-memory scratch with dev.
type rsApp struct {
	name   string
	rs     rsState
	arrays []rsArray
	devs   []int // bytes of each device-memory scratch area, allocated per Run
	base   map[string]pm.Addr
	dev    []pm.Addr
	// check, if set, is a further output check after the arrays'.
	check func(m *pm.Machine) error
}

// newRSApp returns the app name under scheme s, and the generator of its
// inputs: a PCG of seed on the app's own stream.
func newRSApp(name string, s Scheme, seed, stream uint64) (*rsApp, *rand.Rand, error) {
	if !s.Valid() {
		return nil, nil, fmt.Errorf("%w: scheme %+v", ErrConfig, s)
	}
	return &rsApp{name: name, rs: rsState{scheme: s, prefix: name}, base: map[string]pm.Addr{}}, rand.New(rand.NewPCG(seed, stream)), nil
}

// Name returns "<app>/<scheme>".
func (a *rsApp) Name() string { return a.name + "/" + a.rs.scheme.String() }

// Scheme returns the persistency scheme the kernels follow.
func (a *rsApp) Scheme() Scheme { return a.rs.scheme }

// Kernels returns the time of each kernel in the last Run or Recover.
func (a *rsApp) Kernels() []KernelCycles { return slices.Clone(a.rs.times) }

func (a *rsApp) addr(name string) pm.Addr { return a.base[name] }

// Setup creates the arrays (regions <app>.<array>) and the markers.
func (a *rsApp) Setup(m *pm.Machine) error {
	a.rs.undoWords = 0
	for i := range a.arrays {
		if a.arrays[i].writable() {
			a.rs.undoWords += a.arrays[i].words()
		}
	}
	for _, ar := range a.arrays {
		vals := ar.init
		if vals == nil {
			vals = make([]uint32, len(ar.want))
		}
		if _, err := createU32s(m, a.name+"."+ar.name, vals); err != nil {
			return err
		}
	}
	return a.rs.setup(m)
}

func (a *rsApp) bind(m *pm.Machine) error {
	for _, ar := range a.arrays {
		r, err := m.OpenRegion(a.name + "." + ar.name)
		if err != nil {
			return err
		}
		a.base[ar.name] = r.Base
	}
	var rs []rsRange
	for i := range a.arrays {
		if ar := &a.arrays[i]; ar.writable() {
			rs = append(rs, rsRange{a.base[ar.name], ar.words()})
		}
	}
	a.rs.undoWords = 0
	for _, rg := range rs {
		a.rs.undoWords += rg.words
	}
	if err := a.rs.writable(rs...); err != nil {
		return err
	}
	return a.rs.open(m)
}

// Run allocates the device-memory scratch and runs the kernels.
func (a *rsApp) Run(m *pm.Machine) error { return a.run(m, false) }

// Recover rolls back what undo logs cover, repairs, and re-runs the kernels
// and blocks the durable markers do not cover.
func (a *rsApp) Recover(m *pm.Machine) error { return a.run(m, true) }

func (a *rsApp) run(m *pm.Machine, recovery bool) error {
	if err := a.bind(m); err != nil {
		return err
	}
	a.dev = a.dev[:0]
	for _, n := range a.devs {
		d, err := m.Alloc(pm.DeviceMem, uint64(max(n, 4)))
		if err != nil {
			return err
		}
		a.dev = append(a.dev, d)
	}
	return a.rs.run(m, recovery)
}

// Check compares every output array with its reference.
func (a *rsApp) Check(m *pm.Machine) error {
	if err := a.bind(m); err != nil {
		return err
	}
	for _, ar := range a.arrays {
		if ar.want == nil {
			continue
		}
		got, err := readU32s(m, a.addr(ar.name), len(ar.want))
		if err != nil {
			return err
		}
		if err := compareU32(a.name+"."+ar.name, got, ar.want); err != nil {
			return err
		}
	}
	if a.check != nil {
		return a.check(m)
	}
	return nil
}

// bySize returns the shape of size s: tiny, quick or paper.
func bySize[T any](s Size, tiny, quick, paper T) T {
	switch s {
	case Tiny:
		return tiny
	case Quick:
		return quick
	}
	return paper
}

// perItem returns an idempotent kernel of one thread per item i < n in
// blocks of threads threads (the last block's spare threads return at
// once), labelled label.
func perItem(name, label string, n, threads int, body func(t *scope.Thread, p *Persister, i int)) rsKernel {
	return rsKernel{idempotent: true, name: name, label: label, grid: scope.Grid{Blocks: blocksFor(n, threads), Threads: threads},
		body: func(t *scope.Thread, p *Persister) {
			if i := t.ID(); i < n {
				body(t, p, i)
			}
		}}
}

// Compute time. hwmodel times the memory and persistency verbs; the
// arithmetic between them is invisible to it, so a kernel that computes
// charges it with Thread.Work. The charge is derived, never fitted:
//
//   - Count the warp instructions the kernel's arithmetic compiles to, by
//     hand from the Go code of the kernel (the comment at each Work call
//     shows the count): one per 32-bit add, subtract, multiply,
//     multiply-add, shift, logic operation, compare, select, min or max,
//     and per address computation not folded into a load's offset; a
//     64-bit add, shift or logic operation as two, a 64-bit multiply as
//     four (the lanes are 32 bits wide); a loop's increment and
//     compare-and-branch as two per iteration. Loads, stores and atomics
//     are verbs and are not counted.
//   - Multiply by aluCycles, the cycles a scheduler's ALU takes per warp
//     instruction on the volta preset.
//
// A kernel charges a thread's arithmetic in one Work call (or one per
// outer loop iteration) rather than beside each operation: hwmodel stalls a
// warp on each of its loads until the data is back, so a warp's time is the
// sum of its loads' and its compute's wherever the charge goes; only how
// its accesses interleave with other warps' changes, and the engine runs
// one verb fewer per operation.
//
// hwmodel's Work holds one of the SM's scheduler execution units for that
// many cycles: warps sharing an SM compute side by side up to its
// gpu.schedulers, beyond that they take turns.
//
// aluCycles is 2: the re-study ran GPGPU-Sim 4.0's QV100 configuration
// (Table I: "NVDIA Volta QV100"), which issues one warp instruction per
// scheduler per cycle (gpgpu_max_insn_issue_per_warp 1) and accepts an
// integer or FP32 add, multiply or multiply-add into a scheduler's unit
// every 2 cycles (ptx_opcode_initiation_int and _fp: 2,2,2,2 for ADD, MAX,
// MUL, MAD): 16 lanes per unit, 32 lanes per warp.
const aluCycles = 2

// work charges n warp instructions of arithmetic (see aluCycles).
func work(t *scope.Thread, n int) {
	if c := n * aluCycles; c > 0 {
		t.Work(uint64(c))
	}
}
