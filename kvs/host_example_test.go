package kvs_test

import (
	"fmt"
	"os"

	"github.com/scopedpm/scopedpm/kvs"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
)

// gpKVS as a Go store on the real backend: batches run on the host
// (HostBatches), each durable when it returns, with one sync of the log.
func ExampleHostBatches() {
	dir, err := os.MkdirTemp("", "kvs-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
	if err != nil {
		panic(err)
	}
	m, _ := pm.NewMachine(be)
	st, err := kvs.Create(m, kvs.Config{Buckets: 1024, MaxBatch: 1000}, kvs.HostBatches())
	if err != nil {
		panic(err)
	}
	if _, err := st.SetBatch([]uint32{7, 42}, []uint64{70, 420}); err != nil { // durable when it returns
		panic(err)
	}
	if err := be.Close(); err != nil {
		panic(err)
	}

	be, err = native.Open(dir, native.Options{Mode: native.ModeLog})
	if err != nil {
		panic(err)
	}
	defer be.Close()
	m, _ = pm.NewMachine(be)
	st, err = kvs.Open(m, "gpkvs", kvs.HostBatches())
	if err != nil {
		panic(err)
	}
	vals, found, _ := st.GetBatch([]uint32{42, 7, 42, 5})
	fmt.Println(vals, found)
	// Output:
	// [420 70 420 0] [true true true false]
}
