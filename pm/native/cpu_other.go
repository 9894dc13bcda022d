//go:build !amd64

package native

// detectCPU reports no line-flush instructions: dax mode is amd64-only
// here, and other architectures fall back to the log.
func detectCPU() cpuFeatures { return cpuFeatures{} }

// flushLines has no instruction to use off amd64.
func flushLines(cpuFeatures, []byte) bool { return false }

func fence() {}
