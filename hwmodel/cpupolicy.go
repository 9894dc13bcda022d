package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// cpuPolicy is a CPU configuration's share of the core's persist path:
// where a CLWB's write-back waits once it leaves the store queue (the
// write-back buffer, a strand buffer, nowhere), whether it waits for the
// pending write-back of its line first, and when its write-back may
// start. The store queue, caches, memory controller and fences are the
// core's (cpu.go) under every configuration. x86, COSPlay, SBatch and
// FreeSwitch differ in their software (coro) and share wbbCPU;
// StrandWeaver is strandCPU and COSPlay §5's Unordered unorderedCPU.
type cpuPolicy interface {
	// begin resets the policy for a run.
	begin(run pm.CPURun)
	// sameLineWaits: a CLWB waits at the SQ head for the pending
	// write-back of its line (COSPlay §4.3's rule).
	sameLineWaits(c *cpuCore) bool
	// admit returns when a CLWB that can leave the SQ head at start gets
	// its buffer entry (counting the wait in c.st).
	admit(c *cpuCore, start uint64) uint64
	// writeFrom returns when the write-back of a CLWB that left at leave,
	// carrying recs, may start.
	writeFrom(leave uint64, recs []pendRec) uint64
	// held notes that the CLWB's buffer entry is held until ack.
	held(leave, ack uint64)
	// front is the ordering frontier a store's records carry now.
	front() uint64
	// newStrand and persistBarrier are StrandWeaver's verbs.
	newStrand(s uint64)
	persistBarrier()
}

// newCPUPolicy returns the policy of a run's configuration, reusing the
// core's.
func (c *cpuCore) newCPUPolicy(run pm.CPURun) cpuPolicy {
	var p cpuPolicy
	switch {
	case run.Unordered:
		p = unorderedCPU{}
	case run.Strands:
		p = &c.strandPol
	default:
		p = &c.wbbPol
	}
	p.begin(run)
	return p
}
