package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The shape the module keeps outside tests (docs/testing.md, "Code shape").
const (
	maxLines      = 80
	maxComplexity = 30
)

// TestShape fails when a function of the module (outside _test.go files,
// testdata and the Go modules of their own) is longer than maxLines or
// more complex than maxComplexity.
func TestShape(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := moduleFiles(t, root)
	if len(files) < 100 {
		t.Fatalf("found %d Go files under %s: not the module's root", len(files), root)
	}
	for _, f := range over(t, files) {
		t.Errorf("%s %s: %d lines, complexity %d (limits %d and %d): split it into steps", f.pos, f.name, f.lines, f.complexity, maxLines, maxComplexity)
	}
}

// TestShapeCatches: a long and a branchy function are both reported.
func TestShapeCatches(t *testing.T) {
	dir := t.TempDir()
	long := "package x\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxLines) + "}\n"
	branchy := "package x\n\nfunc branchy(a int) {\n" + strings.Repeat("\tif a > 0 && a < 9 {\n\t}\n", maxComplexity/2+1) + "}\n"
	var files []string
	for name, src := range map[string]string{"long.go": long, "branchy.go": branchy} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	if got := over(t, files); len(got) != 2 {
		t.Errorf("reported %+v, want long and branchy", got)
	}
}

// over returns the functions of files past a limit.
func over(t *testing.T, files []string) []fn {
	fset := token.NewFileSet()
	var out []fn
	for _, p := range files {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range funcs(fset, p, f) {
			if d.lines > maxLines || d.complexity > maxComplexity {
				out = append(out, d)
			}
		}
	}
	return out
}

// moduleFiles lists the module's non-test Go files, skipping hidden
// folders, testdata and folders holding a go.mod of their own.
func moduleFiles(t *testing.T, root string) []string {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || exists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
