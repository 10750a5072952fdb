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
