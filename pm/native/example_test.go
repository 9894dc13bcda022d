//go:build unix

package native_test

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/native"
	"github.com/scopedpm/scopedpm/scope"
)

// A kernel persists to a region file; a new process (here: a new backend
// on the same directory) finds the region at the same base address with
// the same bytes.
func Example() {
	dir, err := os.MkdirTemp("", "native-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
	if err != nil {
		panic(err)
	}
	m, _ := pm.NewMachine(be)
	r, _ := m.CreateRegion("slots", 8*64) // the file slots.pmr
	_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: 32}, func(t *scope.Thread) {
		t.Store64(r.Base.Add(8*uint64(t.ID())), uint64(t.ID())*10)
		t.DFence() // durable when the launch returns; one sync of the log at the launch's end, shared by all threads
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(be.Name())
	_ = be.Close()

	be2, err := native.Open(dir, native.Options{Mode: native.ModeLog})
	if err != nil {
		panic(err)
	}
	defer be2.Close()
	m2, _ := pm.NewMachine(be2)
	r2, _ := m2.OpenRegion("slots")
	buf := make([]byte, 8)
	_ = m2.CopyOut(r2.Base.Add(8*37), buf)
	fmt.Println(r2.Base == r.Base, binary.LittleEndian.Uint64(buf))
	// Output:
	// native/log
	// true 370
}
