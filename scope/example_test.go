package scope_test

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
)

// A block of producers persists values, each releasing its own flag at
// device scope; each thread of another block acquires its producer's flag
// and reads the value. (Under SBRP a block barrier orders no persist: one
// release by thread 0 after a SyncThreads would order only thread 0's.)
func ExampleLaunch() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	data, _ := m.CreateRegion("data", 8*32)
	flags, _ := m.Alloc(pm.DeviceMem, 4*32)
	sum, _ := m.Alloc(pm.DeviceMem, 8)

	res, err := scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
		slot := data.Base.Add(uint64(8 * t.TID()))
		flag := flags.Add(uint64(4 * t.TID())) // one per producer
		if t.Block() == 0 {                    // producers
			t.Store64(slot, uint64(t.TID()))
			t.PRel(flag, 1, pm.Device) // orders this thread's persists first
			return
		}
		for t.PAcq(flag, pm.Device) == 0 { // each consumer waits for its producer
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
