// Package callsite names the call site of a persistency verb: the first
// stack frame outside scopedpm's library. The crash checker's reports,
// pmcheck's mutants and the scope advisor all use this one definition, and
// scope's per-site overrides (scope.WithSiteScopes) are keyed by it.
//
// Which of the module's packages are the library follows from the module's
// floor plan (internal/layers), not from a list kept here: the machinery
// (pm and pm/..., scope, hwmodel, internal/...) and the layers built on the
// verbs (coro, txn, crash) are the library, and so is the Go standard
// library. Everything else is user code: packages of other modules, every
// _test.go file (a test's kernel is the user's), and scopedpm's own data
// structures and workloads (btree, kvs, workloads, bench): they are
// programs written with the API, so a verb a txn log issues on behalf of a
// kvs kernel is sited at the kvs line that called txn, not at txn's
// wrapper, and mutating that site changes one use of the log, not every log
// in the program. A new subpackage takes its parent's place in the plan.
package callsite

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/scopedpm/scopedpm/internal/layers"
)

// Module is scopedpm's module path.
const Module = layers.Module

// IsLibrary reports whether package path pkg is part of the library: a
// package of the module whose place in the floor plan is not a program, or
// a package of the Go standard library (a path whose first element has no
// dot).
func IsLibrary(pkg string) bool {
	if rel, ok := layers.Rel(pkg); ok {
		p, ok := layers.Of(rel)
		return ok && p.Role != layers.Program
	}
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".") && pkg != "main"
}

// isLayer reports whether a library package is built on the verbs (and so
// is a useful site when no user frame issued them), as opposed to the
// machinery that carries them out.
func isLayer(pkg string) bool {
	rel, ok := layers.Rel(pkg)
	if !ok {
		return false
	}
	p, ok := layers.Of(rel)
	return ok && p.Role == layers.Layer
}

// mainModule is the path of the main module of the running binary ("" if
// the binary has no build information), and its main package's path.
var mainModule = sync.OnceValues(func() (string, string) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", ""
	}
	return bi.Main.Path, bi.Path
})

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

// Name returns the site of a frame: the file's path relative to its
// module's root for the files of scopedpm and of the running binary's main
// module ("workloads/reduction.go:57", "kern/k.go:12" for example.com/app/kern
// when example.com/app is the main module), else the package path and the
// file's base name ("example.com/lib/kernel.go:12"). Package main is sited
// in its directory in its module, whether the build names it (go build,
// go run ./cmd/x, go test) or not (go run k.go: the file's go.mod says);
// only when nothing does is it "main/k.go:12". An external test package
// (pkg_test) is sited in its package's directory.
func Name(function, file string, line int) string {
	mod, mainPkg := mainModule()
	return name(function, file, line, mod, mainPkg)
}

// moduleRoot returns the directory of the go.mod that holds dir and the
// module path it declares (a variable for tests).
var moduleRoot = findModuleRoot

// roots caches findModuleRoot per directory.
var roots sync.Map // dir -> modRoot

type modRoot struct {
	root, mod string
	ok        bool
}

// findModuleRoot walks up from dir to the first go.mod and reads its
// module line. It runs once per directory of a package main built from
// files ("go run k.go"), on the machine that built it.
func findModuleRoot(dir string) (string, string, bool) {
	if r, ok := roots.Load(dir); ok {
		r := r.(modRoot)
		return r.root, r.mod, r.ok
	}
	r := modRoot{}
	for d := dir; ; {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if mod := modulePath(data); mod != "" {
				r = modRoot{filepath.ToSlash(d), mod, true}
			}
			break
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	roots.Store(dir, r)
	return r.root, r.mod, r.ok
}

// modulePath returns the path of a go.mod's module directive, or "".
func modulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// mainPackage returns the import path of a package main whose frame is in
// file, given the binary's main module and main package path: the main
// package of a binary built from a package, or, for one built from files
// ("command-line-arguments") or a test binary, the directory of the file
// in its module (by a -trimpath file name that starts with the module
// path, or by its go.mod). It returns "main" if none says.
func mainPackage(file, mod, mainPkg string) string {
	if mainPkg != "" && mainPkg != "command-line-arguments" && !strings.HasSuffix(mainPkg, ".test") {
		return mainPkg
	}
	dir := file[:max(strings.LastIndexByte(file, '/'), 0)]
	if mod != "" && (dir == mod || strings.HasPrefix(dir, mod+"/")) {
		return dir // -trimpath: the file is named by its package path
	}
	if !filepath.IsAbs(filepath.FromSlash(file)) {
		return "main" // -trimpath of a build from files: nothing says where
	}
	if root, m, ok := moduleRoot(dir); ok {
		if rel := strings.TrimPrefix(dir, root); rel == "" {
			return m
		} else if strings.HasPrefix(rel, "/") {
			return m + rel
		}
	}
	return "main"
}

// name is Name with the main module's path and its main package's path.
func name(function, file string, line int, mod, mainPkg string) string {
	pkg := strings.TrimSuffix(Package(function), "_test")
	if pkg == "main" {
		pkg = mainPackage(file, mod, mainPkg)
	}
	base := file[strings.LastIndexByte(file, '/')+1:]
	dir := pkg
	if rel, ok := layers.Rel(pkg); ok {
		dir = rel
	} else if mod != "" && mod != Module && (pkg == mod || strings.HasPrefix(pkg, mod+"/")) {
		dir = strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
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
