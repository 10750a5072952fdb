package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The image digest depends on the content of the inputs, never on their
// names or paths: renamed and moved inputs, and the base spelled another
// way, give the same image.
func TestDigestIsContent(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	cp := func(src, dst string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	digest := func(args ...string) string {
		t.Helper()
		out := "oci:" + filepath.Join(t.TempDir(), "out")
		stdout, stderr, code := cli(t, append([]string{"build", "--pool", "worker", "--push", out}, args...)...)
		if code != 0 {
			t.Fatalf("build %v: exit %d\n%s", args, code, stderr)
		}
		_, d, _ := strings.Cut(lastLine(stdout), "@")
		return d
	}

	osc := digest("--base", "oci:examples/base", "--osc", "examples/gardener/worker-osc.yaml")
	moved := cp("examples/gardener/worker-osc.yaml", filepath.Join(dir, "a", "b", "pool.yml"))
	if d := digest("--base", "oci:"+filepath.Join(root, "examples", "base"), "--osc", moved); d != osc {
		t.Errorf("the OSC renamed and moved, the base by its absolute path: %s, was %s", d, osc)
	}

	mcs, _ := filepath.Glob(filepath.Join(root, "examples", "openshift", "*.yaml"))
	if len(mcs) == 0 {
		t.Fatal("no examples/openshift/*.yaml")
	}
	mc := digest("--base", "oci:examples/base", "--machineconfig", "examples/openshift")
	for i, f := range mcs {
		rel, _ := filepath.Rel(root, f)
		cp(rel, filepath.Join(dir, "mcs", "deeper", strings.Repeat("z", len(mcs)-i)+".yaml"))
	}
	if d := digest("--base", "oci:./examples/base:latest", "--machineconfig", filepath.Join(dir, "mcs")); d != mc {
		t.Errorf("the MachineConfigs renamed (in reverse order) and moved: %s, was %s", d, mc)
	}
}
