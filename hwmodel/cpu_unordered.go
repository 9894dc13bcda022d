package hwmodel

import "github.com/scopedpm/scopedpm/pm"

// unorderedCPU is COSPlay §5's Unordered, "completely free of any
// persist-induced CPU stalls" and "an upper performance bound": a CLWB
// leaves the SQ head at once, waiting neither for a buffer entry nor for
// the pending write-back of its line (§4.3's rule, which otherwise holds
// up every SQ entry behind it). Its write-back still starts then, durable
// no earlier than the pending one, still takes its share of the PM write
// bandwidth, and the run lasts until it is durable.
type unorderedCPU struct{}

func (unorderedCPU) begin(pm.CPURun)                            {}
func (unorderedCPU) sameLineWaits(*cpuCore) bool                { return false }
func (unorderedCPU) admit(_ *cpuCore, start uint64) uint64      { return start }
func (unorderedCPU) writeFrom(leave uint64, _ []pendRec) uint64 { return leave }
func (unorderedCPU) held(_, _ uint64)                           {}
func (unorderedCPU) front() uint64                              { return 0 }
func (unorderedCPU) newStrand(uint64)                           {}
func (unorderedCPU) persistBarrier()                            {}
