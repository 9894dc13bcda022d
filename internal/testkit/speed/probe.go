package speed

import (
	"errors"
	"runtime"

	"github.com/scopedpm/scopedpm/scope"
)

// Probe measures the memory a launch holds per resident simulated thread
// (B/thread): the heap and goroutine stacks in use at the moment the most
// threads are alive at once (started and not finished), less what was in
// use before the launch, divided by the launch's peak of resident threads
// (scope.Result.PeakResident).
//
// The kernel reports its threads with Enter and Exit. BytesPerThread runs
// the launch twice: the first run finds the most threads alive, the second
// (the engine is deterministic, so it runs the same schedule) collects
// garbage and reads the memory statistics when that many are alive, from
// the thread whose start makes them so. That is where an engine that keeps
// a coroutine per suspended thread peaks; an engine that needs less memory
// per thread shows less there.
//
// What is counted: thread state and stacks, the engine's and the backend's
// data for the launch (persist records, queues). What is not: the machine's
// memory ranges, allocated before the launch, and idle coroutines kept
// from earlier launches (scope.ReleaseIdle drops them first, so that the
// launch pays for every coroutine it uses).
//
// A zero Probe is disarmed: Enter and Exit cost a branch. The engine runs
// one simulated thread at a time, so a Probe needs no locking.
type Probe struct {
	armed   bool
	live    int // threads started and not finished
	maxLive int
	at      int // sample when live first reaches it; 0: never
	sampled bool
	before  runtime.MemStats
	peak    runtime.MemStats
}

// Enter counts a thread that starts; the kernel calls it first.
func (p *Probe) Enter() {
	if !p.armed {
		return
	}
	p.live++
	p.maxLive = max(p.maxLive, p.live)
	if p.at > 0 && !p.sampled && p.live >= p.at {
		p.sample()
	}
}

// Exit counts a thread that finishes; the kernel calls it last.
func (p *Probe) Exit() {
	if p.armed {
		p.live--
	}
}

// sample is a function of its own, not inlined, so that its frame is not
// part of every thread's.
//
//go:noinline
func (p *Probe) sample() {
	p.sampled = true
	runtime.GC()
	runtime.ReadMemStats(&p.peak)
}

// BytesPerThread returns the memory the launch holds per resident thread
// (see Probe). prepare builds a fresh machine and kernel around p, whose
// memory is allocated before the measurement starts, and returns the
// launch; it is called twice.
func (p *Probe) BytesPerThread(prepare func(p *Probe) (launch func() (scope.Result, error), err error)) (float64, error) {
	maxLive, err := p.run(prepare)
	if err != nil {
		return 0, err
	}
	*p = Probe{}
	scope.ReleaseIdle()
	launch, err := prepare(p)
	if err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&p.before)
	p.armed, p.at = true, maxLive
	res, err := launch()
	p.armed = false
	switch {
	case err != nil:
		return 0, err
	case !p.sampled:
		return 0, errors.New("speed: the second run never had as many threads alive as the first: the launch is not deterministic")
	case res.PeakResident == 0:
		return 0, errors.New("speed: the launch had no resident threads")
	}
	used := func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc) + float64(m.StackInuse) }
	return (used(&p.peak) - used(&p.before)) / float64(res.PeakResident), nil
}

// run runs one launch with the probe armed and returns the most threads
// alive at once.
func (p *Probe) run(prepare func(p *Probe) (func() (scope.Result, error), error)) (int, error) {
	*p = Probe{}
	launch, err := prepare(p)
	if err != nil {
		return 0, err
	}
	p.armed = true
	_, err = launch()
	p.armed = false
	return p.maxLive, err
}
