package btree

// setCrashBeforeCommit makes t's deletes return err just before their
// commit (nil: commit).
func (t *Tree) setCrashBeforeCommit(err error) { t.knobs.crashBeforeCommit = err }
