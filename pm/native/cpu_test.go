//go:build unix

package native

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeFeatures(t *testing.T) {
	cases := []struct {
		name    string
		maxLeaf uint32
		ebx     uint32
		want    cpuFeatures
		instr   string
	}{
		{"no leaf 7", 6, 1<<24 | 1<<23, cpuFeatures{}, "none"},
		{"neither", 7, 0xffffffff &^ (1<<24 | 1<<23), cpuFeatures{}, "none"},
		{"clflushopt only", 0xd, 1 << 23, cpuFeatures{CLFLUSHOPT: true}, "clflushopt"},
		{"clwb only", 0xd, 1 << 24, cpuFeatures{CLWB: true}, "clwb"},
		{"both (Cascade Lake)", 0x16, 0xd19f4fbb, cpuFeatures{CLWB: true, CLFLUSHOPT: true}, "clwb"},
		{"neither (Haswell)", 0xd, 0x000027ab, cpuFeatures{}, "none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decodeFeatures(c.maxLeaf, c.ebx)
			require.Equal(t, c.want, got)
			require.Equal(t, c.instr, got.String())
			require.Equal(t, c.instr != "none", got.has())
		})
	}
}

// A CPU without flush instructions refuses dax before any mapping is tried.
func TestDAXNeedsFlushInstructions(t *testing.T) {
	require.ErrorIs(t, daxSupport(t.TempDir(), cpuFeatures{}), ErrUnsupported)
}

// The flush instructions run (on any memory: on a page-cache mapping they
// write back the CPU cache, which is harmless) for every alignment.
func TestFlushLines(t *testing.T) {
	f := detectCPU()
	t.Logf("cpu flush instruction: %v", f)
	buf := make([]byte, 1000)
	for _, ff := range []cpuFeatures{{CLWB: true}, {CLFLUSHOPT: true}} {
		if ff.CLWB && !f.CLWB || ff.CLFLUSHOPT && !f.CLFLUSHOPT {
			continue
		}
		for lo := 0; lo < 130; lo += 7 {
			require.True(t, flushLines(ff, buf[lo:lo+300]))
		}
		require.True(t, flushLines(ff, nil))
		fence()
	}
	require.Equal(t, len(buf) == 0, flushLines(cpuFeatures{}, buf))
}
