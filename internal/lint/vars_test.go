package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
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
	walkSources(t, root, func(path string) error {
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

// packageWrites are the functions allowed to write a package-level
// variable after init, as "dir func var", each with its reason. Keep it
// short; a stale entry fails the test.
var packageWrites = map[string]string{
	"bench Register registry":                "the experiment registry, filled by init functions",
	"workloads register registry":            "the workload registry, filled by init functions",
	"workloads registerScaled registry":      "the workload registry, filled by init functions",
	"bench PaperValues paperVals":            "sync.Once: the embedded table, parsed once",
	"bench PaperValues paperErr":             "sync.Once: the embedded table, parsed once",
	"internal/callsite findModuleRoot roots": "a cache of each directory's module root (a pure function of the file system)",
	"scope ReleaseIdle pool":                 "the process's idle coroutines, kept between launches: not yet owned by a machine (issue 30)",
}

// TestNoPackageStateWrittenAfterInit: a function other than init that
// assigns to a package-level variable (or an element or field of one),
// deletes from it or calls Store, Add, Swap, Set or Delete on it keeps
// state that outlives its call, hidden from its callers (issue 30). Only
// the registries filled at init and the caches of packageWrites may.
func TestNoPackageStateWrittenAfterInit(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{}
	walkSources(t, root, func(path string) error {
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkgs[filepath.ToSlash(rel)] = append(pkgs[filepath.ToSlash(rel)], f)
		return nil
	})
	used := map[string]bool{}
	var bad []string
	for dir, files := range pkgs {
		vars := map[string]token.Pos{}
		for _, f := range files {
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, s := range g.Specs {
						for _, n := range s.(*ast.ValueSpec).Names {
							vars[n.Name] = n.Pos()
						}
					}
				}
			}
		}
		for _, f := range files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil || fn.Name.Name == "init" && fn.Recv == nil {
					continue
				}
				written := func(at ast.Node, e ast.Expr) {
					for {
						switch x := e.(type) {
						case *ast.IndexExpr:
							e = x.X
							continue
						case *ast.SelectorExpr:
							e = x.X
							continue
						case *ast.StarExpr:
							e = x.X
							continue
						case *ast.ParenExpr:
							e = x.X
							continue
						}
						break
					}
					id, ok := e.(*ast.Ident)
					if !ok || id.Name == "_" {
						return
					}
					pos, ok := vars[id.Name]
					if !ok || id.Obj != nil && id.Obj.Pos() != pos {
						return // a local of the same name
					}
					key := dir + " " + fn.Name.Name + " " + id.Name
					if _, ok := packageWrites[key]; ok {
						used[key] = true
						return
					}
					bad = append(bad, fset.Position(at.Pos()).String()+": "+fn.Name.Name+" writes package variable "+id.Name)
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					switch x := n.(type) {
					case *ast.AssignStmt:
						for _, l := range x.Lhs {
							written(x, l)
						}
					case *ast.IncDecStmt:
						written(x, x.X)
					case *ast.CallExpr:
						if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "delete" || id.Name == "clear") && len(x.Args) > 0 {
							written(x, x.Args[0])
						}
						if se, ok := x.Fun.(*ast.SelectorExpr); ok {
							switch se.Sel.Name {
							case "Store", "Add", "Swap", "LoadOrStore", "CompareAndSwap", "Set", "Delete":
								written(x, se.X)
							}
						}
					}
					return true
				})
			}
		}
	}
	for key := range packageWrites {
		if !used[key] {
			bad = append(bad, "packageWrites: "+key+" writes no package variable any more; remove it")
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "package-level state written after init: keep it in a value its caller owns, or list it in packageWrites with its reason")
}
