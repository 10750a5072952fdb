package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/internal/registry"
)

// baseIndexCmd is `oslayer base-index publish`: its flags.
type baseIndexCmd struct {
	g     *globals
	reg   registryFlags
	index baseIndexFlags
	to    string
	arch  string
}

func newBaseIndexCmd(g *globals) *cobra.Command {
	c := &baseIndexCmd{g: g}
	cmd := &cobra.Command{
		Use:   "base-index",
		Short: "Publish a base image's index once, for every build on it",
		Example: `  # Where bases are mirrored or promoted: publish the index next to the base
  oslayer base-index publish registry.example.com/os/fcos@sha256:...`,
	}
	pub := &cobra.Command{
		Use:   "publish BASE",
		Short: "Index BASE (read its layers once) and publish the index next to it",
		Long: `publish makes the index of BASE (a registry reference; a tag is resolved to
its digest) and pushes it as the artifact "sha256-<hex>.baseindex" next to
the base, in the repository it is read from (or --to): every build on that
base digest, anywhere, then finds it there before reading any base layer.
An index already there, or in the disk cache, is not made again; one
already next to the base is not pushed again. Run it once per base digest
where bases are mirrored or promoted (see docs/benchmarks.md).`,
		Example: `  oslayer base-index publish registry.example.com/os/fcos:stable
  oslayer base-index publish quay.io/fedora/fedora-coreos@sha256:... --to registry.example.com/os/fcos`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: 2, err: fmt.Errorf("base-index publish: want one BASE, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: c.run,
	}
	c.reg.registerReads(pub.Flags())
	c.index.register(pub.Flags())
	pub.Flags().StringVar(&c.to, "to", "", "repository to publish the index to: REG/REPO (default: the base's own)")
	pub.Flags().StringVar(&c.arch, "arch", "", "architecture of a multi-architecture base (default amd64)")
	cmd.AddCommand(pub)
	return cmd
}

// run resolves the base, makes or finds its index and publishes it.
func (c *baseIndexCmd) run(cmd *cobra.Command, args []string) error {
	ref := args[0]
	bad := func(err error) error {
		return &exitError{code: 2, err: fmt.Errorf("base-index publish %s: %w", ref, err)}
	}
	if registry.IsLayout(ref) {
		return bad(fmt.Errorf("give a registry reference (the index is published next to the base)"))
	}
	reg, err := c.reg.options()
	if err != nil {
		return bad(err)
	}
	parsed, err := reg.ParseReference(ref)
	if err != nil {
		return bad(err)
	}
	to := c.to
	if to == "" {
		to = parsed.Context().Name()
	} else if _, err := reg.ParseReference(to); err != nil {
		return bad(fmt.Errorf("--to %q: %w", to, err))
	}
	o, err := c.index.options(reg, to, c.g.log)
	if err != nil {
		return bad(err)
	}
	ctx := cmd.Context()
	base, err := assemble.ResolveBase(ctx, ref, reg, c.arch)
	if err != nil {
		return err
	}
	info, err := assemble.IndexBase(ctx, base, o)
	if err != nil {
		return err
	}
	if info.Source != string(baseindex.SourceRegistry) {
		if err := assemble.PublishIndex(ctx, base, o); err != nil {
			return fmt.Errorf("base-index publish %s: %w", ref, err)
		}
		info.Published = to + ":" + baseindex.Tag(base.Digest)
	}
	if c.g.json() {
		return printJSON(cmd.OutOrStdout(), info)
	}
	if info.Published == "" {
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "base index of %s already in the registry (%d entries)\n", base.Digest, info.Entries)
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "base index of %s (%s, %d entries, %d base bytes read) published to %s\n",
		base.Digest, info.Source, info.Entries, info.BytesRead, info.Published)
	return err
}
