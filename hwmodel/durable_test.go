package hwmodel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// Every DFence returns only once every persist its warp stored before it is
// durable: the image at the fence's Done cycle holds each of them (or a
// later value of the same warp). Warps stream stores to seeded lines of
// their own slots between fences, enough to fill the flush window and the
// persist buffer; every model that makes DFence durable, on the SBRP
// machines with and without the artifact's physics and on the gope preset.
// (The refinement test checks crash images against the PMO at launch ends;
// this checks the durable verb's return time, where an Epoch fence once
// returned before the write-backs the window had delayed.)
func TestDFenceReturnsDurable(t *testing.T) {
	const (
		blocks, threads = 2, 64
		rounds, perRnd  = 4, 12
		slots           = 16 // lines per thread
	)
	plain := []string{"persist.ack_at_queue=false", "pcie.full_duplex=false", "persist.epoch_own_acks=false", "persist.epoch_write_through=false"}
	for _, mc := range []struct {
		name, preset string
		set          []string
	}{
		{"pm-near", "pm-near", nil}, {"pm-far", "pm-far", nil},
		{"pm-near-plain", "pm-near", plain}, {"pm-far-plain", "pm-far", plain},
		{"pm-near-few-writes", "pm-near", []string{"mem.sm_writes=6"}},
		{"gope", "gope", nil},
	} {
		for _, model := range durableModels {
			t.Run(mc.name+"/"+model.String(), func(t *testing.T) {
				const seed = 17
				t.Logf("seed = %d", seed)
				cfg, err := Preset(mc.preset)
				require.NoError(t, err)
				require.NoError(t, cfg.Set(mc.set...))
				be, m := setupHW(t, cfg, model)
				line := uint64(cfg.L1.LineBytes)
				n := blocks * threads
				r := region(t, m, "d", uint64(n*slots)*line)
				// The slots each thread writes in each round, drawn before
				// the launch (the kernel must not share an RNG).
				rng := rand.New(rand.NewPCG(seed, 0))
				plan := make([][rounds][perRnd]int, n)
				for g := range plan {
					for k := range rounds {
						for j := range perRnd {
							plan[g][k][j] = rng.IntN(slots)
						}
					}
				}
				addr := func(g, s int) pm.Addr { return r.Base.Add(uint64(g*slots+s) * line) }
				fences := map[int][]uint64{} // warp -> Done of each of its DFences, in order
				be.SetTrace(func(e Event) {
					if e.Kind == pm.OpDFence {
						fences[e.Warp] = append(fences[e.Warp], e.Done)
					}
				})
				warpOf := make([]int, n)
				_, err = scope.Launch(m, scope.Grid{Blocks: blocks, Threads: threads}, func(t *scope.Thread) {
					g := t.ID()
					warpOf[g] = t.Warp()
					for k := range rounds {
						for _, s := range plan[g][k] {
							t.Store64(addr(g, s), uint64(k+1))
						}
						t.DFence()
					}
				})
				require.NoError(t, err)
				for g := range n {
					w := warpOf[g]
					require.Len(t, fences[w], rounds, "warp %d: one DFence instruction per round", w)
					for k := range rounds {
						img, err := be.CrashAt(fences[w][k])
						require.NoError(t, err)
						for _, s := range plan[g][k] {
							got := word(t, img, "d", (g*slots+s)*int(line))
							require.GreaterOrEqual(t, got, uint64(k+1), fmt.Sprintf("thread %d round %d: slot %d not durable when its DFence returned at %d", g, k, s, fences[w][k]))
						}
					}
				}
			})
		}
	}
}
