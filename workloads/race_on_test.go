//go:build race

package workloads

// raceEnabled reports that the race detector is on: the exhaustive crash
// tests then explore fewer states (the code paths are the same).
const raceEnabled = true
