package btree_test

import (
	"fmt"

	"github.com/scopedpm/scopedpm/btree"
	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
)

// A tree used from plain Go code: Put, Get, Delete, Scan, Len.
func Example() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	tr, err := btree.Create(m, "index", btree.Options{})
	if err != nil {
		panic(err)
	}
	for k := uint64(1); k <= 5; k++ {
		_ = tr.Put(k*10, k*100)
	}
	_, _ = tr.Delete(30)
	v, ok, _ := tr.Get(20)
	fmt.Println(v, ok, tr.Len())
	for k, v := range tr.Scan(15, 45) {
		fmt.Println(k, v)
	}
	fmt.Println(tr.Check())
	// Output:
	// 200 true 4
	// 20 200
	// 40 400
	// <nil>
}

// A batch inserted by Algorithm 2 on the scoped persist barrier paper's
// machine, then crashed and reopened: the tree holds the committed batch.
func ExampleTree_InsertBatch() {
	be, _ := hwmodel.New(hwmodel.PresetGOPE(), hwmodel.ScopedBarrier)
	m, _ := pm.NewMachine(be)
	tr, _ := btree.Create(m, "index", btree.Options{Order: 8, Capacity: 4096})
	keys := make([]uint64, 1000)
	for i := range keys {
		keys[i] = uint64(i*7919) % 100003
	}
	res, err := tr.InsertBatch(keys, keys, btree.BatchOptions{Alg: btree.Alg2})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Keys, tr.Len(), tr.Height())
	img, _ := m.Crash()
	m2, _ := pm.Reopen(img, functional.New(pm.GPULimits{}))
	tr2, _ := btree.Open(m2, "index")
	fmt.Println(tr2.Len(), tr2.Check())
	// Output:
	// 1000 1000 4
	// 1000 <nil>
}

// Lookups as kernels: one thread per query.
func ExampleTree_GetBatch() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	tr, _ := btree.Create(m, "index", btree.Options{})
	_, _ = tr.InsertBatch([]uint64{1, 2, 3, 5, 8}, []uint64{10, 20, 30, 50, 80}, btree.BatchOptions{})
	vals, found, _ := tr.GetBatch([]uint64{3, 4, 8})
	fmt.Println(vals, found)
	res, _ := tr.ScanBatch([]btree.Range{{Lo: 2, Hi: 6}}, 10)
	fmt.Println(res[0])
	// Output:
	// [30 0 80] [true false true]
	// [{2 20} {3 30} {5 50}]
}

// A scan that reports a read error: ScanErr returns it, where Scan's
// iterator could only end early.
func ExampleTree_ScanErr() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	tr, _ := btree.Create(m, "index", btree.Options{})
	_, _ = tr.InsertBatch([]uint64{1, 2, 3, 5, 8}, []uint64{10, 20, 30, 50, 80}, btree.BatchOptions{})
	sum := uint64(0)
	err := tr.ScanErr(2, 6, func(k, v uint64) bool {
		sum += v
		return true
	})
	if err != nil {
		fmt.Println("scan:", err)
		return
	}
	fmt.Println(sum)
	// Output:
	// 100
}
