package offheap_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/offheap"
)

// Words gives zeroed, writable words of the asked length, for as long as
// their owner lives, however many collections run meanwhile.
func TestWords(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 4096, 100_000} {
		owner := new([64]byte)
		w := offheap.Words(owner, n)
		require.Len(t, w, n)
		for i := range w {
			require.Zero(t, w[i])
			w[i] = uint64(i) * 3
		}
		runtime.GC()
		runtime.GC()
		for i := range w {
			require.Equal(t, uint64(i)*3, w[i], "n %d word %d", n, i)
		}
		runtime.KeepAlive(owner)
	}
}

// A zero-size owner gets words on the heap, as usable as any.
func TestWordsZeroSizeOwner(t *testing.T) {
	w := offheap.Words(&struct{}{}, 100)
	require.Len(t, w, 100)
	w[99] = 7
	runtime.GC()
	require.Equal(t, uint64(7), w[99])
}

// Dropping owners lets their memory go: 1.6 GiB of words are allocated
// and dropped in turn, and the process's address space must not keep
// them (Linux: VmSize in /proc/self/status).
func TestWordsReleased(t *testing.T) {
	before, ok := vmSize(t)
	if !ok {
		t.Skip("no /proc/self/status")
	}
	for range 200 {
		owner := new([2]uint64)
		w := offheap.Words(owner, 1<<20) // 8 MiB
		w[0], w[len(w)-1] = 1, 1
		runtime.KeepAlive(owner)
		runtime.GC()
	}
	var grown int64
	for range 100 { // cleanups run in their own goroutine, after a collection
		runtime.GC()
		after, _ := vmSize(t)
		if grown = after - before; grown < 400<<20 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the address space grew by %d MiB after every owner was dropped", grown>>20)
}

// vmSize returns the process's virtual memory size in bytes.
func vmSize(t *testing.T) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmSize:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			return kb << 10, true
		}
	}
	return 0, false
}
