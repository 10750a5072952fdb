package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/fixtures"
)

// render plans the package stage: the generated steps for the pool's
// extensions and kernelType, then the user's Containerfile; the key needs
// the base's digest.
func TestRenderPlansPackageStage(t *testing.T) {
	dir := t.TempDir()
	mc := filepath.Join(dir, "mc.yaml")
	os.WriteFile(mc, []byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-ext
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  extensions: [usbguard]
  kernelType: realtime
`), 0o644)
	cf := filepath.Join(dir, "agent.Containerfile")
	os.WriteFile(cf, []byte("FROM packages\nRUN echo agent > /etc/agent.conf\n"), 0o644)
	stdout, stderr, err := runCLIIO(t, nil, "render", "--machineconfig", mc, "--pool", "worker", "--containerfile", cf,
		"--build-arg", "LEVEL=2", "--output-dir", filepath.Join(dir, "out"), "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var out struct {
		Packages     []string     `json:"packages"`
		PackageStage *packagePlan `json:"packageStage"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	p := out.PackageStage
	if p == nil || p.Key != "" || p.KernelType != "realtime" || strings.Join(p.Packages, ",") != "usbguard" {
		t.Fatalf("package stage %+v", p)
	}
	if n := len(p.Commands); n < 3 || p.Commands[n-1] != "RUN echo agent > /etc/agent.conf" || !strings.Contains(p.Containerfile, "rpm-ostree install $pkgs") {
		t.Fatalf("commands %q\n%s", p.Commands, p.Containerfile)
	}
}

// The package flags are checked before anything is read or built.
func TestPackageFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	cf := filepath.Join(dir, "Containerfile")
	os.WriteFile(cf, []byte("FROM packages\n"), 0o644)
	mc := fixtures.Path(t, "mco", "aws", "worker")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--containerfile", filepath.Join(dir, "missing")}, "--containerfile: open"},
		{[]string{"--build-arg", "LEVEL"}, `--build-arg "LEVEL": want NAME=VALUE`},
		{[]string{"--build-secret", "id=token"}, "want id=ID,src=FILE"},
		{[]string{"--build-secret", "id=token,src=" + filepath.Join(dir, "missing")}, "--build-secret id=token:"},
		{[]string{"--repo-file", cf}, "want a file whose name ends in .repo"},
		{[]string{"--context", dir}, "--context " + dir + ": only with --containerfile"},
		{[]string{"--containerfile", cf, "--build-arg", "OSLAYER_BASE=x"}, "build argument OSLAYER_BASE is set by oslayer"},
	} {
		args := append([]string{"render", "--machineconfig", mc, "--pool", "worker", "--output-dir", filepath.Join(dir, "out")}, tc.args...)
		if _, _, err := runCLIIO(t, nil, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
			t.Fatalf("%v: output written", tc.args)
		}
	}
}
