package lint

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/layers"
)

// floorExceptions are the imports allowed to point up a floor or across
// one, as "importer -> imported" module-relative directories, each with its
// reason. Keep it empty; a stale entry fails the test.
var floorExceptions = map[string]string{}

// TestImportFloors checks the README's layout: every package of the module
// has a place in internal/layers' floor plan, and a package's non-test files
// import only packages of lower floors (bottom helpers import each other).
// Test files may import anything Go allows: the test kits are for them.
func TestImportFloors(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	used := map[string]bool{}
	var bad []string
	walkSources(t, root, func(path string) error {
		rel, _ := filepath.Rel(root, path)
		dir := filepath.ToSlash(filepath.Dir(rel))
		from, ok := layers.Of(dir)
		if !ok {
			bad = append(bad, dir+": no place in internal/layers' floor plan")
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			to, ok := layers.Rel(p)
			if !ok || to == dir {
				continue
			}
			at, ok := layers.Of(to)
			if !ok {
				bad = append(bad, rel+" imports "+to+", which has no place in the floor plan")
				continue
			}
			if at.Floor < from.Floor || at.Floor == layers.FloorHelper && from.Floor == layers.FloorHelper {
				continue
			}
			key := dir + " -> " + to
			if _, ok := floorExceptions[key]; ok {
				used[key] = true
				continue
			}
			bad = append(bad, rel+" (floor "+strconv.Itoa(from.Floor)+", "+from.Why+") imports "+to+
				" (floor "+strconv.Itoa(at.Floor)+", "+at.Why+")")
		}
		return nil
	})
	for key := range floorExceptions {
		if !used[key] {
			bad = append(bad, "floorExceptions: "+key+" is not an import any more; remove it")
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "imports that point up a floor (README Layout; the plan is internal/layers)")
}

// TestFloorRule checks the rule on a few hand-placed imports, so that the
// walk above cannot pass by placing nothing.
func TestFloorRule(t *testing.T) {
	up := func(from, to string) bool {
		f, ok := layers.Of(from)
		require.True(t, ok, from)
		a, ok := layers.Of(to)
		require.True(t, ok, to)
		return a.Floor >= f.Floor && !(a.Floor == layers.FloorHelper && f.Floor == layers.FloorHelper)
	}
	for _, tc := range []struct {
		from, to string
		up       bool
	}{
		{"hwmodel", "coro", true},
		{"hwmodel", "scope", true},
		{"scope", "coro", true},
		{"crash", "scope", false},
		{"pm", "pm/persistency", true},
		{"pm/record", "internal/callsite", false},
		{"pm/native", "internal/seal", false},
		{"internal/callsite", "internal/layers", false},
		{"scope", "internal/testkit/speed", true},
		{"workloads", "internal/testkit/kerneltest", true},
		{"bench", "internal/testkit/speed", false},
		{"bench/cmd/pmbench", "bench", false},
		{"kvs", "btree", false},
		{"txn", "btree", true},
	} {
		require.Equal(t, tc.up, up(tc.from, tc.to), "%s -> %s", tc.from, tc.to)
	}
}
