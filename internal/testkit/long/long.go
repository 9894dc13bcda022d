// Package long tells tests whether the long run was asked for. The
// README's test command (go test ./...) stays within minutes on two cores;
// the checks that would take it past that (every golden set of the quick
// experiments, the slowest sweeps, every preset in the bound tests) run
// only with SCOPEDPM_LONG=1 in the environment, which CI sets in a step of
// its own, naming the tests that call Enabled or Skip (.ci/run: a test
// that starts to call them is added there):
//
//	SCOPEDPM_LONG=1 go test ./...
package long

import (
	"os"
	"testing"
)

// Env is the environment variable that turns the long run on.
const Env = "SCOPEDPM_LONG"

// Enabled reports whether the long run was asked for (Env set and not
// "0").
func Enabled() bool {
	v := os.Getenv(Env)
	return v != "" && v != "0"
}

// Skip skips t unless the long run was asked for, saying why.
func Skip(t testing.TB, why string) {
	t.Helper()
	if !Enabled() {
		t.Skipf("%s: runs with %s=1", why, Env)
	}
}
