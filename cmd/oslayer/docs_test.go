package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestReferenceUpToDate fails when the committed CLI reference in
// docs/reference is not what the cobra commands generate: a command, flag,
// usage or help text changed without the reference being regenerated.
func TestReferenceUpToDate(t *testing.T) {
	committed := filepath.Join("..", "..", filepath.FromSlash(referenceDir))
	tmp := t.TempDir()
	if err := writeReference(newRootCmd(), tmp); err != nil {
		t.Fatal(err)
	}
	want := mdFiles(t, tmp)
	got := mdFiles(t, committed)
	var stale []string
	for name, b := range want {
		if g, ok := got[name]; !ok {
			stale = append(stale, name+" is missing")
		} else if !bytes.Equal(g, b) {
			stale = append(stale, name+" differs")
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			stale = append(stale, name+" names no command")
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		t.Fatalf("%s is stale (%s); regenerate it from the repository root with\n\n\t%s\n", referenceDir, strings.Join(stale, "; "), regenerateReference)
	}
}

// The reference has a page per command, the pages link each other, and
// hidden commands (docs itself) have none.
func TestReferencePages(t *testing.T) {
	pages := referencePages(newRootCmd())
	for _, name := range []string{"oslayer.md", "oslayer_build.md", "oslayer_fleet.md", "oslayer_fleet_build.md", "oslayer_controller.md", "oslayer_completion.md"} {
		if _, ok := pages[name]; !ok {
			t.Errorf("no page %s", name)
		}
	}
	if _, ok := pages["oslayer_docs.md"]; ok {
		t.Error("the hidden docs command has a page")
	}
	build := string(pages["oslayer_build.md"])
	for _, want := range []string{"| `--push string` |", "| `-o, --output text|json` | `text` |", "[oslayer](oslayer.md)"} {
		if !strings.Contains(build, strings.ReplaceAll(want, "text|json", `text\|json`)) {
			t.Errorf("oslayer_build.md has no %q:\n%s", want, build)
		}
	}
}

func mdFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(f)] = b
	}
	return m
}
