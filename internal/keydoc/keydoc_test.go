package keydoc_test

import (
	"go/parser"
	"go/token"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/scopedpm/scopedpm/internal/keydoc"
)

const src = `package cfg

// Config is the root.
type Config struct {
	// Name names it.
	Name string ` + "`json:\"name\"`" + `
	// Near is the near memory: fast.
	Near Mem ` + "`json:\"near\"`" + `
	// Far is the far memory (behind a link); slow.
	Far Mem ` + "`json:\"far\"`" + `
	// Core is the core.
	Core Core ` + "`json:\"core\"`" + `
	hidden int
}

// Mem is a memory.
type Mem struct {
	Latency int ` + "`json:\"latency\"`" + ` // latency
}

// Core is used once.
type Core struct {
	// A and B are two knobs.
	A int ` + "`json:\"a\"`" + `
	B int ` + "`json:\"b\"`" + `
	C bool ` + "`json:\"c\"`" + `
}
`

// Keys follows the JSON tags, documents each key by its field's comment
// without the leading names and "is"/"are", shares a comment that names
// several fields, and prefixes the keys of a type used twice with its
// field's phrase.
func TestKeys(t *testing.T) {
	fsys := fstest.MapFS{"cfg.go": {Data: []byte(src)}, "x_test.go": {Data: []byte("package cfg\ntype Config struct{}\n")}}
	keys, err := keydoc.Keys(fsys, "Config")
	require.NoError(t, err)
	require.Equal(t, []keydoc.Key{
		{"name", "names it"},
		{"near.latency", "near memory: latency"},
		{"far.latency", "far memory (behind a link): latency"},
		{"core.a", "two knobs"},
		{"core.b", "two knobs"},
		{"core.c", ""},
	}, keys)
	out, err := keydoc.Generate(fsys, "cfg", "Config", "docs")
	require.NoError(t, err)
	f, err := parser.ParseFile(token.NewFileSet(), "gen.go", out, parser.ParseComments)
	require.NoError(t, err)
	require.Equal(t, "cfg", f.Name.Name)
	require.Contains(t, string(out), "DO NOT EDIT")
	require.Regexp(t, `"far.latency":\s+"far memory \(behind a link\): latency",`, string(out))

	_, err = keydoc.Keys(fsys, "Nope")
	require.ErrorIs(t, err, keydoc.ErrSource)
	_, err = keydoc.Keys(fstest.MapFS{"bad.go": {Data: []byte("package")}}, "Config")
	require.ErrorIs(t, err, keydoc.ErrSource)
}
