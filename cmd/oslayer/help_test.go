package main

import (
	"strings"
	"testing"
)

// Every command a user runs shows usage examples in --help.
func TestEveryCommandHasExamples(t *testing.T) {
	root := newRootCmd()
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if strings.TrimSpace(c.Example) == "" || !strings.Contains(c.Example, "oslayer "+c.Name()) {
			t.Errorf("oslayer %s --help has no example invoking it", c.Name())
		}
	}
}

// The naming convention holds on every command: -o/--output is only the
// global output format; no command defines a flag of its own named output
// or format, and no example uses --output for a destination.
func TestFlagNamingConvention(t *testing.T) {
	root := newRootCmd()
	if f := root.PersistentFlags().Lookup("output"); f == nil || f.Shorthand != "o" {
		t.Fatalf("no global -o/--output: %+v", f)
	}
	for _, c := range root.Commands() {
		for _, name := range []string{"output", "format", "output-format"} {
			if c.LocalNonPersistentFlags().Lookup(name) != nil {
				t.Errorf("oslayer %s defines its own --%s", c.Name(), name)
			}
		}
		for _, l := range strings.Split(c.Example, "\n") {
			if i := strings.Index(l, "--output "); i >= 0 && !strings.HasPrefix(l[i+len("--output "):], "json") && !strings.HasPrefix(l[i+len("--output "):], "text") {
				t.Errorf("oslayer %s example uses --output for a destination: %s", c.Name(), l)
			}
		}
	}
}
