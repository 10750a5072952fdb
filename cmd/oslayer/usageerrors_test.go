package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commands lists every command of the tree that runs something.
func commands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	if c.Runnable() {
		out = append(out, c)
	}
	for _, sub := range c.Commands() {
		out = append(out, commands(sub)...)
	}
	return out
}

// runArgs runs oslayer with args in-process and returns its exit code
// and stderr.
func runArgs(args ...string) (int, string) {
	root := newRootCmd()
	root.SetArgs(args)
	var stderr bytes.Buffer
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&stderr)
	code := run(root, &stderr)
	return code, stderr.String()
}

// typed are the flag types whose values the parser checks.
var typed = map[string]bool{"int": true, "int64": true, "uint": true, "uint64": true, "float64": true, "duration": true, "bool": true}

// TestParserErrorsExit2 runs every command with each error the parser
// catches: an unknown flag, every typed flag with a value that does not
// parse, and arguments its Args refuse (none, or ten). Each exits 2 and
// the command's work never starts.
func TestParserErrorsExit2(t *testing.T) {
	if code, stderr := runArgs("no-such-command"); code != 2 {
		t.Errorf("an unknown command: exit %d, want 2\n%s", code, stderr)
	}
	cmds := commands(newRootCmd())
	if len(cmds) < 12 {
		t.Fatalf("%d commands", len(cmds))
	}
	for _, c := range cmds {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(path, "_"), func(t *testing.T) {
			check := func(what string, args ...string) {
				t.Helper()
				code, stderr := runArgs(append(append([]string(nil), path...), args...)...)
				if code != 2 {
					t.Errorf("%s (%v): exit %d, want 2\n%s", what, args, code, stderr)
				}
			}
			check("unknown flag", "--no-such-flag")
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if !typed[f.Value.Type()] {
					return
				}
				code, stderr := runArgs(append(append([]string(nil), path...), "--"+f.Name+"=not-a-value", "--no-such-flag")...)
				if code != 2 || !strings.Contains(stderr, `"--`+f.Name) {
					t.Errorf("--%s=not-a-value: exit %d, want 2 naming the flag\n%s", f.Name, code, stderr)
				}
			})
			for _, n := range []int{0, 10} {
				a := make([]string, n)
				for i := range a {
					a[i] = "arg"
				}
				if c.Args != nil && c.Args(c, a) != nil {
					check("arguments", a...)
				}
			}
		})
	}
}
