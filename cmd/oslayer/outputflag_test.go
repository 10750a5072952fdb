package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/fixtures"
)

// -o/--output is the output format on every command; destinations are
// --output-dir and --push. Any other value of --output is an error, never a
// directory named "json", and --output-format does not exist.
func TestOutputFlagNames(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	mcs := fixtures.Path(t, "mco", "aws", "worker")
	t.Chdir(t.TempDir())
	render := []string{"render", "--machineconfig", mcs, "--pool", "worker"}

	// The bug this replaces: render --output json made a directory "json".
	text, err := runCLI(t, append(render, "--output", "json")...)
	if err == nil || !strings.Contains(err.Error(), "--output-dir DIR is required") {
		t.Errorf("render --output json: %v\n%s", err, text)
	}
	if ents, _ := os.ReadDir("."); len(ents) != 0 {
		t.Errorf("render --output json wrote %v", ents)
	}

	text, err = runCLI(t, append(render, "--output-dir", "new", "--output", "json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(text), &res); err != nil || res["layers"] == nil {
		t.Errorf("--output json did not print the JSON result (%v):\n%.300s", err, text)
	}
	if _, err := os.Stat(filepath.Join("new", "report.json")); err != nil {
		t.Error(err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{append(render, "--output", "old"), `"old" for "-o, --output" flag: want text or json`},
		{append(render, "--output-dir", "x", "--output", "y"), `"y" for "-o, --output" flag: want text or json`},
		{append(render, "--output-dir", "x", "-o", "yaml"), `"yaml" for "-o, --output" flag: want text or json`},
		{append(render, "--output-dir", "x", "--output-format", "json"), `unknown flag: --output-format`},
		{[]string{"keygen", "--output", "keys"}, `want text or json`},
		{[]string{"trust", "--output", "trust"}, `want text or json`},
		{[]string{"verify", "-o", "wide", "r/x"}, `want text or json`},
	} {
		if text, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q\n%s", c.args, err, c.want, text)
		}
	}
	for _, d := range []string{"old", "x", "y", "keys", "trust"} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("a failed command created %s", d)
		}
	}
}
