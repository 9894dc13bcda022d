// Command keydocgen writes the documentation of a package's configuration
// keys, derived from the doc comments of its struct fields (package
// internal/keydoc), to a Go file of the package. hwmodel runs it from go
// generate:
//
//	keydocgen -pkg hwmodel -root Config -var keyMeaning -o keydocs_gen.go
//
// in the package's directory.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/scopedpm/scopedpm/internal/keydoc"
)

func main() {
	pkg := flag.String("pkg", "", "package name of the generated file")
	root := flag.String("root", "Config", "the configuration's root struct type")
	name := flag.String("var", "keyMeaning", "the generated map's name")
	out := flag.String("o", "keydocs_gen.go", "the file to write")
	flag.Parse()
	src, err := keydoc.Generate(os.DirFS("."), *pkg, *root, *name)
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "keydocgen:", err)
		os.Exit(1)
	}
}
