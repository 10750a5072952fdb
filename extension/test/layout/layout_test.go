// Package layout checks the extension module's layout rules: it imports
// only the main module's public packages.
package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoMainModuleInternals fails when a Go file of the extension module
// imports one of the main module's internal packages: the extension
// reaches them only through public packages (pipeline.RegistryOptions,
// pipeline.Keychain), as a module of its own would have to.
func TestNoMainModuleInternals(t *testing.T) {
	const internal = "github.com/oslayer/oslayer/internal/"
	n := 0
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		n++
		for _, im := range f.Imports {
			if path, _ := strconv.Unquote(im.Path.Value); strings.HasPrefix(path, internal) {
				t.Errorf("%s imports %s: use a public package of the main module", p, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("read only %d Go files: not the extension module's tree?", n)
	}
}
