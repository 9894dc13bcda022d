package txn_test

import (
	"fmt"

	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/pm/functional"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

// Every GPU thread updates its own counter in a transaction logged in its
// HCL slot; a crash before a commit is undone by Recover.
func ExampleBegin() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	data, _ := m.CreateRegion("counters", 8*64)
	log, _ := txn.CreateHCL(m, "undo", 1, 64, 256)

	_, err := scope.Launch(m, scope.Grid{Blocks: 1, Threads: 64}, func(t *scope.Thread) {
		x := txn.GPU(t)
		slot, _ := log.Part(x)
		tx, _ := txn.Begin(x, log, slot)
		me := data.Base.Add(uint64(8 * t.ID()))
		_ = tx.Add(me, 8) // old value logged, ordered before the update
		_ = tx.Store64(me, uint64(t.ID())+100)
		if t.ID()%2 == 0 {
			_ = tx.Commit() // one 8-byte store commits
		} // odd threads "crash" before committing
	})
	if err != nil {
		panic(err)
	}
	img, _ := m.Crash()
	m2, _ := pm.Reopen(img, functional.New(pm.GPULimits{}))
	log2, _ := txn.OpenHCL(m2, "undo")
	n, _ := txn.RecoverAll(txn.Host(m2), log2)
	v0, _ := m2.Memory().Load(data.Base, 8)
	v1, _ := m2.Memory().Load(data.Base.Add(8), 8)
	fmt.Println("undone:", n, "thread 0:", v0, "thread 1:", v1)
	// Output: undone: 32 thread 0: 100 thread 1: 0
}

// A conventional log partition used from the host.
func ExampleCreateConv() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	log, _ := txn.CreateConv(m, "log", 2, 1024)
	h := txn.Host(m)
	_ = log.Insert(h, 1, []byte("first"))
	_ = log.Insert(h, 1, []byte("second"))
	last, _ := log.Read(h, 1)
	size, _ := log.Size(h, 1)
	_ = log.Remove(h, 1)
	all, _ := log.Entries(h, 1)
	fmt.Printf("%s %d %q %v\n", last, size, all, log.Check(h))
	// Output: second 32 ["first"] <nil>
}

// Checkpoint a device array, lose it in a crash, restore it.
func ExampleCheckpoint() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	cp, _ := txn.CreateCheckpoint(m, "weights", 1, 1, 4096)
	w, _ := m.Alloc(pm.DeviceMem, 16)
	_ = m.CopyIn(w, []byte("trained weights!"))
	h := txn.Host(m)
	_ = cp.Register(h, 0, w, 16)
	_ = cp.SaveKernel(m, 0, scope.Grid{Blocks: 1, Threads: 32})

	img, _ := m.Crash()
	m2, _ := pm.Reopen(img, functional.New(pm.GPULimits{}))
	cp2, _ := txn.OpenCheckpoint(m2, "weights")
	w2, _ := m2.Alloc(pm.DeviceMem, 16)
	h2 := txn.Host(m2)
	_ = cp2.Register(h2, 0, w2, 16) // same order, same size
	_ = cp2.Restore(h2, 0)
	buf := make([]byte, 16)
	_ = m2.CopyOut(w2, buf)
	seq, _ := cp2.Seq(h2, 0)
	fmt.Println(string(buf), seq)
	// Output: trained weights! 1
}

// Epochs marked in the epoch status table; recovery resumes after the last
// completed one.
func ExampleEST() {
	m, _ := pm.NewMachine(functional.New(pm.GPULimits{}))
	est, _ := txn.CreateEST(m, "est", 1)
	log, _ := txn.CreateConv(m, "log", 1, 1024)
	data, _ := m.CreateRegion("data", 8)
	_, _ = scope.Launch(m, scope.Grid{Blocks: 1, Threads: 1}, func(t *scope.Thread) {
		x := txn.GPU(t)
		for epoch := uint64(1); epoch <= 3; epoch++ {
			tx, _ := txn.BeginEpoch(x, log, 0, est, 0, epoch)
			_ = tx.Add(data.Base, 8)
			_ = tx.Store64(data.Base, epoch*10)
			if epoch < 3 {
				_ = tx.Commit()
			} // the crash hits during epoch 3
		}
	})
	img, _ := m.Crash()
	m2, _ := pm.Reopen(img, functional.New(pm.GPULimits{}))
	est2, _ := txn.OpenEST(m2, "est")
	log2, _ := txn.OpenConv(m2, "log")
	last, undone, _ := txn.RecoverEpoch(txn.Host(m2), log2, 0, est2, 0)
	v, _ := m2.Memory().Load(data.Base, 8)
	fmt.Println("resume after epoch", last, "undone", undone, "value", v)
	// Output: resume after epoch 2 undone 1 value 20
}
