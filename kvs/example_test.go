package kvs_test

import (
	"fmt"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// A batch of SETs, a lookup, a crash and a reopen: committed batches
// survive.
func Example() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	st, err := kvs.Create(m, kvs.Config{Buckets: 64, MaxBatch: 128})
	if err != nil {
		panic(err)
	}
	keys := []uint32{7, 42, 1000}
	res, _ := st.SetBatch(keys, []uint64{70, 420, 10000})
	_ = st.Put(42, 421) // a batch of one: an update
	fmt.Println("inserted", res.Inserted)

	img, _ := m.Crash()
	m2, _ := pm.Reopen(img, functional.New(pm.GPULimits{}))
	st2, _ := kvs.Open(m2, "gpkvs")
	rec, _ := st2.Recover()
	vals, found, _ := st2.GetBatch([]uint32{7, 42, 5})
	fmt.Println("batch active at crash:", rec.Active)
	fmt.Println(vals, found)
	// Output:
	// inserted 3
	// batch active at crash: false
	// [70 421 0] [true true false]
}
