package callsite_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/callsite"
)

func TestIsLibrary(t *testing.T) {
	for _, tc := range []struct {
		pkg string
		lib bool
	}{
		{"github.com/scopedpm/scopedpm/pm", true},
		{"github.com/scopedpm/scopedpm/pm/record", true},
		{"github.com/scopedpm/scopedpm/crash", true},
		{"github.com/scopedpm/scopedpm/scope", true},
		{"github.com/scopedpm/scopedpm/hwmodel", true},
		{"github.com/scopedpm/scopedpm/coro", true},
		{"github.com/scopedpm/scopedpm/txn", true},
		{"github.com/scopedpm/scopedpm/internal/callsite", true},
		{"github.com/scopedpm/scopedpm/internal/seal", true},
		{"github.com/scopedpm/scopedpm/crash/newpart", true},
		{"github.com/scopedpm/scopedpm/pm/newbackend", true},
		{"runtime", true},
		{"iter", true},
		{"internal/runtime/maps", true},
		{"github.com/scopedpm/scopedpm/kvs", false},
		{"github.com/scopedpm/scopedpm/btree", false},
		{"github.com/scopedpm/scopedpm/workloads", false},
		{"github.com/scopedpm/scopedpm/workloads_test", false},
		{"github.com/scopedpm/scopedpm/bench/cmd/pmcheck", false},
		{"github.com/scopedpm/scopedpm/pmx", false},
		{"github.com/scopedpm/scopedpm/txnlog", false},
		{"example.com/app", false},
		{"main", false},
	} {
		require.Equal(t, tc.lib, callsite.IsLibrary(tc.pkg), tc.pkg)
	}
}

func TestName(t *testing.T) {
	for _, tc := range []struct{ fn, file, want string }{
		{"github.com/scopedpm/scopedpm/workloads.(*reduction).Run.func1", "/src/workloads/reduction.go", "workloads/reduction.go:7"},
		{"github.com/scopedpm/scopedpm/kvs.setKernel", "/x/kvs/kernel.go", "kvs/kernel.go:7"},
		{"github.com/scopedpm/scopedpm/crash_test.TestX.func2", "/x/crash/crash_test.go", "crash/crash_test.go:7"},
		{"example.com/app.kernel", "/home/u/app/k.go", "example.com/app/k.go:7"},
		{"main.main.func1", "/home/u/cmd/k.go", "main/k.go:7"},
	} {
		require.Equal(t, tc.want, callsite.Name(tc.fn, tc.file, 7), tc.fn)
	}
}

// site stands for a verb called from user code: a _test.go file is user
// code even in a library package, so the site is this line.
func site() string { return callsite.Site(0) } // the site

func TestSite(t *testing.T) {
	src, err := os.ReadFile("callsite_test.go")
	require.NoError(t, err)
	line := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(l, "// the site") {
			line = i + 1
		}
	}
	require.Equal(t, "internal/callsite/callsite_test.go:"+strconv.Itoa(line), site())
}
