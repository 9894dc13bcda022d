//go:build !race

package scope_test

// raceEnabled reports that the race detector is on.
const raceEnabled = false
