package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/builder"
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
	if got := inspect(t, "oci:"+out+":latest").Labels[builder.LabelVersion]; got != v {
		t.Errorf("image label %s = %q, --version says %q", builder.LabelVersion, got, v)
	}

	goBuild("-ldflags", "-X main.version=v1.2.3")
	if v := version(); v != "v1.2.3" {
		t.Errorf("--version with -X main.version=v1.2.3: %q", v)
	}
}
