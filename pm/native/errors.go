package native

import "errors"

// Sentinel errors; the package wraps them with %w and context. Errors about
// a region file's contents also wrap pm.ErrCorrupt.
var (
	// ErrForeign: a region or log file has another magic.
	ErrForeign = errors.New("native: not a file of this package")
	// ErrVersion: a region file of another format version.
	ErrVersion = errors.New("native: unsupported region file version")
	// ErrSizeMismatch: a region file's length disagrees with its header, or
	// a region is reopened with another size than it has.
	ErrSizeMismatch = errors.New("native: region size mismatch")
	// ErrUnsupported: the requested durability mode is not available here.
	ErrUnsupported = errors.New("native: mode not supported")
	// ErrLocked: another backend holds the directory.
	ErrLocked = errors.New("native: directory in use")
	// ErrClosed: the backend was closed (or crashed).
	ErrClosed = errors.New("native: backend closed")
	// ErrIO: a file operation or a sync failed.
	ErrIO = errors.New("native: I/O error")
	// ErrJournal: a power-cut query without a journal or out of range.
	ErrJournal = errors.New("native: journal")
	// ErrNotStored: the machine has a PM region the backend does not store
	// (created through a wrapper that hides pm.Storage): its persists
	// would not be durable, so the backend refuses to pretend.
	ErrNotStored = errors.New("native: region not stored by the backend")
)
