package pm_test

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// Regions are named, survive a crash at the same base address, and are
// reopened by name.
func Example_regions() {
	m, err := pm.NewMachine(functional.New(pm.GPULimits{}))
	if err != nil {
		panic(err)
	}
	r, _ := m.CreateRegion("counters", 64)
	_ = m.CopyIn(r.Base, []byte{42})
	if _, err := m.CreateRegion("counters", 64); err != nil {
		fmt.Println(err)
	}

	img, _ := m.Crash() // the durable image: the namespace and the bytes
	m2, _ := pm.Reopen(img, functional.New(pm.GPULimits{}))
	r2, _ := m2.OpenRegion("counters")
	v, _ := m2.Memory().Load(r2.Base, 1)
	fmt.Println(r2.Name, r2.Size, r2.Base == r.Base, v)
	// Output:
	// pm: region exists: "counters"
	// counters 64 true 42
}
