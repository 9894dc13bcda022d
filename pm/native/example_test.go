//go:build unix

package native_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

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

// Faults are values: a wrapper around the file system fails the log's
// next sync with EIO, and the host write whose durability it breaks
// returns the error; the backend then refuses writes until reopened.
func ExampleInjectFS() {
	dir, err := os.MkdirTemp("", "native-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	failSync := false
	fs := native.InjectFS(native.OSFS(), native.InjectorFunc(func(op native.FSOp, path string) error {
		if failSync && op == native.FSSync {
			return syscall.EIO
		}
		return nil
	}))
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog, FS: fs})
	if err != nil {
		panic(err)
	}
	m, _ := pm.NewMachine(be)
	r, _ := m.CreateRegion("d", 64)
	fmt.Println(m.CopyIn(r.Base, []byte("durable")))
	failSync = true
	err = m.CopyIn(r.Base, []byte("unknown"))
	fmt.Println(errors.Is(err, native.ErrIO), errors.Is(err, syscall.EIO))
	fmt.Println(errors.Is(be.Close(), native.ErrIO))
	// Output:
	// <nil>
	// true true
	// true
}

// Defer gives a commit made of several host writes one sync of the log:
// the log keeps their order, and the end of Defer makes them durable.
func ExampleBackend_Defer() {
	dir, err := os.MkdirTemp("", "native-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	be, err := native.Open(dir, native.Options{Mode: native.ModeLog})
	if err != nil {
		panic(err)
	}
	defer be.Close()
	m, _ := pm.NewMachine(be)
	r, _ := m.CreateRegion("d", 64)
	before := be.Stats().Syncs
	err = be.Defer(func() error {
		if err := m.CopyIn(r.Base.Add(8), []byte("payload.")); err != nil {
			return err
		}
		return m.CopyIn(r.Base, []byte{1, 0, 0, 0, 0, 0, 0, 0}) // the commit word, after the payload
	})
	fmt.Println(err, be.Stats().Syncs-before)
	// Output:
	// <nil> 1
}
