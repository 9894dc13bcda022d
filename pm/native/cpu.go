package native

// cpuFeatures are the cache-line flush instructions the CPU offers.
type cpuFeatures struct {
	CLWB       bool // CLWB: write a line back, keep it cached
	CLFLUSHOPT bool // CLFLUSHOPT: write a line back and evict it, weakly ordered
}

// has reports whether the CPU can flush lines at all.
func (f cpuFeatures) has() bool { return f.CLWB || f.CLFLUSHOPT }

// String names the flush instruction dax mode would use.
func (f cpuFeatures) String() string {
	switch {
	case f.CLWB:
		return "clwb"
	case f.CLFLUSHOPT:
		return "clflushopt"
	}
	return "none"
}

// decodeFeatures decodes CPUID: maxLeaf is EAX of leaf 0 (the highest
// standard leaf), ebx7 is EBX of leaf 7 subleaf 0, where bit 23 is
// CLFLUSHOPT and bit 24 is CLWB (Intel SDM vol. 2A, CPUID). Leaf 7 means
// nothing when maxLeaf < 7.
func decodeFeatures(maxLeaf, ebx7 uint32) cpuFeatures {
	if maxLeaf < 7 {
		return cpuFeatures{}
	}
	return cpuFeatures{CLWB: ebx7&(1<<24) != 0, CLFLUSHOPT: ebx7&(1<<23) != 0}
}

// cacheLine is the flush granularity assumed by dax mode.
const cacheLine = 64
