//go:build race

package bench_test

// raceOn reports that the race detector is on: -short then skips the
// experiments that run long under it and start no goroutines of their own
// (nothing for it to check that the other experiments do not).
const raceOn = true
