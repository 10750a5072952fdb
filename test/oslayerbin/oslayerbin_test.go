package oslayerbin

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/packagestage/bud"
)

// TestTagsAreBuds: the default build links the package stage's executor.
func TestTagsAreBuds(t *testing.T) {
	if Tags != bud.Tags {
		t.Errorf("Tags = %q, packagestage/bud.Tags = %q", Tags, bud.Tags)
	}
}

// TestEmbedsHashed: the cache key hashes the build inputs buildInput
// names, so every file a package of the module outside test/ embeds must
// be one of them (modules of their own are not part of the command).
func TestEmbedsHashed(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "test" || (rel != "." && (strings.HasPrefix(d.Name(), ".") || ownModule(p))) {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(p) != ".go" || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			pats, ok := strings.CutPrefix(strings.TrimSpace(line), "//go:embed ")
			if !ok {
				continue
			}
			for _, pat := range strings.Fields(pats) {
				if !buildInput(pat) {
					t.Errorf("%s embeds %s: buildInput must name it so oslayerbin's key hashes it", rel, pat)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKey: the key changes with a source, go.mod or the flags, and not
// with a test file, a file under test/ or a file that is no build input.
func TestKey(t *testing.T) {
	root := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("cmd/oslayer/main.go", "package main\nfunc main() {}\n")
	key := func(v *variant) string {
		t.Helper()
		k, err := v.key(root)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(plain)
	if k := key(static); k == k0 {
		t.Error("the static build has the default build's key")
	}
	for _, f := range []string{"cmd/oslayer/main_test.go", "test/x/x.go", "README.md", "oslayer", ".git/HEAD"} {
		write(f, "anything")
		if k := key(plain); k != k0 {
			t.Errorf("writing %s changed the key", f)
		}
	}
	for _, f := range []string{"cmd/oslayer/main.go", "go.mod", "go.sum", "assemble/new.go"} {
		write(f, "changed\n")
		k := key(plain)
		if k == k0 {
			t.Errorf("writing %s left the key as it was", f)
		}
		k0 = k
	}
	t.Setenv("GOFLAGS", "-race")
	if k := key(plain); k == k0 {
		t.Error("GOFLAGS left the key as it was")
	}
}

// TestEnv: a binary named by the environment is used as it is; a missing
// one fails.
func TestEnv(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "oslayer")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, bin)
	v := &variant{name: "oslayer", env: Env}
	if p, err := v.resolve(); err != nil || p != bin {
		t.Errorf("resolve with $%s=%s: %q, %v", Env, bin, p, err)
	}
	t.Setenv(Env, bin+".missing")
	if p, err := v.resolve(); err == nil {
		t.Errorf("resolve with a missing $%s: %q, want an error", Env, p)
	}
}

// TestCached: the first call builds into the cache, the second finds the
// same binary without building, and the binary runs.
func TestCached(t *testing.T) {
	if testing.Short() {
		t.Skip("builds oslayer")
	}
	if os.Getenv(Env) != "" {
		t.Skipf("$%s is set", Env)
	}
	t.Setenv(CacheEnv, t.TempDir())
	v := &variant{name: plain.name, env: Env, args: plain.args}
	p1, err := v.resolve()
	if err != nil {
		t.Fatal(err)
	}
	fi1, err := os.Stat(p1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := v.resolve()
	if err != nil || p2 != p1 {
		t.Fatalf("second resolve: %q, %v, want %q", p2, err, p1)
	}
	fi2, err := os.Stat(p2)
	if err != nil || !os.SameFile(fi1, fi2) {
		t.Errorf("second resolve rebuilt the binary: %v", err)
	}
	if out, err := exec.Command(p1, "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "oslayer version ") {
		t.Errorf("%s --version: %v\n%s", p1, err, out)
	}
}

// TestScriptAgrees: test/oslayer-bin.sh, which test/run.sh and test/unit.sh
// build the binaries with, passes go build the flags and environment of
// BuildArgs.
func TestScriptAgrees(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "test", "oslayer-bin.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	tags := "tags=" + Tags + "\n"
	if !strings.Contains(script, tags) {
		t.Errorf("test/oslayer-bin.sh does not set %q", tags)
	}
	// The script's lines with the tags spelled as the variable.
	want := map[bool]string{
		false: `go build -tags "$tags" -o "$dir/oslayer" ./cmd/oslayer`,
		true: `CGO_ENABLED=1 go build -trimpath -tags "$tags,netgo,osusergo" \
      -ldflags "-s -w -linkmode external -extldflags -static" -o "$dir/oslayer-static" ./cmd/oslayer`,
	}
	for st, line := range want {
		if !strings.Contains(script, line) {
			t.Errorf("test/oslayer-bin.sh lacks %q", line)
		}
		args, env := BuildArgs(st)
		got := strings.Join(append(env, append([]string{"go", "build"}, args...)...), " ")
		flat := strings.NewReplacer("\\\n      ", "", `"`, "", "$tags", Tags).Replace(line)
		if !strings.HasPrefix(flat, got+" -o ") {
			t.Errorf("static=%t: oslayerbin builds with %q, the script with %q", st, got, flat)
		}
	}
}
