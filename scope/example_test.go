package scope_test

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// A block of producers persists values and releases a flag at device scope;
// another block acquires the flag and reads them.
func ExampleLaunch() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	data, _ := m.CreateRegion("data", 8*32)
	flag, _ := m.Alloc(pm.DeviceMem, 4)
	sum, _ := m.Alloc(pm.DeviceMem, 8)

	res, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
		slot := data.Base.Add(uint64(8 * t.TID()))
		if t.Block() == 0 { // producers
			t.Store64(slot, uint64(t.TID()))
			t.SyncThreads()
			if t.TID() == 0 {
				t.PRel(flag, 1, pm.Device) // persists before it are ordered first
			}
			return
		}
		for t.PAcq(flag, pm.Device) == 0 { // consumers spin
		}
		t.AtomicAdd64(sum, t.Load64(slot), pm.Device)
	})
	if err != nil {
		panic(err)
	}
	v, _ := m.Memory().Load(sum, 8)
	fmt.Println("sum:", v, "threads:", res.Blocks*res.Threads)
	// Output: sum: 496 threads: 64
}
