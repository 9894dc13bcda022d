package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// strandCPU is StrandWeaver (COSPlay §6's comparison): a CLWB goes to the
// strand buffer of its strand (pm.CPURun's width and depth) instead of the
// WBB and holds its entry until durable and until the entries before it
// are free, so the buffer's depth bounds a strand's concurrency; a
// write-back starts only once every CLWB of its strand, and of the strands
// its records were stored in, before their last PersistBarrier is durable.
type strandCPU struct {
	w, d      uint64
	sb        []strandBuf
	buf       *strandBuf // the current CLWB's (admit to held)
	strand    uint64     // current strand (NewStrand's value)
	frontier  uint64     // the current strand's CLWBs write back no earlier
	strandMax uint64     // latest ack of the current strand's CLWBs
}

// strandBuf is one strand buffer: its entries' free cycles in order (a
// ring of depth).
type strandBuf struct {
	free []uint64
	n    uint64
	last uint64 // free cycle of its newest entry
}

func (p *strandCPU) begin(run pm.CPURun) {
	p.w, p.d = 4, 4
	if run.StrandWidth > 0 {
		p.w = uint64(run.StrandWidth)
	}
	if run.StrandDepth > 0 {
		p.d = uint64(run.StrandDepth)
	}
	p.sb = p.sb[:0]
	for range p.w {
		p.sb = append(p.sb, strandBuf{free: make([]uint64, p.d)})
	}
	p.buf, p.strand, p.frontier, p.strandMax = nil, 0, 0, 0
}

func (p *strandCPU) sameLineWaits(c *cpuCore) bool { return !c.cfg.SameLineInWBB }

func (p *strandCPU) admit(c *cpuCore, start uint64) uint64 {
	p.buf = &p.sb[p.strand%p.w]
	if p.buf.n >= p.d {
		if f := p.buf.free[p.buf.n%p.d]; f > start {
			c.st.StrandFull += f - start
			start = f
		}
	}
	return start
}

// brokenStrands is a test hook that breaks StrandWeaver's ordering on
// purpose: a write-back starts after the frontier of the strand that
// issues its CLWB, not of the strands its records were stored in. The
// refinement test sets it to show that it can fail.
var brokenStrands = false

func (p *strandCPU) writeFrom(leave uint64, recs []pendRec) uint64 {
	from := max(leave, p.frontier)
	if !brokenStrands {
		for _, r := range recs {
			from = max(from, r.front)
		}
	}
	return from
}

func (p *strandCPU) held(_, ack uint64) {
	b := p.buf
	f := max(ack, b.last)
	b.free[b.n%p.d] = f
	b.n++
	b.last = f
	p.strandMax = max(p.strandMax, ack)
}

func (p *strandCPU) front() uint64 { return p.frontier }

func (p *strandCPU) newStrand(s uint64) { p.strand, p.frontier, p.strandMax = s, 0, 0 }

func (p *strandCPU) persistBarrier() { p.frontier = max(p.frontier, p.strandMax) }
