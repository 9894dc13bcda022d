//go:build !race

package workloads

// raceEnabled reports that the race detector is on.
const raceEnabled = false
