package callsite

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNameInOtherModule checks that user code of the binary's main module is
// sited relative to that module's root, and other modules' code by package.
func TestNameInOtherModule(t *testing.T) {
	const mod = "example.com/app"
	for _, tc := range []struct{ fn, file, mainPkg, want string }{
		{"example.com/app.kernel", "/home/u/app/k.go", "example.com/app", "k.go:7"},
		{"example.com/app/kern.(*K).Run.func1", "/home/u/app/kern/k.go", "example.com/app", "kern/k.go:7"},
		{"example.com/app/kern_test.TestK", "/home/u/app/kern/k_test.go", "example.com/app/kern.test", "kern/k_test.go:7"},
		{"main.main.func1", "/home/u/app/cmd/run/k.go", "example.com/app/cmd/run", "cmd/run/k.go:7"},
		{"main.main.func1", "/tmp/k.go", "command-line-arguments", "main/k.go:7"},
		{"example.com/lib.kernel", "/home/u/lib/k.go", "example.com/app", "example.com/lib/k.go:7"},
		{"example.com/application.kernel", "/x/k.go", "example.com/app", "example.com/application/k.go:7"},
		{"github.com/scopedpm/scopedpm/kvs.setKernel", "/x/kvs/kernel.go", "example.com/app", "kvs/kernel.go:7"},
	} {
		require.Equal(t, tc.want, name(tc.fn, tc.file, 7, mod, tc.mainPkg), tc.fn)
	}
}
