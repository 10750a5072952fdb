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
// --output-dir and --push. A destination given with --output still works
// for one release, with a warning; anything else is an error, never a
// directory named "json".
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

	// The new names.
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

	// The old names, one release long: --output DIR and --output-format.
	text, err = runCLI(t, append(render, "--output", "old", "--output-format", "json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	for _, want := range []string{
		"warning: --output old is deprecated for a destination and will be removed in the next release: use --output-dir old",
		"Flag --output-format has been deprecated, use -o/--output",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no deprecation warning %q:\n%.500s", want, text)
		}
	}
	a, _ := os.ReadFile(filepath.Join("new", "report.json"))
	b, _ := os.ReadFile(filepath.Join("old", "report.json"))
	if len(a) == 0 || string(a) != string(b) {
		t.Error("--output DIR and --output-dir DIR wrote different reports")
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{append(render, "--output-dir", "x", "--output", "y"), `-o/--output "y": want text or json`},
		{append(render, "--output-dir", "x", "-o", "yaml"), `-o/--output "yaml": want text or json`},
		{[]string{"keygen", "--output", "keys"}, `-o/--output "keys": want text or json`},
		{[]string{"verify", "-o", "wide", "r/x"}, `want text or json`},
	} {
		if text, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q\n%s", c.args, err, c.want, text)
		}
	}
	for _, d := range []string{"x", "y", "keys"} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("a failed command created %s", d)
		}
	}
}
