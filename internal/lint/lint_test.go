// Package lint holds scopedpm's house rules as tests.
package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// modelDirs are the packages that must be deterministic: no wall clock and
// no unseeded randomness in the model.
var modelDirs = []string{"pm", "scope", "coro", "hwmodel", "crash", "txn", "kvs", "btree"}

func TestHouseRules(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	walkSources(t, root, func(path string) error {
		rel, _ := filepath.Rel(root, path)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		model := false
		for _, d := range modelDirs {
			model = model || top == d
		}
		// pm/native measures real time by design.
		if strings.HasPrefix(filepath.ToSlash(rel), "pm/native/") {
			model = false
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if model {
				require.NotEqual(t, "time", p, "%s: the model has no wall clock", rel)
				require.NotEqual(t, "math/rand", p, "%s: use math/rand/v2 with an explicit seed", rel)
			}
			if p == "hash/crc32" {
				require.True(t, strings.HasPrefix(filepath.ToSlash(rel), "internal/seal/"),
					"%s: checksums and sealed headers go through internal/seal (one codec, one Castagnoli table)", rel)
			}
			if p == "github.com/pkg/profile" {
				require.Equal(t, "main", f.Name.Name, "%s: pkg/profile only in main packages", rel)
			}
		}
		return nil
	})
}

// walkSources calls f with the path of every non-test Go file under root,
// skipping hidden folders and testdata, and fails t on an error.
func walkSources(t *testing.T, root string, f func(path string) error) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return f(path)
	})
	require.NoError(t, err)
}
