package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// The pool built must be the inputs' pool: an OSC labelled for another
// worker pool, and MachineConfigs of several roles without --pool, are
// errors that say what to give; nothing is written.
func TestPoolMismatch(t *testing.T) {
	ex := func(p ...string) string { return example(t, p...) }
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--base", "oci:" + ex("base"), "--pool", "master", "--osc", ex("gardener", "worker-osc.yaml"), "--push", "oci:" + filepath.Join(out, "b")},
			`is labelled worker.gardener.cloud/pool=worker, but the pool built is "master" (--pool)`},
		{[]string{"render", "--pool", "master", "--osc", ex("gardener", "worker-osc.yaml"), "--output-dir", filepath.Join(out, "r1")},
			`but the pool built is "master"`},
		{[]string{"render", "--machineconfig", ex("openshift"), "--output-dir", filepath.Join(out, "r2")},
			"the MachineConfigs are for 2 roles (master, worker labelled machineconfiguration.openshift.io/role): give --pool"},
	} {
		if text, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q\n%s", c.args, err, c.want, text)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(out, "*")); len(ents) != 0 {
		t.Errorf("refused commands wrote %v", ents)
	}
}

// --arch takes the kernel's spellings too, on build as on preflight: the
// amd64 example base builds with x86_64 and is refused for aarch64.
func TestArchSpellings(t *testing.T) {
	args := func(arch string) []string {
		return []string{"build", "--base", "oci:" + example(t, "base"), "--pool", "worker", "--arch", arch,
			"--osc", example(t, "gardener", "worker-osc.yaml"), "--push", "oci:" + filepath.Join(t.TempDir(), "o")}
	}
	if text, err := runCLI(t, args("x86_64")...); err != nil {
		t.Errorf("--arch x86_64: %v\n%s", err, text)
	}
	if _, err := runCLI(t, args("aarch64")...); err == nil || !strings.Contains(err.Error(), `image is for architecture "amd64", --arch is "aarch64"`) {
		t.Errorf("--arch aarch64 on an amd64 base: %v", err)
	}
	if text, err := runCLI(t, "preflight", "oci:"+example(t, "base"), "--arch", "x86_64"); strings.Contains(text, "architecture") {
		t.Errorf("preflight --arch x86_64 of an amd64 image: %v\n%s", err, text)
	}
}

// The summary's byte counts are the JSON result's, with their unit.
func TestSummaryBytesMatchJSON(t *testing.T) {
	args := []string{"build", "--base", "oci:" + example(t, "base"), "--pool", "worker",
		"--osc", example(t, "gardener", "worker-osc.yaml"), "--push", "oci:" + filepath.Join(t.TempDir(), "o")}
	if _, _, err := runCLIIO(t, nil, args...); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runCLIIO(t, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runCLIIO(t, nil, append(args, "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ BytesUploaded, BytesSkipped, BytesMounted int64 }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.BytesSkipped == 0 {
		t.Fatalf("%+v, %v", res, err)
	}
	want := fmt.Sprintf("  bytes  uploaded %d B, skipped %d B (already there %d B, mounted %d B)\n",
		res.BytesUploaded, res.BytesSkipped, res.BytesSkipped-res.BytesMounted, res.BytesMounted)
	if !strings.Contains(stderr, want) {
		t.Errorf("summary lacks %q:\n%s", want, stderr)
	}
}
