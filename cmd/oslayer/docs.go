package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// referenceDir is where the CLI reference is committed, relative to the
// repository root; regenerateReference is the command that rewrites it.
const (
	referenceDir        = "docs/reference"
	regenerateReference = "go run ./cmd/oslayer docs " + referenceDir
)

// newDocsCmd is the hidden command that writes the CLI reference: a
// markdown page per command of the tree, with its usage, help, examples
// and flags, as --help shows them.
func newDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "docs DIR",
		Short:  "Write the CLI reference (a markdown page per command) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeReference(newRootCmd(), args[0])
		},
	}
}

// writeReference writes a page per command of root into dir and removes
// the pages of commands that no longer exist.
func writeReference(root *cobra.Command, dir string) error {
	pages := referencePages(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, ok := pages[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, b := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// referencePages renders the reference of root: file name → content.
func referencePages(root *cobra.Command) map[string][]byte {
	// cobra adds the completion command when the root runs; the
	// reference shows it.
	root.InitDefaultCompletionCmd()
	pages := map[string][]byte{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !documented(c) {
			return
		}
		c.InitDefaultHelpFlag()
		c.InitDefaultVersionFlag()
		pages[pageName(c)] = commandPage(c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return pages
}

// documented reports whether c gets a page: not hidden, not cobra's help.
func documented(c *cobra.Command) bool {
	return c.IsAvailableCommand() || !c.HasParent()
}

func pageName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

func commandPage(c *cobra.Command) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", c.CommandPath())
	fmt.Fprintf(&b, "<!-- Generated from the cobra commands by `%s`; do not edit. -->\n\n", regenerateReference)
	fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(c.Short))
	if c.Runnable() {
		fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "```\n%s [command]\n```\n\n", c.CommandPath())
	}
	if long := strings.TrimSpace(c.Long); long != "" {
		fmt.Fprintf(&b, "```text\n%s\n```\n\n", long)
	}
	if ex := strings.TrimRight(c.Example, " \n"); ex != "" {
		fmt.Fprintf(&b, "## Examples\n\n```sh\n%s\n```\n\n", ex)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("## Commands\n\n| command | |\n|---|---|\n")
		for _, s := range c.Commands() {
			if documented(s) {
				fmt.Fprintf(&b, "| [%s](%s) | %s |\n", s.CommandPath(), pageName(s), cell(s.Short))
			}
		}
		b.WriteString("\n")
	}
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString("## Flags\n\n")
		flagTable(&b, fs)
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, "## Global flags\n\nEvery command takes these ([%s](%s)).\n\n", c.Root().Name(), pageName(c.Root()))
		flagTable(&b, fs)
	}
	if c.HasParent() {
		p := c.Parent()
		fmt.Fprintf(&b, "## See also\n\n- [%s](%s): %s\n", p.CommandPath(), pageName(p), strings.TrimSpace(p.Short))
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}

// flagTable writes the visible flags of fs, sorted by name: the flag as
// --help shows it, its default and its usage.
func flagTable(b *bytes.Buffer, fs *pflag.FlagSet) {
	var flags []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			flags = append(flags, f)
		}
	})
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	for _, f := range flags {
		varname, usage := pflag.UnquoteUsage(f)
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		if varname != "" {
			name += " " + varname
		}
		def := ""
		if !zeroDefault(f) {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", cell(name), cell(def), cell(usage))
	}
	b.WriteString("\n")
}

// zeroDefault reports whether --help leaves f's default out.
func zeroDefault(f *pflag.Flag) bool {
	if f.Value.Type() == "string" {
		return f.DefValue == ""
	}
	switch f.DefValue {
	case "", "false", "0", "0s", "[]", "<nil>":
		return true
	}
	return false
}

// cell makes s fit in one markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
