//go:build amd64

package native

import "unsafe"

// cpuid executes CPUID with EAX=leaf, ECX=sub.
//
//go:noescape
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// clwbLines executes CLWB on n consecutive 64-byte lines starting at the
// line holding p.
//
//go:noescape
func clwbLines(p unsafe.Pointer, n uintptr)

// clflushoptLines executes CLFLUSHOPT on n consecutive 64-byte lines.
//
//go:noescape
func clflushoptLines(p unsafe.Pointer, n uintptr)

// sfence executes SFENCE: earlier flushes complete before later stores.
func sfence()

func detectCPU() cpuFeatures {
	max0, _, _, _ := cpuid(0, 0)
	if max0 < 7 {
		return cpuFeatures{}
	}
	_, ebx, _, _ := cpuid(7, 0)
	return decodeFeatures(max0, ebx)
}

// flushLines writes back the lines covering b with the best instruction f
// offers and returns false if it has none. The caller issues the fence.
func flushLines(f cpuFeatures, b []byte) bool {
	if len(b) == 0 {
		return true
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	first := start &^ (cacheLine - 1)
	n := (start + uintptr(len(b)) - first + cacheLine - 1) / cacheLine
	p := unsafe.Pointer(&b[0])
	p = unsafe.Add(p, -int(start-first))
	switch {
	case f.CLWB:
		clwbLines(p, n)
	case f.CLFLUSHOPT:
		clflushoptLines(p, n)
	default:
		return false
	}
	return true
}

func fence() { sfence() }
