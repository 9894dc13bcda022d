//go:build unix

package btree_test

import (
	"fmt"
	"os"

	"github.com/scopedpm/scopedpm/btree"
)

// An embedded ordered store in a directory: every write is durable when it
// returns, and the keys are there after Close and OpenDir.
func ExampleOpenDir() {
	dir, err := os.MkdirTemp("", "btree-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := btree.OpenDir(dir, nil)
	if err != nil {
		panic(err)
	}
	if err := db.Put(42, 4200); err != nil { // durable when it returns
		panic(err)
	}
	if err := db.PutBatch([]uint64{1, 2, 3}, []uint64{10, 20, 30}); err != nil { // all or nothing
		panic(err)
	}
	if err := db.Close(); err != nil {
		panic(err)
	}

	db, err = btree.OpenDir(dir, nil)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	v, ok, _ := db.Get(42)
	fmt.Println(v, ok)
	_ = db.Scan(2, 100, func(k, v uint64) bool {
		fmt.Println(k, v)
		return true
	})
	// Output:
	// 4200 true
	// 2 20
	// 3 30
	// 42 4200
}
