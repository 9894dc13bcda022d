package hwmodel

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// TestStreamProbe prints, for one streaming kernel, every model's cycles and
// bytes on every preset (HWPROBE=1).
func TestStreamProbe(t *testing.T) {
	if os.Getenv("HWPROBE") == "" {
		t.Skip("HWPROBE unset")
	}
	blocks, threads, per := 60, 1024, 16
	for _, preset := range []string{"pm-near", "pm-far", "volta", "gope", "dram"} {
		for _, model := range Models() {
			cfg, err := Preset(preset)
			require.NoError(t, err)
			be, m := setupHW(t, cfg, model)
			n := blocks * threads
			line := uint64(cfg.L1.LineBytes)
			r := region(t, m, "p", uint64(n*per)*line)
			_, err = scope.Launch(m, scope.Grid{Blocks: blocks, Threads: threads}, func(th *scope.Thread) {
				g := th.ID()
				for k := 0; k < per; k++ {
					th.Store64(r.Base+pm.Addr(uint64(k*n+g)*line), uint64(g+1))
				}
				th.DFence()
			})
			require.NoError(t, err)
			st := be.LastLaunch()
			fmt.Printf("%-8s %-14s cycles %10d nvmB %10d pcieB %10d flushes %8d stalls %+v\n", preset, model, st.Cycles, st.NVMWriteBytes, st.PCIeBytes, st.Flushes, st.Stalls)
		}
	}
}
