//go:build !race

package examples

// raceEnabled reports that the race detector is on.
const raceEnabled = false
