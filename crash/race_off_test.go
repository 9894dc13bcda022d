//go:build !race

package crash_test

// raceEnabled reports that the race detector is on.
const raceEnabled = false
