package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/fixtures"
)

// In text mode build prints the render's warnings on stderr, each once as
// "warning: ...", and a preflight error only once (in the error it
// returns); --log-format json turns them into slog JSON records.
func TestBuildWarningsAndErrorsOnce(t *testing.T) {
	mcs := fixtures.Path(t, "mco", "aws", "worker")
	args := func(extra ...string) []string {
		return append([]string{"build", "--base", "oci:" + example(t, "base"), "--pool", "worker",
			"--machineconfig", mcs, "--push", "oci:" + filepath.Join(t.TempDir(), "out")}, extra...)
	}

	// The AWS worker configs' pull secret, baked on purpose: preflight
	// fails.
	text, err := runCLI(t, args("--bake-secrets")...)
	if err == nil || !strings.Contains(err.Error(), "holds registry credentials") {
		t.Fatalf("build with a baked pull secret: %v\n%s", err, text)
	}
	if strings.Contains(text, "holds registry credentials") {
		t.Errorf("the preflight error is printed besides the returned error:\n%s", text)
	}
	var warnings []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "warning: ") {
			warnings = append(warnings, l)
		} else if strings.Contains(l, "level=") || strings.HasPrefix(l, "time=") {
			t.Errorf("slog text line in text mode: %s", l)
		}
	}
	if len(warnings) == 0 || !strings.Contains(text, "warning: "+mcs+"/00-worker.yaml (MachineConfig 00-worker)") {
		t.Errorf("the render's warnings are not on stderr:\n%s", text)
	}
	seen := map[string]bool{}
	for _, w := range warnings {
		if seen[w] {
			t.Errorf("printed twice: %s", w)
		}
		seen[w] = true
	}

	text, err = runCLI(t, args("--allow-secret", "/usr/lib/oslayer/var/var/lib/kubelet/config.json", "--log-format", "json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	n := 0
	for _, l := range strings.Split(text, "\n") {
		var rec struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Level == "WARN" {
			n++
		}
	}
	if n != len(warnings) {
		t.Errorf("--log-format json: %d WARN records, text mode printed %d warnings:\n%s", n, len(warnings), text)
	}
}

// render prints its summary on stdout and its warnings on stderr; only
// build takes --jobs (nothing else uploads).
func TestRenderWarningsOnStderr(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	out, errb, err := runCLIIO(t, nil, "render", "--machineconfig", fixtures.Path(t, "mco", "aws", "worker"), "--pool", "worker", "--output-dir", filepath.Join(t.TempDir(), "r"))
	if err != nil {
		t.Fatalf("%v\n%s", err, errb)
	}
	if strings.Contains(out, "warning:") || !strings.Contains(errb, "warning: ") {
		t.Errorf("warnings not (only) on stderr:\nstdout:\n%s\nstderr:\n%s", out, errb)
	}
	if !strings.Contains(out, "inputs: 3 documents (") {
		t.Errorf("summary:\n%s", out)
	}
	for _, c := range []string{"render", "preflight", "verify"} {
		if _, err := runCLI(t, c, "--jobs", "2"); err == nil || !strings.Contains(err.Error(), "unknown flag: --jobs") {
			t.Errorf("%s --jobs: %v", c, err)
		}
	}
}
