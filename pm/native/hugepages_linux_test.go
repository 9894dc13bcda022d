//go:build linux && !race

package native

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
)

// A region's image asks for huge pages unless Options.NoHugePages (the
// "hg" flag of its mapping in /proc/self/smaps).
func TestNoHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skip("the kernel has no transparent huge pages")
	}
	for _, no := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoHugePages=%v", no), func(t *testing.T) {
			b, err := Open(t.TempDir(), Options{Mode: ModeLog, Create: true, NoHugePages: no})
			require.NoError(t, err)
			defer b.Close()
			img, err := b.CreateStored("r", pm.Addr(1<<pm.OffsetBits), 8<<20)
			require.NoError(t, err)
			require.Equal(t, !no, mappingAdvisedHuge(t, uintptr(unsafe.Pointer(unsafe.SliceData(img)))))
		})
	}
}

// mappingAdvisedHuge reports whether the mapping holding address a has
// MADV_HUGEPAGE's flag.
func mappingAdvisedHuge(t *testing.T, a uintptr) bool {
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(fields[0], "%x-%x", &lo, &hi); n == 2 && !strings.HasSuffix(fields[0], ":") {
			in = lo <= a && a < hi
			continue
		}
		if in && fields[0] == "VmFlags:" {
			return strings.Contains(sc.Text(), " hg")
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no mapping holds %#x", a)
	return false
}
