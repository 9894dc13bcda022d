package workloads

// setOnFallback makes w call f for each key its cuckoo rounds leave to the
// fallback.
func (w *HMRebuild) setOnFallback(f func()) { w.onFallback = f }
