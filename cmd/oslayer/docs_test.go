package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
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

// TestDocsCommandsUseRealFlags: every oslayer command line in the README
// and the guides (code blocks, and inline code that starts with
// "oslayer ") names a command that exists and only flags it has, so a
// renamed or removed flag cannot linger in the documentation.
func TestDocsCommandsUseRealFlags(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "examples", "README.md"))
	root := newRootCmd()
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range commandLines(string(b)) {
			args := oslayerArgs(line)
			if args == nil {
				continue
			}
			seen++
			for _, p := range badFlags(root, args) {
				t.Errorf("%s: %s: %s", filepath.Base(f), line, p)
			}
		}
	}
	if seen < 20 {
		t.Errorf("found only %d oslayer command lines in %v", seen, files)
	}
}

// commandLines returns the lines of the fenced code blocks of a markdown
// text (continuation lines joined) and its inline code spans.
func commandLines(md string) []string {
	var out []string
	inBlock := false
	cont := ""
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
			cont = ""
			continue
		}
		if inBlock {
			l = cont + strings.TrimSpace(l)
			if strings.HasSuffix(l, `\`) {
				cont = strings.TrimSuffix(l, `\`) + " "
				continue
			}
			cont = ""
			out = append(out, l)
			continue
		}
		for _, span := range strings.Split(l, "`")[1:] {
			out = append(out, span)
		}
	}
	return out
}

// oslayerArgs returns the arguments of an oslayer command line (after
// "oslayer" or "go run ./cmd/oslayer", environment assignments allowed
// before it), up to a comment or the end of the command; nil for any other
// line.
func oslayerArgs(line string) []string {
	f := strings.Fields(line)
	for len(f) > 0 && strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "-") {
		f = f[1:]
	}
	switch {
	case len(f) > 0 && f[0] == "oslayer":
		f = f[1:]
	case len(f) > 2 && f[0] == "go" && f[1] == "run" && f[2] == "./cmd/oslayer":
		f = f[3:]
	default:
		return nil
	}
	var args []string
	for _, a := range f {
		if a == "#" || a == "|" || a == "&&" || a == ";" || strings.HasPrefix(a, "#") {
			break
		}
		args = append(args, a)
	}
	return args
}

// badFlags returns what is wrong with args for root: an unknown command
// or a flag the command does not have.
func badFlags(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil {
		return []string{err.Error()}
	}
	var bad []string
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "-...") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var ok bool
		if strings.HasPrefix(a, "--") {
			ok = cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil || name == "help" || name == "version"
		} else {
			ok = len(name) == 1 && (cmd.Flags().ShorthandLookup(name) != nil || cmd.InheritedFlags().ShorthandLookup(name) != nil || name == "h" || name == "v")
		}
		if !ok {
			bad = append(bad, "no flag "+a+" for "+cmd.CommandPath())
		}
	}
	return bad
}
