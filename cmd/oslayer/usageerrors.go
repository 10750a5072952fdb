package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"
)

// Bad input exits 2, for every command: the errors the command-line parser
// finds (a flag value that does not parse, an unknown flag, a flag without
// its value, the wrong arguments, an unknown command) are marked here, once,
// for the whole tree, so no command can forget it.

// usageErrors marks the parser's errors of root and every command under
// it as bad input (exit 2).
func usageErrors(root *cobra.Command) *cobra.Command {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return badInput(c, err) })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return badInput(cmd, err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return root
}

// badInput gives err exit code 2, naming the command unless it does.
func badInput(c *cobra.Command, err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	name := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
	if c != c.Root() && !strings.HasPrefix(err.Error(), name+":") {
		err = &prefixed{prefix: name + ": ", err: err}
	}
	return &exitError{code: 2, err: err}
}

// prefixed names the command in the parser's message.
type prefixed struct {
	prefix string
	err    error
}

func (p *prefixed) Error() string { return p.prefix + p.err.Error() }
func (p *prefixed) Unwrap() error { return p.err }

// unknownCommand reports cobra's error for a command name it does not
// know (returned by its command lookup, before any hook of ours runs;
// cobra has no type for it).
func unknownCommand(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}
