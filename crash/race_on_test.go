//go:build race

package crash_test

// raceEnabled reports that the race detector is on: the scale tests then
// skip under -short (the code paths are those of the small tests).
const raceEnabled = true
