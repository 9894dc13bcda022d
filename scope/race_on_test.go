//go:build race

package scope_test

// raceEnabled reports that the race detector is on: the spin tests then
// use fewer threads (the code paths are the same).
const raceEnabled = true
