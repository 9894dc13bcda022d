package examples_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/examples"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/crash"
	"github.com/scopedpm/scopedpm/txn"
)

// TestRefinement runs every workload at Tiny size on hwmodel under every
// model and timed preset, and checks at the end of every launch that each
// crash image the timing model can produce is one the model's persist
// memory order allows (crash.Refines), and that CrashAt agrees with the
// durability it reports.
func TestRefinement(t *testing.T) {
	for _, nw := range examples.Names() {
		for _, preset := range []string{"pm-near", "pm-far", "pm-far-eadr", "gope", "volta"} {
			for _, model := range hwmodel.Models() {
				t.Run(nw[0]+"/"+preset+"/"+model.String(), func(t *testing.T) {
					w, err := examples.New(nw[0], examples.Tiny)
					require.NoError(t, err)
					cfg, err := hwmodel.Preset(preset)
					require.NoError(t, err)
					be, err := hwmodel.New(cfg, model)
					require.NoError(t, err)
					ref := crash.NewRefiner(be, model)
					m, err := pm.NewMachine(ref)
					require.NoError(t, err)
					if err := w.Setup(m); errors.Is(err, txn.ErrBadArg) {
						t.Skipf("%s does not fit %s: %v", nw[0], preset, err)
					}
					require.NoError(t, err)
					require.NoError(t, w.Run(m))
					require.NoError(t, ref.Err())
					require.Positive(t, ref.Launches())
				})
			}
		}
	}
}
