package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/packagestage"
	"github.com/oslayer/oslayer/packagestage/bud"
	"github.com/oslayer/oslayer/render"
)

// renderCmd is `oslayer render`: its flags, and the render into a
// directory.
type renderCmd struct {
	g      *globals
	in     inputFlags
	reg    registryFlags
	index  baseIndexFlags
	pkg    packageFlags
	outDir string
	base   string
	arch   string
}

func newRenderCmd(g *globals) *cobra.Command {
	c := &renderCmd{g: g}
	cmd := &cobra.Command{
		Use:   "render --output-dir DIR [--osc FILE]... [--machineconfig FILE|DIR]... [--pool NAME] [--base REF]",
		Short: "Render node configuration into ostree-correct, reproducible layers",
		Long: `render turns Gardener OperatingSystemConfigs and OpenShift MachineConfigs into
the layers that sit on top of an ostree-native OS image, and writes

  DIR/rootfs/               exactly what the layers add, unpacked
  DIR/layers/NN-NAME.tar.gz the deterministic gzip layers (payload, config, metadata)
  DIR/report.json           every input item: baked (path, mode, sha256, source,
                            layer) or runtime-delivered (with the reason),
                            required packages, kernel arguments, warnings

Files under /etc and /usr are kept as they are; files under /var, /opt and
/usr/local are stored under /usr/lib/oslayer/var and materialised on the node
by tmpfiles.d rules. Units go to /etc/systemd/system and are enabled with
exactly the links systemctl enable creates. Secret content (Gardener
secretRef) is not baked unless --bake-secrets is given.

The same inputs give byte-identical layers; SOURCE_DATE_EPOCH sets the tar
mtime (default 2000-01-01T00:00:00Z). Nothing is written on error. An
existing DIR is replaced only when an earlier render wrote it (it holds the
.oslayer-render marker) or it is empty.`,
		Example: `  # A Gardener worker pool, from the gardener-node-agent Secret:
  oslayer render --osc secret-osc-worker-a.yaml --output-dir out/worker-a

  # An OpenShift pool from a directory of MachineConfigs:
  oslayer render --machineconfig mcs/ --pool worker --output-dir out/worker

  # imageRef files pulled through a mirror, JSON result on stdout:
  oslayer render --osc osc.yaml --mirror europe-docker.pkg.dev=mirror.local:5000 \
      --output-dir out/pool -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return flagError(c.run(cmd, args)) },
	}
	c.in.register(cmd.Flags())
	c.pkg.register(cmd.Flags())
	c.reg.registerReads(cmd.Flags())
	c.index.register(cmd.Flags())
	cmd.Flags().StringVar(&c.base, "base", "", "base image (registry reference or oci:DIR[:TAG]) whose units, enablement links and users rendering follows (read once per digest through the base index); without it the report says what was assumed")
	cmd.Flags().StringVar(&c.arch, "arch", "", "architecture of --base (amd64, arm64, x86_64, aarch64, ...): selects the platform of a multi-arch base and must match a single-arch one (default amd64)")
	cmd.Flags().StringVar(&c.outDir, "output-dir", "", "output directory (rootfs/, layers/, report.json); replaced only if an earlier render wrote it (or it is empty)")
	return cmd
}

// run renders onto the base's index (when --base is given), plans the
// package stage, writes the directory and prints the result.
func (c *renderCmd) run(cmd *cobra.Command, _ []string) error {
	if c.outDir == "" {
		return fmt.Errorf("--output-dir DIR is required")
	}
	ro, err := c.reg.options()
	if err != nil {
		return err
	}
	c.in.stdin = cmd.InOrStdin()
	req, err := c.in.request(ro)
	if err != nil {
		return err
	}
	info, b, err := c.index.renderBase(cmd.Context(), c.base, c.arch, ro, c.g.log)
	if err != nil {
		return err
	}
	if b != nil {
		req.Base = b.Index.FS()
		req.BaseName = fmt.Sprintf("base %s (%s)", b.Ref, b.Digest)
		fmt.Fprintf(cmd.ErrOrStderr(), "base %s @ %s: index %s from %s\n", b.Ref, b.Digest, info.Digest, info.Source)
	}
	res, err := render.Render(cmd.Context(), req)
	if err != nil {
		return err
	}
	plan, err := planPackages(&c.in, &c.pkg, res, b, c.arch)
	if err != nil {
		return err
	}
	if err := res.WriteDir(cmd.Context(), c.outDir); err != nil {
		return fmt.Errorf("write %s: %w", c.outDir, err)
	}
	return c.print(cmd.OutOrStdout(), res, plan)
}

// print writes the result as JSON (-o json) or as a summary, its
// warnings on stderr as build's.
func (c *renderCmd) print(out io.Writer, res *render.Result, plan *packagePlan) error {
	if c.g.json() {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(renderOutput{Result: res, PackageStage: plan})
	}
	res.SummaryWarn(out, c.g.warn)
	if plan != nil {
		key := "its key needs --base"
		if plan.Key != "" {
			key = "key " + plan.Key
		}
		fmt.Fprintf(out, "package stage (build runs it): %d commands, %s\n", len(plan.Commands), key)
	}
	fmt.Fprintf(out, "written to %s\n", c.outDir)
	return nil
}

// renderOutput is render's JSON: the render result and the planned
// package stage.
type renderOutput struct {
	*render.Result
	PackageStage *packagePlan `json:"packageStage,omitempty"`
}

// packagePlan is the package stage render plans (build runs it).
type packagePlan struct {
	// Key is the package key (needs the base digest: --base), Tag the
	// tag the package base gets in the target repository.
	Key string `json:"key,omitempty"`
	Tag string `json:"tag,omitempty"`
	// Packages are the extensions' packages, KernelType the kernel type
	// the generated steps select.
	Packages   []string `json:"packages,omitempty"`
	KernelType string   `json:"kernelType"`
	// Commands are the instructions build runs; Containerfile is the
	// whole Containerfile.
	Commands      []string `json:"commands"`
	Containerfile string   `json:"containerfile"`
}

// planPackages plans the package stage of a rendered pool (nil when it has
// no package inputs): the Containerfile, and the key when the base is
// known.
func planPackages(in *inputFlags, f *packageFlags, res *render.Result, base *assemble.Base, arch string) (*packagePlan, error) {
	c, err := f.config(nil, "", nil)
	if err != nil {
		return nil, err
	}
	st := bud.New(c)
	pin := st.Inputs(assemble.PackageRequest{Pool: in.pool, Arch: arch, Extensions: res.Extensions, KernelType: res.KernelType})
	if pin.Empty() {
		return nil, nil
	}
	var digest v1.Hash
	if base != nil {
		digest = base.Digest
	}
	plan, err := packagestage.NewPlan(digest, pin, c.ContextDir)
	if err != nil {
		return nil, err
	}
	cf := plan.Containerfile
	out := &packagePlan{Packages: cf.Packages, KernelType: cf.KernelType, Commands: cf.Commands(), Containerfile: string(cf.Bytes())}
	if base != nil {
		out.Key, out.Tag = plan.Key.String(), plan.Key.Tag()
	}
	return out, nil
}
