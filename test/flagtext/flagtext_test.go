// Package flagtext checks that no library message names a command-line
// flag: the packages below the front-ends name specification fields
// (internal/field, preflight.Finding.Field), and each front-end spells
// them its own way (the CLI as --flags, the controller as spec.FIELD).
// A PoolImage or Gardener extension user cannot set a --flag.
package flagtext

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// allowed are the library string literals that may name a flag of the
// CLI, by file (relative to the module) and flag, each with its reason.
var allowed = map[string]map[string]string{
	// The controller runs the CLI in its build Jobs: it writes that
	// command line, and names its own flag (--build-image) and the build
	// pod's (--secrets-dir) to the operator who sets them.
	"controller/job.go": {"build-image": "the controller's own flag", "from-poolimage": "the build Job's command line",
		"job": "the build Job's command line", "sources-digest": "the build Job's command line",
		"secrets-dir": "the build Job's command line", "log-level": "the build Job's command line"},
	"controller/pod.go": {"secrets-dir": "the build pod's own flag, set by the controller"},
	// The extension's own flag (its command, not oslayer's, registers it).
	"extension/pkg/controller/operatingsystemconfig/defaults.go": {"namespace": "the extension's own --namespace"},
	// The CLI's flag table: the help text of --bake-secrets names
	// --allow-secret, that of --request-jobs --jobs.
	"pipeline/flags.go": {"allow-secret": "help text of the CLI's flag table", "jobs": "help text of the CLI's flag table"},
	// Not a message: a label hashed into the build's identity.
	"pipeline/identity.go": {"context": "identity hash input, not text"},
	// oslayer trust's own input (--key), read by the thin command's
	// library call.
	"sign/trust.go": {"key": "the source label of oslayer trust --key"},
	// bootc's own flag.
	"diff/bootc.go": {"soft-reboot": "bootc's own flag"},
}

// skipped reports whether the folder rel is not scanned: the front-end
// commands, the tests, the examples and what holds no Go library code.
func skipped(rel string) bool {
	for _, p := range []string{"cmd", "test", "examples", "extension/cmd", "docs", "config", ".git"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

var flagRow = regexp.MustCompile("(?m)^\\| `--([a-z0-9][a-z0-9-]*)")

// cliFlags are the flags the CLI registers, as its generated reference
// (docs/reference, checked against the binary) lists them.
func cliFlags(t *testing.T, root string) map[string]bool {
	files, err := filepath.Glob(filepath.Join(root, "docs", "reference", "oslayer*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CLI reference under docs/reference: %v", err)
	}
	flags := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagRow.FindAllStringSubmatch(string(b), -1) {
			flags[m[1]] = true
		}
	}
	if !flags["base"] || !flags["max-layers"] || !flags["authfile"] {
		t.Fatalf("the reference lists no --base, --max-layers or --authfile: %v", flags)
	}
	return flags
}

var dashed = regexp.MustCompile(`(^|[^A-Za-z0-9-])--([a-z0-9][a-z0-9-]*)`)

// TestNoFlagsInLibraryText fails when a non-test string literal of a
// library package names a flag the CLI registers.
func TestNoFlagsInLibraryText(t *testing.T) {
	root := moduleRoot(t)
	flags := cliFlags(t, root)
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipped(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		found = append(found, flagsIn(t, p, rel, flags)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s: a library message names a CLI flag; name the specification field (internal/field, Finding.Field) and let the front-end spell it", f)
	}
}

// flagsIn lists "FILE:LINE --flag" for each CLI flag a string literal of
// the file names that allowed does not allow.
func flagsIn(t *testing.T, path, rel string, flags map[string]bool) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		for _, m := range dashed.FindAllStringSubmatch(s, -1) {
			if flags[m[2]] && allowed[rel][m[2]] == "" {
				out = append(out, rel+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+" --"+m[2])
			}
		}
		return true
	})
	return out
}

func moduleRoot(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
