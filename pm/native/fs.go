//go:build unix

package native

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// FS is the backend's only way to touch files (Pebble's vfs.FS idea): the
// region files, the persist log and the directory. Options.FS replaces the
// operating system's (OSFS()) with a wrapper, such as InjectFS, that injects
// faults or counts calls.
type FS interface {
	// OpenFile opens a file as os.OpenFile does.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file.
	Remove(name string) error
	// Rename renames a file, replacing newname atomically.
	Rename(oldname, newname string) error
	// ReadDir lists a directory.
	ReadDir(name string) ([]os.DirEntry, error)
	// MkdirAll creates a directory and its parents.
	MkdirAll(name string, perm os.FileMode) error
	// Stat describes a file.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(name string) error
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's data and size durable (fdatasync).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Stat describes the file.
	Stat() (os.FileInfo, error)
	// Fd returns the descriptor, for mmap in dax mode.
	Fd() uintptr
}

// OSFS returns the operating system's file system.
func OSFS() FS { return osFS{} }

type osFS struct{}

type osFile struct{ *os.File }

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(o, n string) error                     { return os.Rename(o, n) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Sync is fdatasync where the system has it.
func (f osFile) Sync() error { return fdatasync(f.File) }

// FSOp names a file operation for an Injector.
type FSOp uint8

// File operations an Injector sees.
const (
	FSOpen     FSOp = iota // FS.OpenFile
	FSRemove               // FS.Remove
	FSRename               // FS.Rename
	FSReadDir              // FS.ReadDir
	FSSyncDir              // FS.SyncDir
	FSRead                 // File.ReadAt
	FSWrite                // File.WriteAt
	FSSync                 // File.Sync
	FSTruncate             // File.Truncate
)

var fsOpNames = [...]string{"open", "remove", "rename", "readdir", "syncdir", "read", "write", "sync", "truncate"}

// String returns the operation's name ("write", "sync", ...).
func (o FSOp) String() string {
	if int(o) < len(fsOpNames) {
		return fsOpNames[o]
	}
	return fmt.Sprintf("fsop(%d)", uint8(o))
}

// Injector decides, before each file operation, whether it fails (Pebble's
// errorfs.Injector): a non-nil error is returned instead of doing it.
type Injector interface {
	MaybeError(op FSOp, path string) error
}

// InjectorFunc is a function that is an Injector.
type InjectorFunc func(op FSOp, path string) error

// MaybeError calls f.
func (f InjectorFunc) MaybeError(op FSOp, path string) error { return f(op, path) }

// NthFault is an Injector that fails the N-th operation Op (N >= 1) on
// the files whose path Match accepts (every file when Match is nil), once,
// with Err; the others pass. It is safe for concurrent use.
type NthFault struct {
	Op    FSOp
	Match func(path string) bool
	N     int
	Err   error

	mu   sync.Mutex
	seen int
	hit  bool
}

// MaybeError counts op on path and fails the N-th that matches.
func (f *NthFault) MaybeError(op FSOp, path string) error {
	if op != f.Op || (f.Match != nil && !f.Match(path)) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen++
	if !f.hit && f.seen == f.N {
		f.hit = true
		return f.Err
	}
	return nil
}

// Hit reports whether the fault was injected.
func (f *NthFault) Hit() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hit
}

// String describes the fault ("input/output error on write #3").
func (f *NthFault) String() string { return fmt.Sprintf("%v on %v #%d", f.Err, f.Op, f.N) }

// InjectFS returns fs with every operation first offered to inj. A write
// that inj fails writes nothing; a sync that it fails syncs nothing.
func InjectFS(fs FS, inj Injector) FS { return &injectFS{fs: fs, inj: inj} }

type injectFS struct {
	fs  FS
	inj Injector
}

type injectFile struct {
	File
	path string
	inj  Injector
}

func (f *injectFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := f.inj.MaybeError(FSOpen, name); err != nil {
		return nil, err
	}
	in, err := f.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &injectFile{File: in, path: name, inj: f.inj}, nil
}

func (f *injectFS) Remove(name string) error {
	if err := f.inj.MaybeError(FSRemove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

func (f *injectFS) Rename(o, n string) error {
	if err := f.inj.MaybeError(FSRename, n); err != nil {
		return err
	}
	return f.fs.Rename(o, n)
}

func (f *injectFS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := f.inj.MaybeError(FSReadDir, name); err != nil {
		return nil, err
	}
	return f.fs.ReadDir(name)
}

func (f *injectFS) MkdirAll(name string, perm os.FileMode) error { return f.fs.MkdirAll(name, perm) }
func (f *injectFS) Stat(name string) (os.FileInfo, error)        { return f.fs.Stat(name) }

func (f *injectFS) SyncDir(name string) error {
	if err := f.inj.MaybeError(FSSyncDir, name); err != nil {
		return err
	}
	return f.fs.SyncDir(name)
}

func (f *injectFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(FSRead, f.path); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *injectFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(FSWrite, f.path); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *injectFile) Sync() error {
	if err := f.inj.MaybeError(FSSync, f.path); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *injectFile) Truncate(size int64) error {
	if err := f.inj.MaybeError(FSTruncate, f.path); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// Counter is an Injector that fails nothing and counts every operation by
// kind; safe for concurrent use.
type Counter struct {
	mu sync.Mutex
	n  [len(fsOpNames)]uint64
}

// MaybeError counts op and returns nil.
func (c *Counter) MaybeError(op FSOp, _ string) error {
	c.mu.Lock()
	if int(op) < len(c.n) {
		c.n[op]++
	}
	c.mu.Unlock()
	return nil
}

// Count returns how many operations of kind op were seen.
func (c *Counter) Count(op FSOp) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int(op) < len(c.n) {
		return c.n[op]
	}
	return 0
}

// fdatasync syncs f's data (and its size, which reading it back needs).
func fdatasync(f *os.File) error {
	for {
		err := fdatasyncFd(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
