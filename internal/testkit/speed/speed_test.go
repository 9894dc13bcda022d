package speed_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/speed"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// prepare returns the launch of kernel k over n threads on a fresh
// functional machine.
func prepare(k speed.Kernel, n int) func(p *speed.Probe) (func() (scope.Result, error), error) {
	return func(p *speed.Probe) (func() (scope.Result, error), error) {
		m, err := pm.NewMachine(functional.New(pm.DefaultGPU()))
		if err != nil {
			return nil, err
		}
		kern, err := k.Setup(m, n, p)
		return func() (scope.Result, error) { return scope.Launch(m, k.Grid(n), kern) }, err
	}
}

// Each kernel runs the verbs its doc comment says, and the probe finds the
// memory a launch holds per resident thread: at least the Thread handles,
// far below a goroutine stack per thread for kernels that never wait.
func TestKernels(t *testing.T) {
	const n = 1 << 14
	verbs := map[string]uint64{
		"vector-add":   3 * n,
		"log-loop":     25 * n,
		"block-reduce": n / 256 * (3*255 + 8*256 + 2), // per block: 3 verbs of the 128+64+...+1 active lanes, 8 barriers each, thread 0's load and store
		"loop-16":      18 * n,
		// per block: 256 stores, warp 0's 32 OFences and one PRel, the other
		// warps' 224 PAcqs (warp 0 runs first, so none spins)
		"release-acquire": n / 256 * (256 + 32 + 1 + 224),
	}
	for _, k := range speed.Kernels() {
		t.Run(k.Name, func(t *testing.T) {
			launch, err := prepare(k, n)(&speed.Probe{})
			require.NoError(t, err)
			res, err := launch()
			require.NoError(t, err)
			require.Equal(t, verbs[k.Name], res.Verbs)

			var p speed.Probe
			b, err := p.BytesPerThread(prepare(k, n))
			require.NoError(t, err)
			require.Greater(t, b, 0.0)
			require.Less(t, b, 64.0*1024)
		})
	}
	_, err := speed.Lookup("nope")
	require.Error(t, err)
}

// CPU time is read and does not go backwards.
func TestCPUTime(t *testing.T) {
	a := speed.CPUTime()
	x := 0
	for i := range 1 << 20 {
		x ^= i * i
	}
	_ = x
	require.Positive(t, a)
	require.GreaterOrEqual(t, speed.CPUTime(), a)
}
