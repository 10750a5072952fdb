package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The library names specification fields (preflight.maxLayers, arch);
// the CLI's user reads the flags that set them, in the preflight table,
// in a build the checks refuse and in the warnings it logs.
func TestFindingsNameFlags(t *testing.T) {
	t.Setenv("OSLAYER_BASEINDEX_CACHE", t.TempDir())
	base := "oci:" + example(t, "base")
	_, stdout, _ := oslayerRun(t, "preflight", base, "--arch", "arm64")
	if !strings.Contains(stdout, "nodes are arm64 (--arch arm64)") {
		t.Errorf("preflight table does not name --arch:\n%s", stdout)
	}
	build := []string{"build", "--base", base, "--pool", "worker", "--osc", example(t, "gardener", "worker-osc.yaml")}
	code, _, stderr := oslayerRun(t, append(build, "--warn-layers", "1", "--max-layers", "2", "--push", "oci:"+filepath.Join(t.TempDir(), "o"))...)
	if code != 2 || !strings.Contains(stderr, "at or above the limit of 2 (--max-layers)") {
		t.Errorf("refused build: exit %d, want 2 naming --max-layers:\n%s", code, stderr)
	}
	code, _, stderr = oslayerRun(t, append(build, "--warn-layers", "1", "--push", "oci:"+filepath.Join(t.TempDir(), "o"))...)
	if code != 0 || !strings.Contains(stderr, "more than 1 (--warn-layers)") || strings.Contains(stderr, "preflight.") {
		t.Errorf("build with a warning: exit %d, want 0 and a warning naming --warn-layers:\n%s", code, stderr)
	}
}

// Registry options the library names (registry.authfile) read as flags.
func TestRegistryOptionsNameFlags(t *testing.T) {
	build := []string{"build", "--base", "oci:" + example(t, "base"), "--pool", "worker", "--osc", example(t, "gardener", "worker-osc.yaml"),
		"--push", "oci:" + filepath.Join(t.TempDir(), "o")}
	for _, c := range []struct{ flag, value, want string }{
		{"--authfile", filepath.Join(t.TempDir(), "none.json"), "--authfile"},
		{"--insecure-registry", "http://r.example", `--insecure-registry "http://r.example"`},
		{"--mirror", "quay.io", `--mirror "quay.io"`},
	} {
		_, _, stderr := oslayerRun(t, append(build, c.flag, c.value)...)
		if !strings.Contains(stderr, c.want) || strings.Contains(stderr, "registry.authfile") || strings.Contains(stderr, "registry.insecure") || strings.Contains(stderr, "registry.mirrors") {
			t.Errorf("%s %s: stderr %q, want it to name %s", c.flag, c.value, stderr, c.want)
		}
	}
}
