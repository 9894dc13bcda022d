package workloads_test

import (
	"fmt"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/workloads"
)

// A re-study kernel is written once; a scheme places its write-backs and
// fences. It runs on hwmodel's write-back GPU (the volta preset) and is
// crash-checked under the scheme's model: CTA-level epochs with CLWB keep
// the stencil consistent, the nvm baseline does not.
func Example_restudy() {
	for _, name := range []string{"EP_C_clwb", "nvm"} {
		s, err := workloads.ParseScheme(name)
		if err != nil {
			panic(err)
		}
		w, err := workloads.NewRestudy("stencil", workloads.Tiny, s)
		if err != nil {
			panic(err)
		}
		be, err := hwmodel.New(hwmodel.PresetVolta(), s.Model())
		if err != nil {
			panic(err)
		}
		m, err := pm.NewMachine(be)
		if err != nil {
			panic(err)
		}
		if err := w.Setup(m); err != nil {
			panic(err)
		}
		if err := w.Run(m); err != nil {
			panic(err)
		}
		fmt.Println(w.Name(), "on", be.Name(), "result:", w.Check(m))

		rep, err := crash.Check(w, pm.GPULimits{}, crash.Config{Model: s.Model(), States: 2000, Seed: 1})
		if err != nil {
			panic(err)
		}
		fmt.Println("crash states that do not recover:", len(rep.Violations) > 0)
	}
	// Output:
	// stencil/EP_C_clwb on hwmodel/writeback-adr/volta result: <nil>
	// crash states that do not recover: false
	// stencil/nvm on hwmodel/writeback-adr/volta result: <nil>
	// crash states that do not recover: true
}
