package bench_test

import (
	"os"
	"testing"

	"github.com/scopedpm/scopedpm/bench"
)

// TestMain lets the test binary be a side of an experiment that runs its
// sides in processes of their own (load-vs-pebble).
func TestMain(m *testing.M) {
	bench.ChildMain()
	os.Exit(m.Run())
}
