package kerneltest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/kerneltest"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/pm/record"
)

// The recorder changes nothing a kernel computes, and the functional backend
// gives the same result whatever GPU shape it reports (a smaller one runs
// fewer blocks at once and swaps blocks out at device barriers).
func TestMetamorphicFunctional(t *testing.T) {
	small := pm.GPULimits{SMs: 1, WarpSize: 16, MaxThreadsPerSM: 256, MaxBlocksPerSM: 2, MaxThreadsPerBlock: 256}
	for _, c := range kerneltest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			want, _, err := kerneltest.Final(c, functional.New(pm.GPULimits{}))
			require.NoError(t, err)
			for _, be := range []pm.Backend{record.New(functional.New(pm.GPULimits{}), false), functional.New(small)} {
				got, _, err := kerneltest.Final(c, be)
				require.NoError(t, err)
				require.Empty(t, kerneltest.Diff(want, got), be.Name())
			}
		})
	}
}
