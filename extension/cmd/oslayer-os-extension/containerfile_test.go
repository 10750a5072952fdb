package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The image's build command (extension/Containerfile's RUN go build), run
// as written from the repository root but for its output directory, links
// a static binary (what the distroless static base can run) that reports
// the VERSION it was given, and serves the admission webhook alone
// (--admission-only) without a kubeconfig. ./test/run.sh runs this module's tests with
// the command's CGO_ENABLED and -trimpath, so the build only links.
func TestContainerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the extension as its image does")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	goBuild := containerfileBuild(t, filepath.Join(root, "extension", "Containerfile"))
	bin := filepath.Join(t.TempDir(), "oslayer-os-extension")
	const out = "-o /out/oslayer-os-extension "
	if !strings.Contains(goBuild, out) {
		t.Fatalf("go build %q: want %q", goBuild, out)
	}
	cmd := exec.Command("sh", "-c", strings.Replace(goBuild, out, "-o "+bin+" ", 1))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-containerfile")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Containerfile's build command: %v\n%s", err, b)
	}
	checkStatic(t, bin)
	v, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(v)) != "oslayer-os-extension v0.0.0-containerfile" {
		t.Errorf("%s --version: %v\n%s", bin, err, v)
	}
	checkAdmissionOnly(t, bin)
}

// containerfileBuild returns the Containerfile's RUN instruction that runs
// go build, continuation lines joined.
func containerfileBuild(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cur string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur += s + " "
			continue
		}
		cur += l
		if run, ok := strings.CutPrefix(cur, "RUN "); ok && strings.Contains(run, "go build") {
			return run
		}
		cur = ""
	}
	t.Fatalf("%s: no RUN instruction runs go build", path)
	return ""
}

// checkStatic fails unless bin is an ELF executable with no interpreter
// and no shared libraries.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: not static", bin)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", bin, libs)
	}
}
