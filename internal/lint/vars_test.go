package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoExportedMutableVars: an exported package-level variable is shared,
// mutable state any importer can change (issue 30). The only ones allowed
// are sentinel errors, made by errors.New or fmt.Errorf; a table, a default
// or a value is a function or a constant.
func TestNoExportedMutableVars(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var bad []string
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
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !name.IsExported() {
						continue
					}
					if i < len(vs.Values) && isErrorCtor(vs.Values[i]) {
						continue
					}
					bad = append(bad, fset.Position(name.Pos()).String()+": var "+name.Name)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(bad)
	require.Empty(t, bad, "exported package-level variables that are not sentinel errors: make them functions or constants")
}

// isErrorCtor reports whether e is a call of errors.New or fmt.Errorf.
func isErrorCtor(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && (pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf")
}
