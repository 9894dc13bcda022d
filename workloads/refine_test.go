package workloads_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/testkit/long"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/persistency"
	"github.com/scopedpm/scopedpm/txn"
	"github.com/scopedpm/scopedpm/workloads"
)

// TestRefinement runs every workload at Tiny size on hwmodel under every
// model and timed preset, and checks at the end of every launch that each
// crash image the timing model can produce is one the model's persist
// memory order allows (crash.Refines), that every durable verb (a DFence,
// an Epoch barrier, a durable release) returned only once what it orders
// was durable (crash.DurableReturns), and that CrashAt agrees with the
// durability it reports. The "+artifact" presets turn on the physics
// parameters that model the SBRP artifact's hardware; the plain SBRP
// presets have them on too, so "pm-near" runs without them. The re-study's
// volta machine runs its write-back models too (WriteBackADR, and WriteBackPCT
// with volatile write-pending queues, where a MemBar's return is checked
// against what the PCommits before it committed). With -short only
// pm-near, pm-far+artifact and volta's write-back models run. The COSPlay
// workloads, CPU runs, run once, under the COSPlay model, and their
// SFences' and CFences' returns are checked too. The machines the default
// run leaves out (pm-far, pm-near+artifact, pm-far-eadr, gope) are
// TestRefinementLong's.
func TestRefinement(t *testing.T) { refinement(t, false) }

// TestRefinementLong is TestRefinement on the machines the default run
// leaves out (pm-far, pm-near+artifact: the physics of pm-far+artifact;
// pm-far-eadr and gope), in the long run (internal/testkit/long). CI's long
// step names it, so no case of TestRefinement runs twice in CI.
func TestRefinementLong(t *testing.T) {
	long.Skip(t, "pm-far and pm-near+artifact")
	refinement(t, true)
}

// refinement runs TestRefinement's cases of the default run, or (longOnly)
// those only the long run has.
func refinement(t *testing.T, longOnly bool) {
	artifact := []string{"persist.ack_at_queue=true", "pcie.full_duplex=true", "persist.epoch_own_acks=true", "persist.epoch_write_through=true"}
	plain := []string{"persist.ack_at_queue=false", "pcie.full_duplex=false", "persist.epoch_own_acks=false", "persist.epoch_write_through=false"}
	for _, nw := range workloads.Names() {
		// The COSPlay workloads are CPU runs: every preset has the same
		// core (COSPlay Table 2), and they refine the COSPlay model (their
		// tasks order with SetCtx and CFence).
		cpu := strings.HasPrefix(nw[0], "cosplay-")
		for _, p := range []struct {
			name, preset string
			set          []string
		}{
			{"pm-near", "pm-near", plain}, {"pm-far", "pm-far", nil}, {"pm-far-eadr", "pm-far-eadr", nil},
			{"gope", "gope", nil}, {"volta", "volta", nil},
			{"pm-near+artifact", "pm-near", artifact}, {"pm-far+artifact", "pm-far", artifact},
		} {
			models := hwmodel.Models()
			switch {
			case cpu && p.name != "pm-near":
				continue
			case cpu:
				models = []crash.Model{persistency.COSPlay}
			case p.name == "volta":
				// The re-study's machine also runs its write-back models,
				// ADR and volatile WPQs, where the other models' verbs
				// write back and commit.
				models = append(models, persistency.WriteBackADR, persistency.WriteBackPCT)
			}
			for _, model := range models {
				longCase := p.name == "pm-far" || p.name == "pm-near+artifact" || p.name == "pm-far-eadr" || p.name == "gope"
				switch {
				case longCase != longOnly:
					continue // the long run's (TestRefinementLong): the physics of pm-far+artifact, and gope's FIFO sizes
				case testing.Short() && p.name != "pm-near" && p.name != "pm-far+artifact" && !model.WriteBack():
					continue // -short: one machine of each physics
				}
				t.Run(nw[0]+"/"+p.name+"/"+model.String(), func(t *testing.T) {
					w, err := workloads.New(nw[0], workloads.Tiny)
					require.NoError(t, err)
					cfg, err := hwmodel.Preset(p.preset)
					require.NoError(t, err)
					require.NoError(t, cfg.Set(p.set...))
					gpu := model
					if cpu {
						gpu = hwmodel.SBRP // the GPU's model: the run uses the CPU core
					}
					be, err := hwmodel.New(cfg, gpu)
					require.NoError(t, err)
					ref := crash.NewRefiner(be, model)
					m, err := pm.NewMachine(ref)
					require.NoError(t, err)
					if err := w.Setup(m); errors.Is(err, txn.ErrBadArg) {
						t.Skipf("%s does not fit %s: %v", nw[0], p.name, err)
					}
					require.NoError(t, err)
					require.NoError(t, w.Run(m))
					require.NoError(t, ref.Err())
					require.Positive(t, ref.Launches())
					require.Equal(t, ref.Launches(), ref.ReturnsChecked(), "every launch's durable verbs' return cycles checked")
				})
			}
		}
	}
}
