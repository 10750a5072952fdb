package e2e

import (
	"strings"
	"testing"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestBuildPushFullRegistry: `oslayer build --push` onto Debian's
// docker-registry whose storage (a 1 MiB tmpfs) has no space left fails
// (exit 1) saying that the registry's disk is full, not with distribution's
// "UNKNOWN: unknown error; map[DriverName:filesystem Enclosed:map[Err:28 ...]]".
func TestBuildPushFullRegistry(t *testing.T) {
	regtest.Require(t, "docker-registry")
	dir, fill := regtest.SmallTmpfs(t)
	reg := regtest.Start(t, regtest.Config{Filesystem: true, StorageDir: dir})
	target := reg.Host + "/pools/worker:latest"
	build := func(inputs string) (string, string, int) {
		return cli(t, "build", "--base", "oci:examples/base", "--pool", "worker", "--allow-secret", pullSecret,
			"--machineconfig", inputs, "--push", target)
	}
	if _, stderr, code := build(fixtures.Path(t, "mco", "aws", "worker")); code != 0 {
		t.Fatalf("build onto the registry with space: exit %d\n%s", code, stderr)
	}
	fill()
	// New layers to upload: policy.json changed.
	_, stderr, code := build(awsWorkerEdited(t, "01-worker-container-runtime.yaml", "/etc/containers/policy.json", "data:,%7B%7D"))
	if want := registry.StorageFullMessage(reg.Host); code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("build onto a full registry: exit %d, want 1 saying %q\n%s", code, want, stderr)
	}
}
