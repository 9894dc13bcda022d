package kvs

import (
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
	"github.com/scopedpm/scopedpm/txn"
)

// GPUExec returns the txn.Exec the store's kernels log through: txn.GPU(t),
// except that a spin lock taken with CAS64 (a swap of 0 for 1, as
// txn.ConvLog's partition locks are) waits for the lock word with a
// device-scope PAcq before it swaps, and its release (a swap of 1 for 0) is
// a device-scope PRel of 0. The memory effect is the same lock; the
// release and acquire make the handoff a persist order the crash checker
// sees (a lock taken and released with plain atomics orders nothing under
// SBRP), and a timing backend starts the next holder's critical section no
// earlier than the last one ended.
func GPUExec(t *scope.Thread) txn.Exec { return lockExec{Exec: txn.GPU(t), t: t} }

type lockExec struct {
	txn.Exec
	t *scope.Thread
}

func (l lockExec) CAS64(a pm.Addr, old, nv uint64) uint64 {
	switch {
	case old == 0 && nv == 1:
		for l.t.PAcq(a, pm.Device) != 0 {
		}
		return l.t.AtomicCAS64(a, 0, 1, pm.Device)
	case old == 1 && nv == 0:
		l.t.PRel(a, 0, pm.Device)
		return 1
	}
	return l.t.AtomicCAS64(a, old, nv, pm.Device)
}
