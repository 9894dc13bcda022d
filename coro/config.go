package coro

import (
	"fmt"
	"strings"

	"github.com/scopedpm/scopedpm/pm"
)

// Mode is how a run orders the persists of its tasks at their ordering
// points (Ctx.Fence and Ctx.Join). The task code is the same under every
// mode: the mode, not the program, decides what an ordering point issues
// and whether the task gives up the core there. The modes are the six
// system configurations of COSPlay §5.
type Mode uint8

// The modes.
const (
	// Baseline: an ordering point is an SFence, and the task keeps the
	// core (undo logging ordered with sfences, no task-level overlap).
	Baseline Mode = iota
	// Unordered: an ordering point issues nothing, so persists are never
	// ordered: the upper bound on speed, not crash consistent.
	Unordered
	// COSPlay: an ordering point yields to the next context of the window,
	// and when the task is resumed it issues SetCtx(cid) and CFence(cid)
	// for its own context cid (COSPlay Figure 4b).
	COSPlay
	// SBatch: an ordering point yields to the next context; the scheduler
	// issues one SFence when it resumes a task whose ordering point no
	// SFence has covered yet, so a full window shares one SFence (COSPlay
	// Figure 7b).
	SBatch
	// StrandWeaver: an ordering point is a PersistBarrier of the current
	// strand, Ctx.NewStrand starts a strand, Ctx.Join is a JoinStrand, and
	// each task ends with a JoinStrand. One task runs at a time.
	StrandWeaver
	// FreeSwitch: COSPlay with coroutine switches that cost no cycles.
	FreeSwitch
	numModes
)

var modeNames = [...]string{"baseline", "unordered", "cosplay", "sbatch", "strandweaver", "freeswitch"}

// String returns the mode's name as ParseMode accepts it.
func (m Mode) String() string {
	if m < numModes {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode returns the mode called name (case insensitive).
func ParseMode(name string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(n, name) {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: mode %q (have %s)", ErrBadArg, name, strings.Join(modeNames[:], ", "))
}

// Modes returns every mode in a fixed order.
func Modes() []Mode {
	out := make([]Mode, numModes)
	for i := range out {
		out[i] = Mode(i)
	}
	return out
}

// coroutines reports whether the mode switches tasks at ordering points.
func (m Mode) coroutines() bool { return m == COSPlay || m == SBatch || m == FreeSwitch }

// DefaultSwitchCycles is the cost, in core cycles, of one coroutine switch
// including the round-robin scheduler, when Config.SwitchCycles is zero:
// the 6 ns switch of the coroutine library COSPlay §4 cites, at the 2.2 GHz
// of COSPlay Table 2. A timing backend may charge its own figure instead.
const DefaultSwitchCycles = 13

// Config is how Run schedules tasks and orders their persists.
type Config struct {
	// Mode decides what an ordering point issues.
	Mode Mode
	// Window is the number of concurrently active task contexts (COSPlay's
	// window_size): tasks are spawned in order, each into a context whose
	// previous task has ended, and the contexts run round robin. 0 makes
	// every task active at once. StrandWeaver allows at most 1.
	Window int
	// StrandWidth and StrandDepth are StrandWeaver's strand buffer shape,
	// (w,d) = (4,4) by default; a timing backend reads them from
	// pm.Launch.CPU. They do not change what the tasks issue.
	StrandWidth, StrandDepth int
	// Cores is the number of cores the run's tasks share (0 means 1),
	// one thread per core: each core runs Window contexts of its own, and
	// a task is spawned into whichever core's context frees first. The
	// cores take turns a context at a time; a task's Latency reads the
	// backend's clock, which on several cores is the core's that issued
	// the last verb, so latencies are approximate there.
	Cores int
	// SwitchCycles is the cost of one coroutine switch and of the
	// scheduler, in cycles; each switch reports it as the Value of an
	// OpYield for a timing backend to charge. 0 means DefaultSwitchCycles;
	// FreeSwitch always uses 0.
	SwitchCycles uint64
}

// Name returns "cosplay(w=4)", "strandweaver(4,4)", "baseline", with
// "x4" after it on 4 cores.
func (c Config) Name() string {
	if c.Cores > 1 {
		one := c
		one.Cores = 0
		return fmt.Sprintf("%sx%d", one.Name(), c.Cores)
	}
	switch {
	case c.Mode == StrandWeaver:
		w, d := c.strandShape()
		return fmt.Sprintf("%s(%d,%d)", c.Mode, w, d)
	case c.Window > 0:
		return fmt.Sprintf("%s(w=%d)", c.Mode, c.Window)
	}
	return c.Mode.String()
}

func (c Config) strandShape() (w, d int) {
	w, d = c.StrandWidth, c.StrandDepth
	if w == 0 {
		w = 4
	}
	if d == 0 {
		d = 4
	}
	return w, d
}

// Switch returns the cycles one switch costs under c.
func (c Config) Switch() uint64 {
	switch {
	case c.Mode == FreeSwitch:
		return 0
	case c.SwitchCycles == 0:
		return DefaultSwitchCycles
	}
	return c.SwitchCycles
}

// Validate returns an error wrapping ErrBadArg if c cannot run.
func (c Config) Validate() error {
	switch {
	case c.Mode >= numModes:
		return fmt.Errorf("%w: %v", ErrBadArg, c.Mode)
	case c.Window < 0:
		return fmt.Errorf("%w: window %d", ErrBadArg, c.Window)
	case c.Mode == StrandWeaver && c.Window > 1:
		return fmt.Errorf("%w: StrandWeaver runs one task at a time, not a window of %d", ErrBadArg, c.Window)
	case c.Cores < 0:
		return fmt.Errorf("%w: %d cores", ErrBadArg, c.Cores)
	case c.StrandWidth < 0 || c.StrandDepth < 0:
		return fmt.Errorf("%w: strand buffer (%d,%d)", ErrBadArg, c.StrandWidth, c.StrandDepth)
	}
	return nil
}

// WithConfig runs the tasks under cfg (default: Baseline, every task
// active at once).
func WithConfig(cfg Config) Option { return func(c *config) { c.run = cfg } }

// launch returns what a timing backend needs of c, for pm.Launch.CPU.
func (c Config) launch() pm.CPURun {
	return pm.CPURun{
		SwitchCycles: c.SwitchCycles,
		FreeSwitch:   c.Mode == FreeSwitch,
		Strands:      c.Mode == StrandWeaver,
		StrandWidth:  c.StrandWidth,
		StrandDepth:  c.StrandDepth,
		Unordered:    c.Mode == Unordered,
		Cores:        max(c.Cores, 1),
	}
}
