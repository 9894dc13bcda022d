// Package layers is the module's floor plan (the README's "Layout") as data: the
// floor of every package and whether its code is the library's machinery, a
// layer built on the verbs, or a program written with the API. The lint test
// (internal/lint) checks every import against the floors; internal/callsite
// derives call sites from the roles. A package is placed by its directory's
// longest entry, so a new subpackage (pm/x, crash/x, internal/x) inherits its
// parent's place, and a new top-level directory fails the lint test until it
// is given one.
package layers

import "strings"

// Module is scopedpm's module path.
const Module = "github.com/scopedpm/scopedpm"

// Role is what a package's frames are to the call-site rule.
type Role uint8

const (
	// Machinery carries the verbs out (the executors, backends, helpers):
	// its frames are never a call site.
	Machinery Role = iota
	// Layer is a library built on the verbs (logs, coroutines, the
	// checker): its frames are a call site only when no program or user
	// frame issued the verb (a kernel the library itself launches).
	Layer
	// Program is code written with the API, as a user writes it (the data
	// structures, workloads and experiments): its frames are call sites.
	Program
)

// Place is one entry of the floor plan.
type Place struct {
	Dir   string // module-relative directory; the entry covers its subdirectories
	Floor int    // a package imports only from lower floors
	Role  Role
	Why   string // what the floor holds
}

// Floors of the plan. The tens are the README's floors; pm's subpackages sit
// one above pm, and pmbench and pmcheck one above bench.
const (
	FloorHelper   = 0  // bottom helpers (call sites, seals): importable by every package
	FloorPM       = 10 // the address space, the Backend seam, errors
	FloorPMModels = 11 // models, backends and the recorder, on pm
	FloorExec     = 20 // the executors and the timing backend
	FloorLayers   = 30 // the checker, logs, the B+tree
	FloorKVS      = 40
	FloorWork     = 50
	FloorTestkit  = 55 // test kits: importable by bench and by tests only
	FloorBench    = 60
	FloorCmd      = 61
)

var plan = []Place{
	{"internal", FloorHelper, Machinery, "bottom helpers"},
	{"internal/lint", FloorHelper, Machinery, "house rules as tests"},
	{"internal/testkit", FloorTestkit, Machinery, "test kits for the top floors and tests"},
	{"pm", FloorPM, Machinery, "address space, regions, Backend, errors"},
	{"pm/persistency", FloorPMModels, Machinery, "each persistency model once"},
	{"pm/functional", FloorPMModels, Machinery, "the untimed reference backend"},
	{"pm/native", FloorPMModels, Machinery, "the real backend"},
	{"pm/record", FloorPMModels, Machinery, "the recording wrapper of any backend"},
	{"scope", FloorExec, Machinery, "the GPU kernel executor"},
	{"coro", FloorExec, Layer, "CPU tasks as coroutines"},
	{"hwmodel", FloorExec, Machinery, "the timing backend"},
	{"crash", FloorLayers, Layer, "the crash checker, above the executors it drives"},
	{"txn", FloorLayers, Layer, "undo logs and transactions"},
	{"btree", FloorLayers, Program, "the persistent B+tree"},
	{"kvs", FloorKVS, Program, "gpKVS"},
	{"workloads", FloorWork, Program, "the papers' applications"},
	{"bench", FloorBench, Program, "the experiment registry"},
	{"bench/cmd", FloorCmd, Program, "pmbench and pmcheck"},
}

// Plan returns a copy of the floor plan.
func Plan() []Place { return append([]Place(nil), plan...) }

// Of returns the place of a module-relative package directory ("pm/native",
// "crash"): its longest entry. ok is false for a directory the plan does not
// cover.
func Of(dir string) (p Place, ok bool) {
	for _, e := range plan {
		if (dir == e.Dir || strings.HasPrefix(dir, e.Dir+"/")) && len(e.Dir) >= len(p.Dir) {
			p, ok = e, true
		}
	}
	return p, ok
}

// Rel returns the module-relative directory of package path pkg, and false
// for a package outside the module.
func Rel(pkg string) (string, bool) {
	if pkg == Module {
		return "", true
	}
	return strings.CutPrefix(pkg, Module+"/")
}
