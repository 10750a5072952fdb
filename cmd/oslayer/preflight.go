package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/preflight"
)

// preflightCmd is `oslayer preflight`: its flags, and the run of the
// checks on one image.
type preflightCmd struct {
	g    *globals
	pf   preflightFlags
	rf   registryFlags
	base string
	arch string
}

func newPreflightCmd(g *globals) *cobra.Command {
	c := &preflightCmd{g: g}
	cmd := &cobra.Command{
		Use: "preflight IMAGE",
		Example: `  # An image pushed to a registry, against the base it was built on
  oslayer preflight registry.example.com/os/worker@sha256:... \
      --base quay.io/fedora/fedora-coreos:stable

  # A customer base built with podman must derive from the official image
  oslayer preflight registry.example.com/custom/fcos:latest \
      --require-base quay.io/fedora/fedora-coreos:stable --expect-version 43

  # An OCI layout, machine-readable, warnings fatal
  oslayer preflight oci:out/worker:latest -o json --fatal-warnings`,
		Short: "Check an OS image before it is published (exit 0 passed, 1 errors found, 2 could not run)",
		Long: `preflight checks an image built on an ostree-native base (by oslayer or
elsewhere, e.g. a customer base built with podman) before nodes rebase onto it:
base layers present, bootable, platform, version, manifest format, content of
the added layers (mirroring bootc container lint), secrets, systemd units,
size, and the layer count (--warn-layers, --max-layers) with one history entry
per layer. It reads only manifests, configs and the added layers (those after
--base, after the ostree.final-diffid label, or, on a rechunked base without
it, the trailing layers oslayer's history entries name); base layer blobs are
never downloaded.

IMAGE is a registry reference or an OCI layout (oci:DIR[:TAG]).

Exit codes: 0 all checks passed, 1 errors found, 2 the checks could not run.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: 2, err: fmt.Errorf("preflight: want exactly one IMAGE, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: c.run,
	}
	fs := cmd.Flags()
	fs.StringVar(&c.base, "base", "", "base image the IMAGE was built on: its layers must be a prefix, and the layers after it are the added layers")
	fs.StringVar(&c.arch, "arch", "", "architecture of the nodes (amd64, arm64, x86_64, aarch64); also selects the image from a multi-arch index")
	c.pf.register(fs)
	c.rf.registerReads(fs)
	return cmd
}

// run checks the image args[0]; every error but the checks' findings
// exits 2.
func (c *preflightCmd) run(cmd *cobra.Command, args []string) error {
	fail := func(err error) error { return &exitError{code: 2, err: flagError(err)} }
	opts, err := c.pf.options(c.g)
	if err != nil {
		return fail(err)
	}
	var platform *v1.Platform
	if c.arch != "" {
		opts.Arch = c.arch
		platform = &v1.Platform{OS: "linux", Architecture: preflight.NormalizeArch(c.arch)}
	}
	t, err := c.target(cmd.Context(), args[0], platform)
	if err != nil {
		return fail(err)
	}
	rep, err := preflight.Run(cmd.Context(), t, opts)
	if err != nil {
		return fail(err)
	}
	if err := c.print(cmd.OutOrStdout(), rep); err != nil {
		return fail(err)
	}
	if rep.Errors > 0 {
		return &exitError{code: 1, err: fmt.Errorf("preflight: %s: %s, %s", args[0], count(rep.Errors, "error"), count(rep.Warnings, "warning"))}
	}
	return nil
}

// target resolves the image, --base and --require-base for platform.
func (c *preflightCmd) target(ctx context.Context, ref string, platform *v1.Platform) (preflight.Target, error) {
	t := preflight.Target{Ref: ref}
	reg, err := c.rf.options()
	if err != nil {
		return t, err
	}
	if t.Image, _, err = reg.Image(ctx, ref, platform); err != nil {
		return t, fmt.Errorf("preflight: %w", err)
	}
	if c.base != "" {
		if t.Base, _, err = reg.Image(ctx, c.base, platform); err != nil {
			return t, fmt.Errorf("preflight: --base: %w", err)
		}
		t.BaseRef = c.base
		t.BaseTree = cachedBaseTree(t.Base)
	}
	if c.pf.requireBase() != "" {
		if t.Require, _, err = reg.Image(ctx, c.pf.requireBase(), platform); err != nil {
			return t, fmt.Errorf("preflight: --require-base: %w", err)
		}
		t.RequireRef = c.pf.requireBase()
	}
	return t, nil
}

// cachedBaseTree is the tree of a base a build indexed, from the disk
// cache: the usr-override check reads the base's tree from it (no base
// blob is read; without it, nil, the check is skipped).
func cachedBaseTree(base v1.Image) fs.FS {
	d, err := base.Digest()
	if err != nil {
		return nil
	}
	dir, err := baseindex.DefaultCacheDir()
	if err != nil {
		return nil
	}
	if ix, err := (baseindex.Cache{Dir: dir}).Load(d); err == nil && ix != nil {
		return ix.FS()
	}
	return nil
}

// print writes the report as JSON (-o json) or as the human table.
func (c *preflightCmd) print(out io.Writer, rep *preflight.Report) error {
	if !c.g.json() {
		return printReport(out, rep)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// printReport writes the human table: CHECK, SEVERITY, LAYER, PATH, MESSAGE
// and a summary line.
func printReport(w io.Writer, rep *preflight.Report) error {
	if len(rep.Findings) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CHECK\tSEVERITY\tLAYER\tPATH\tMESSAGE")
		for _, f := range rep.Findings {
			check := f.Check
			if f.Rule != "" {
				check += "/" + f.Rule
			}
			layer := f.Layer
			if len(layer) > 19 {
				layer = layer[:19]
			}
			p := f.Path
			if p != "" {
				p = "/" + p
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", check, f.Severity, dash(layer), dash(p), strings.ReplaceAll(f.Text(flagOf), "\n", " "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	counts := map[string]int{}
	var skipped []string
	for _, c := range rep.Checks {
		counts[c.Status]++
		if c.Status == "skipped" {
			skipped = append(skipped, c.Name)
		}
	}
	result := "PASSED"
	if rep.Errors > 0 {
		result = "FAILED"
	}
	lc := rep.Layers
	_, err := fmt.Fprintf(w, "%s: %s (%d passed, %d warned, %d failed, %d skipped); %s, %s, %s; %s; %s (warning above %d, error at %d)\n",
		result, count(len(rep.Checks), "check"), counts["passed"], counts["warned"], counts["failed"], counts["skipped"],
		count(rep.Errors, "error"), count(rep.Warnings, "warning"), count(rep.Infos, "note"), count(len(rep.AddedLayers), "added layer"),
		count(lc.Layers, "layer"), lc.WarnAbove, lc.ErrorAt)
	if err == nil && len(skipped) > 0 {
		_, err = fmt.Fprintf(w, "skipped: %s\n", strings.Join(skipped, ", "))
	}
	return err
}

// count is "1 error", "2 errors".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
