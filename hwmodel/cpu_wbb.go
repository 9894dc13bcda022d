package hwmodel

import (
	"container/heap"

	"github.com/scopedpm/scopedpm/pm"
)

// wbbCPU is the core of COSPlay Table 2 under x86, COSPlay, SBatch and
// FreeSwitch: a CLWB leaves the SQ head once the write-back buffer has an
// entry for it, after the pending write-back of its line (unless
// cpu.same_line_in_wbb), and holds the entry until its write-back is
// durable.
type wbbCPU struct {
	n   uint64  // cpu.wbb_entries
	wbb wbbHeap // ack cycles of the entries held
}

func (p *wbbCPU) begin(pm.CPURun) { p.wbb = p.wbb[:0] }

func (p *wbbCPU) sameLineWaits(c *cpuCore) bool { return !c.cfg.SameLineInWBB }

func (p *wbbCPU) admit(c *cpuCore, start uint64) uint64 {
	for len(p.wbb) > 0 && p.wbb[0] <= start {
		heap.Pop(&p.wbb)
	}
	if uint64(len(p.wbb)) >= p.n {
		f := heap.Pop(&p.wbb).(uint64)
		c.st.WBBFull += f - start
		start = f
		for len(p.wbb) > 0 && p.wbb[0] <= start {
			heap.Pop(&p.wbb)
		}
	}
	return start
}

func (p *wbbCPU) writeFrom(leave uint64, _ []pendRec) uint64 { return leave }

func (p *wbbCPU) held(leave, ack uint64) {
	if ack > leave {
		heap.Push(&p.wbb, ack)
	}
}

func (p *wbbCPU) front() uint64    { return 0 }
func (p *wbbCPU) newStrand(uint64) {}
func (p *wbbCPU) persistBarrier()  {}

// wbbHeap is a min-heap of the ack cycles of the WBB's entries.
type wbbHeap []uint64

func (h wbbHeap) Len() int           { return len(h) }
func (h wbbHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h wbbHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wbbHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *wbbHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
