package hwmodel

import (
	"testing"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/stretchr/testify/require"
)

func TestDebugPrint(t *testing.T) {
	for _, kc := range kernels {
		for _, p := range []string{"pm-near", "pm-far", "dram"} {
			cfg, _ := Preset(p)
			for _, model := range Models() {
				be, _ := New(cfg, model)
				m, _ := pm.NewMachine(be)
				g, k, _ := kc.setup(t, m)
				_, err := scope.Launch(m, g, k)
				require.NoError(t, err)
				s := be.Stats()
				t.Logf("%-18s %-12s %-15s cyc=%7d ins=%5d pers=%4d fl=%4d coal=%4d l1pm=%3d nvmW=%6d st=%+v", kc.name, p, model, s.Cycles, s.Instructions, s.Persists, s.Flushes, s.CoalescedWrites, s.L1PMMisses, s.NVMWriteBytes, s.Stalls)
			}
		}
	}
}
