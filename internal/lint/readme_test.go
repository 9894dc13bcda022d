package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeExample marks a README code block that must be, line for line, the
// body of an Example function, so that it compiles as shown and its output
// is tested: "<!-- example: DIR/FILE_test.go ExampleName -->" on the line
// before the block.
var readmeExample = regexp.MustCompile("(?m)^<!-- example: (\\S+) (Example\\w*) -->\\n```go\\n((?s:.*?))```\\n")

func TestReadmeSnippetsAreExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks := readmeExample.FindAllSubmatch(readme, -1)
	require.NotEmpty(t, blocks, "README marks its snippets with <!-- example: FILE ExampleName -->")
	for _, b := range blocks {
		file, name, snippet := string(b[1]), string(b[2]), string(b[3])
		body := exampleBody(t, filepath.Join(root, file), name)
		require.Equal(t, body, snippet, "README's snippet differs from %s in %s", name, file)
	}
}

// exampleBody returns the body of function name in file, one tab of
// indentation removed and the "// Output:" comment left out.
func exampleBody(t *testing.T, file, name string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	require.NoError(t, err)
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != name {
			continue
		}
		start := fset.Position(fn.Body.Lbrace).Offset + 1
		end := fset.Position(fn.Body.Rbrace).Offset
		var out strings.Builder
		for _, l := range strings.Split(strings.Trim(string(src[start:end]), "\n"), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "// Output:") {
				continue
			}
			out.WriteString(strings.TrimPrefix(l, "\t") + "\n")
		}
		return out.String()
	}
	t.Fatalf("%s has no function %s", file, name)
	return ""
}
