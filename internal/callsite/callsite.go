// Package callsite names the call site of a persistency verb: the first
// stack frame outside scopedpm's library. The crash checker's reports,
// pmcheck's mutants and the scope advisor all use this one definition, and
// scope's per-site overrides (scope.WithSiteScopes) are keyed by it.
//
// The library is the runtime a program is written against: the packages
// pm and pm/... (the recorder, the backends), scope, hwmodel, crash,
// coro, txn and internal/..., plus the Go standard library. Everything
// else is user code, including every _test.go file (a test's kernel is
// the user's) and scopedpm's own data structures and
// workloads (kvs, btree, workloads): they are programs written with the API,
// so a verb a txn log issues on behalf of a kvs kernel is sited at the kvs
// line that called txn, not at txn's wrapper, and mutating that site
// changes one use of the log, not every log in the program.
package callsite

import (
	"runtime"
	"strconv"
	"strings"
)

// Module is scopedpm's module path.
const Module = "github.com/scopedpm/scopedpm"

// library lists the module's packages (and their subpackages) that are
// the library, relative to Module.
var library = []string{"pm", "scope", "hwmodel", "coro", "txn", "crash", "internal"}

// IsLibrary reports whether package path pkg is part of the library: one
// of the module's library packages or the Go standard library (a path
// whose first element has no dot).
func IsLibrary(pkg string) bool {
	if rel, ok := strings.CutPrefix(pkg, Module+"/"); ok {
		for _, l := range library {
			if rel == l || strings.HasPrefix(rel, l+"/") {
				return true
			}
		}
		return false
	}
	if pkg == Module {
		return false
	}
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".") && pkg != "main"
}

// Package returns the package path of a function name as runtime.Frame
// reports it ("github.com/x/y.(*T).M.func1" is in "github.com/x/y").
func Package(function string) string {
	slash := strings.LastIndexByte(function, '/')
	dot := strings.IndexByte(function[slash+1:], '.')
	if dot < 0 {
		return function
	}
	return function[:slash+1+dot]
}

// Name returns the site of a frame: the file's path relative to the module
// root for the module's own files ("workloads/reduction.go:57"), else the
// package path and the file's base name ("example.com/app/kernel.go:12",
// "main/kernel.go:12"). An external test package (pkg_test) is sited in its
// package's directory.
func Name(function, file string, line int) string {
	pkg := strings.TrimSuffix(Package(function), "_test")
	base := file[strings.LastIndexByte(file, '/')+1:]
	dir := pkg
	if rel, ok := strings.CutPrefix(pkg, Module+"/"); ok {
		dir = rel
	} else if pkg == Module {
		dir = ""
	}
	if dir != "" {
		base = dir + "/" + base
	}
	return base + ":" + strconv.Itoa(line)
}

// Site returns the site of the first frame outside the library above the
// caller of Site, skipping skip more frames (0: start at Site's caller's
// caller). If every frame is in the library (a kernel the library itself
// launches), it returns the innermost frame of the library's higher layers
// (txn, coro, crash), and "" if there is none.
func Site(skip int) string {
	var pcs [48]uintptr
	n := runtime.Callers(skip+2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	fallback := ""
	for {
		f, more := frames.Next()
		pkg := Package(f.Function)
		if !IsLibrary(pkg) || strings.HasSuffix(f.File, "_test.go") {
			return Name(f.Function, f.File, f.Line)
		}
		if fallback == "" && isLayer(pkg) {
			fallback = Name(f.Function, f.File, f.Line)
		}
		if !more {
			return fallback
		}
	}
}

// isLayer reports whether a library package is built on the verbs (and so
// is a useful site when no user frame issued them), as opposed to the
// machinery that carries them out.
func isLayer(pkg string) bool {
	rel, ok := strings.CutPrefix(pkg, Module+"/")
	return ok && (rel == "txn" || rel == "coro" || rel == "crash" || strings.HasPrefix(rel, "crash/"))
}
