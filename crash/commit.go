package crash

import "github.com/scopedpm/scopedpm/pm"

// CommitPointer is implemented by a workload whose transactions complete
// with a persist to one commit word (a transaction flag, a done flag). A
// crash "just before the transaction completes" (the crash point of SBRP
// Figure 11) is a crash just before the last persist to that word became
// durable: recovery then has a whole transaction to undo or redo.
type CommitPointer interface {
	// CommitPoint returns the commit word's address on a machine that
	// Setup prepared.
	CommitPoint(m *pm.Machine) (pm.Addr, error)
}
