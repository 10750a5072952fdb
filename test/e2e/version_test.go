package e2e

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/test/regtest"
)

// A binary built with go build in a git clone carries the commit's
// pseudo-version: --version prints it and the images it builds carry it in
// their version label; -ldflags -X main.version overrides it.
func TestVersionFromBuildInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds oslayer twice")
	}
	regtest.Require(t, "git")
	regtest.Require(t, "skopeo")
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	rev := strings.TrimSpace(run(t, "git", "-C", root, "rev-parse", "HEAD"))
	clone := filepath.Join(t.TempDir(), "oslayer")
	run(t, "git", "clone", "--quiet", "--no-local", root, clone)
	run(t, "git", "-C", clone, "checkout", "--quiet", rev)

	bin := filepath.Join(t.TempDir(), "oslayer")
	goBuild := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctxT(t), "go", append(append([]string{"build", "-o", bin}, args...), "./cmd/oslayer")...)
		cmd.Dir = clone
		// The go command's default: stamp the VCS state (a GOFLAGS of the
		// environment may turn it off).
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	version := func() string {
		t.Helper()
		out := run(t, bin, "--version")
		v, ok := strings.CutPrefix(strings.TrimSpace(out), "oslayer version ")
		if !ok {
			t.Fatalf("--version printed %q", out)
		}
		return v
	}

	goBuild()
	v := version()
	if !strings.HasPrefix(v, "v0.0.0-") || !strings.HasSuffix(v, "-"+rev[:12]) {
		t.Errorf("--version of a build of %s: %q, want the pseudo-version v0.0.0-TIME-%s", rev[:12], v, rev[:12])
	}
	out := filepath.Join(t.TempDir(), "worker")
	cmd := exec.CommandContext(ctxT(t), bin, "build", "--base", "oci:examples/base", "--pool", "worker",
		"--osc", "examples/gardener/worker-osc.yaml", "--push", "oci:"+out+":latest")
	cmd.Dir = clone
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	if got := inspect(t, "oci:"+out+":latest").Labels[assemble.LabelVersion]; got != v {
		t.Errorf("image label %s = %q, --version says %q", assemble.LabelVersion, got, v)
	}

	goBuild("-ldflags", "-X main.version=v1.2.3")
	if v := version(); v != "v1.2.3" {
		t.Errorf("--version with -X main.version=v1.2.3: %q", v)
	}
}

// go install github.com/oslayer/oslayer/cmd/oslayer@VERSION works and the
// binary says VERSION: the committed tree is served as module version
// v0.1.0 by a file module proxy (as the Go module proxy serves a tag).
func TestGoInstallVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds oslayer from a module proxy")
	}
	regtest.Require(t, "git")
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	const mod, ver = "github.com/oslayer/oslayer", "v0.1.0"
	proxy := t.TempDir()
	dir := filepath.Join(proxy, mod, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeModuleZip(t, root, filepath.Join(dir, ver+".zip"), mod+"@"+ver+"/")
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		ver + ".mod":  gomod,
		ver + ".info": []byte(`{"Version":"` + ver + `","Time":"2026-01-01T00:00:00Z"}`),
		"list":        []byte(ver + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := t.TempDir()
	cmd := exec.CommandContext(ctxT(t), "go", "install", mod+"/cmd/oslayer@"+ver)
	cmd.Dir = t.TempDir()
	// Dependencies come from the module cache the test's own build filled.
	cmd.Env = append(os.Environ(), "GOPROXY=file://"+proxy, "GOSUMDB=off", "GOBIN="+bin, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s: %v\n%s", mod, ver, err, out)
	}
	if out := run(t, filepath.Join(bin, "oslayer"), "--version"); out != "oslayer version "+ver+"\n" {
		t.Errorf("--version of go install @%s: %q", ver, out)
	}
}

// writeModuleZip writes the files git tracks in the repository at root, as
// they are in the work tree, as a module zip: every path under prefix,
// nested modules left out as the go command leaves them out.
func writeModuleZip(t *testing.T, root, path, prefix string) {
	t.Helper()
	var nested []string
	files := strings.Split(strings.TrimRight(run(t, "git", "-C", root, "ls-files", "-z"), "\x00"), "\x00")
	for _, f := range files {
		if strings.HasSuffix(f, "/go.mod") {
			nested = append(nested, strings.TrimSuffix(f, "go.mod"))
		}
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	z := zip.NewWriter(out)
files:
	for _, f := range files {
		for _, n := range nested {
			if strings.HasPrefix(f, n) {
				continue files
			}
		}
		fi, err := os.Lstat(filepath.Join(root, f))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		w, err := z.Create(prefix + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
}
