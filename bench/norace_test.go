//go:build !race

package bench_test

// raceOn reports that the race detector is on (see race_test.go).
const raceOn = false
