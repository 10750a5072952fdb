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
