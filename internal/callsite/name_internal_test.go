package callsite

import (
	"strings"
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

// A package main is sited in its module-relative directory however it was
// built: with "go run file.go" (the build calls it command-line-arguments),
// the file's go.mod says where it is; in a test binary of package main,
// the binary's path names the package; with -trimpath, the file's path
// starts with the module path. Two commands' sites never collide as
// "main/k.go".
func TestNamePackageMain(t *testing.T) {
	const mod = "example.com/app"
	roots := map[string]string{"/home/u/app": mod, "/home/u/other": "example.com/other"}
	defer func(f func(string) (string, string, bool)) { moduleRoot = f }(moduleRoot)
	moduleRoot = func(dir string) (string, string, bool) {
		for d := dir; d != "/" && d != "."; d = d[:max(strings.LastIndexByte(d, '/'), 1)] {
			if m, ok := roots[d]; ok {
				return d, m, true
			}
			if d == "/" {
				break
			}
		}
		return "", "", false
	}
	for _, tc := range []struct{ fn, file, mainPkg, want string }{
		{"main.main.func1", "/home/u/app/cmd/agg/agg.go", "command-line-arguments", "cmd/agg/agg.go:7"},
		{"main.main.func1", "/home/u/app/cmd/ring/agg.go", "command-line-arguments", "cmd/ring/agg.go:7"},
		{"main.main.func1", "/home/u/app/agg.go", "command-line-arguments", "agg.go:7"},
		{"main.kernel", "/home/u/app/cmd/agg/agg_test.go", "example.com/app/cmd/agg.test", "cmd/agg/agg_test.go:7"},
		{"main_test.TestK", "/home/u/app/cmd/agg/x_test.go", "example.com/app/cmd/agg.test", "cmd/agg/x_test.go:7"},
		{"main.main.func1", "example.com/app/cmd/agg/agg.go", "command-line-arguments", "cmd/agg/agg.go:7"},
		{"main.main.func1", "/home/u/other/agg.go", "command-line-arguments", "example.com/other/agg.go:7"},
		{"main.main.func1", "/tmp/k.go", "command-line-arguments", "main/k.go:7"},
	} {
		require.Equal(t, tc.want, name(tc.fn, tc.file, 7, mod, tc.mainPkg), tc.file)
	}
}
