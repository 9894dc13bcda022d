package crash_test

import (
	"fmt"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

// Checking a kernel of one's own: each of 64 threads persists a value and
// then a flag saying the value is there; after any crash SBRP allows, a
// flagged slot must hold its value. This is README's snippet.
func ExampleCheckFunc() {
	const threads = 64
	kernel := func(log pm.Range) func(t *scope.Thread) {
		return func(t *scope.Thread) {
			slot := log.Base.Add(uint64(16 * t.ID()))
			t.Store64(slot, uint64(100+t.ID())) // the value
			t.OFence()                          // without it the flag may persist first
			t.Store64(slot.Add(8), 1)           // the flag
		}
	}
	w := crash.Func{
		Name: "flagged-log",
		Setup: func(m *pm.Machine) error {
			_, err := m.CreateRegion("log", 16*threads)
			return err
		},
		Run: func(m *pm.Machine) error {
			log, err := m.OpenRegion("log")
			if err != nil {
				return err
			}
			_, err = scope.Launch(m, scope.Grid{Blocks: 2, Threads: threads / 2}, kernel(log))
			return err
		},
		Check: func(m *pm.Machine) error { // on the machine reopened after a crash
			log, err := m.OpenRegion("log")
			if err != nil {
				return err
			}
			buf := make([]byte, 16*threads)
			if err := m.CopyOut(log.Base, buf); err != nil {
				return err
			}
			for i := range threads {
				value, flag := pm.GetLE(buf[16*i:16*i+8]), pm.GetLE(buf[16*i+8:16*i+16])
				if flag == 1 && value != uint64(100+i) {
					return fmt.Errorf("slot %d is flagged but holds %d", i, value)
				}
			}
			return nil
		},
	}
	rep, err := crash.CheckFunc(w, crash.Config{Model: crash.SBRP, States: 2000, Seed: 1})
	if err != nil {
		panic(err) // the kernel failed without a crash
	}
	fmt.Println(rep.Summary())
	if err := rep.Err(); err != nil {
		fmt.Println(err) // the lost persist, the one ahead of it, and the verb to blame
	}
	// Output: checked 2000 crash states, 0 violations
}
