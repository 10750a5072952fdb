package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/pipeline/settings"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/sign"
)

// buildFlags are the options of oslayer build.
type buildFlags struct {
	in         inputFlags
	reg        registryFlags
	preflight  preflightFlags
	sign       signFlags
	index      baseIndexFlags
	pkg        packageFlags
	base       string
	push       string
	arch       string
	digestFile string
	pod        podFlags
	// settings are the build settings the in, index and preflight flags
	// set (pipeline.Flags).
	settings settings.Settings
}

func newBuildCmd(g *globals) *cobra.Command {
	f := &buildFlags{}
	cmd := &cobra.Command{
		Use:   "build --pool NAME [--osc FILE]... [--machineconfig PATH]... [--base REF] --push (REF | oci:DIR[:TAG])",
		Short: "Build a pool's OS image onto an ostree-native base without pulling it, check it, push it",
		Long: `build renders the pool's configuration into a few layers, appends them to the
base image (assembly reads only the base's manifest and config; no base
layer is downloaded for it) and runs the preflight checks of its content;
only then does it write the image by digest (a content check that fails
writes no blob), check the written image against the base, sign it when
asked, and finally move the tag. Any failure leaves the tag where it was.

The base is a registry reference or an OCI layout (oci:DIR[:TAG]); a tag is
resolved to a digest once and recorded (pin a digest for reproducible
builds). Without --base, a MachineConfig pool's osImageURL is the base.
What rendering needs to know about the base (the units the OS ships and
their [Install] sections, its enablement links, passwd/group) comes from its
base index: the base's layers are read once per base digest (verified,
never stored), and the index is cached on disk and pushed next to the image
as sha256-<digest>.baseindex, so later builds on that base read no base
layer. --base-index=off never reads the base; the result then says what was
assumed.
The same inputs give the same image digest; a rebuild with unchanged inputs
uploads nothing.

The last line on stdout is the digested reference (REG/REPO@sha256:... or
oci:DIR@sha256:...), the one nodes rebase to; -o json prints the whole
result instead. Progress and warnings go to stderr. SOURCE_DATE_EPOCH, when
set, is the time stamped on every file and on the image.`,
		Example: `  # The embedded example: a Gardener worker pool onto the example base, into an OCI layout
  oslayer build --base oci:examples/base --pool worker \
      --osc examples/gardener/worker-osc.yaml --push oci:out/worker:latest

  # OpenShift worker MachineConfigs onto Fedora CoreOS, pushed to a registry
  oslayer build --base quay.io/fedora/fedora-coreos:stable --pool worker \
      --machineconfig examples/openshift/ --push registry.example.com/os/worker:latest

  # Result as JSON, digested reference also written to a file
  oslayer build --base oci:examples/base --pool worker --osc examples/gardener/worker-osc.yaml \
      --push oci:out/worker -o json --digest-file out/worker.digest`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runBuild(cmd, g, f) },
	}
	f.register(cmd.Flags())
	return cmd
}

// register adds oslayer build's flags to fs.
func (f *buildFlags) register(fs *pflag.FlagSet) {
	f.in.set, f.index.set, f.preflight.set = &f.settings, &f.settings, &f.settings
	f.in.register(fs)
	f.reg.registerUploads(fs)
	registerSettings(fs, pipeline.FlagsPush, &f.settings)
	f.preflight.register(fs)
	f.sign.register(fs)
	f.index.register(fs)
	f.pkg.register(fs)
	fs.StringVar(&f.base, "base", "", "base image: registry reference (pin @sha256:...) or oci:DIR[:TAG]; default: the MachineConfigs' osImageURL")
	fs.StringVar(&f.push, "push", "", "target: registry REG/REPO[:TAG] or OCI layout oci:DIR[:TAG] (tag defaults to latest)")
	fs.StringVar(&f.arch, "arch", "", "architecture to build for (amd64, arm64, x86_64, aarch64, ...): selects the platform of a multi-arch base and must match a single-arch one (default amd64); several (amd64,arm64) or all (every platform of the base's index) build one image per platform and push an OCI index of them")
	fs.StringVar(&f.digestFile, "digest-file", "", "also write the digested reference to this file")
	f.pod.register(fs)
}

func runBuild(cmd *cobra.Command, g *globals, f *buildFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.pod.poolImage != "" {
		return runBuildPod(cmd, g, f)
	}
	spec, err := f.spec(g)
	if err != nil {
		// The flags (and the files they name) are bad input.
		return &exitError{code: 2, err: err}
	}
	p, err := pipeline.New(spec, pipeline.Env{Version: version, Logger: g.log, Stdin: cmd.InOrStdin(), PackageLog: stderr,
		Publish: []publish.Option{publish.WithProgress(stderr)}, ReadBack: true, PublishBaseIndex: true})
	if err != nil {
		return flagError(err)
	}
	// The package stage's scratch storage is removed while the build
	// goes on; the command ends once it is gone.
	defer p.Close()
	res, err := p.Run(cmd.Context())
	return f.report(g, stdout, res, flagError(err), func() { summaries(stderr, res) })
}

// spec maps oslayer build's flags onto the build specification: the
// inputs flags onto Inputs, --base, --arch and --push onto Base, Arch and
// Target, the registry flags onto Registry, --base-index-cache onto
// IndexCacheDir, the package flags onto Packages (always run) and the
// signing flags onto Signing; the settings flags (pipeline.Flags: the
// preflight flags, --base-index, --bake-secrets, --strict,
// --allow-toplevel) with pipeline's one mapping (Spec.SetSettings). Its Env reads the written image back
// (other writers may share the repository) and pushes the base index
// artifact next to the image in a registry target.
func (f *buildFlags) spec(g *globals) (pipeline.Spec, error) {
	var s pipeline.Spec
	if f.in.pool == "" {
		return s, errors.New("--pool is required (the pool's name, e.g. worker)")
	}
	if len(f.in.oscs) == 0 && len(f.in.mcs) == 0 {
		return s, errors.New("nothing to build: give --osc and/or --machineconfig")
	}
	if f.push == "" {
		return s, errors.New("give a target: --push REG/REPO[:TAG] or --push oci:DIR[:TAG]")
	}
	arch, err := pipeline.ParsePlatforms(f.arch)
	if err != nil {
		return s, fmt.Errorf("--arch %w", err)
	}
	if arch.Multi() {
		if f.sign.key != "" && registry.IsLayout(f.push) {
			return s, fmt.Errorf("--arch %s with --sign-key: signing a multi-platform image in an OCI layout is not supported; push it to a registry", f.arch)
		}
	}
	reg, err := f.reg.options()
	if err != nil {
		return s, err
	}
	reg.UserAgent = "oslayer/" + version
	in, err := f.in.spec()
	if err != nil {
		return s, err
	}
	if _, err := f.preflight.spec(); err != nil {
		return s, err
	}
	sg, err := f.sign.spec(f.push)
	if err != nil {
		return s, err
	}
	cache, err := f.index.cache()
	if err != nil {
		return s, err
	}
	pk, err := f.pkg.spec()
	if err != nil {
		return s, err
	}
	s = pipeline.Spec{
		Inputs: in, Base: f.base, Arch: arch, Target: f.push, Registry: reg,
		IndexCacheDir: cache, Packages: pk, Signing: sg,
	}
	return s, flagError(s.SetSettings(f.settings))
}

// report ends a build: in text mode the render's and the build's warnings
// of the image (of each platform's) go to stderr, even when the build
// failed (-o json has them in out); then the --digest-file, and out as
// JSON or text() (the summary on stderr) and the digested reference last
// on stdout.
func (f *buildFlags) report(g *globals, stdout io.Writer, out *assemble.Result, err error, text func()) error {
	results := []*assemble.Result{out}
	if out.IsIndex() {
		results = out.Platforms
	}
	if !g.json() {
		for _, res := range results {
			if res == nil {
				continue
			}
			if res.Report != nil {
				for _, w := range res.Report.Warnings {
					g.warn(w)
				}
			}
			for _, w := range res.Warnings {
				g.warn(w)
			}
		}
	}
	if err != nil {
		if g.json() {
			// A machine reader learns which step failed and what was done.
			_ = printJSON(stdout, out)
		}
		return err
	}
	image := out.Image
	if f.digestFile != "" {
		if err := writeAtomic(f.digestFile, []byte(image+"\n")); err != nil {
			return fmt.Errorf("--digest-file %s: %w", f.digestFile, err)
		}
	}
	if g.json() {
		return printJSON(stdout, out)
	}
	text()
	_, err = fmt.Fprintln(stdout, image)
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// summary tells the user on stderr what was produced.
func summary(w io.Writer, r *assemble.Result) {
	fmt.Fprintf(w, "pool %s: %s\n", r.Pool, r.Image)
	pin := ""
	if !r.Base.Pinned && !registry.IsLayout(r.Base.Ref) {
		pin = " (resolved from a tag)"
	}
	fmt.Fprintf(w, "  base   %s @ %s%s\n", r.Base.Ref, r.Base.Digest, pin)
	if p := r.PackageStage; p != nil {
		how := "built"
		if p.Hit {
			how = "cached"
		}
		fmt.Fprintf(w, "  packages %s (%s, key %s, %d commands, %.3fs)\n", p.Ref, how, p.Key, len(p.Commands), p.Seconds)
		for _, l := range p.Layers {
			fmt.Fprintf(w, "  package layer %s %7d B  %s\n", l.Digest, l.Size, firstLineOf(l.Source))
		}
	}
	if ix := r.BaseIndex; ix != nil {
		fmt.Fprintf(w, "  index  %s from %s, %d paths, %d base bytes read", ix.Digest, ix.Source, ix.Entries, ix.BytesRead)
		if ix.Published != "" {
			fmt.Fprintf(w, ", pushed to %s", ix.Published)
		}
		fmt.Fprintln(w)
	}
	for _, l := range r.Layers {
		fmt.Fprintf(w, "  layer  %s %7d B  %s\n", l.Digest, l.Size, l.Source)
	}
	// BytesSkipped (JSON bytesSkipped) includes the mounted bytes.
	fmt.Fprintf(w, "  bytes  uploaded %d B, skipped %d B (already there %d B, mounted %d B)\n",
		r.BytesUploaded, r.BytesSkipped, r.BytesSkipped-r.BytesMounted, r.BytesMounted)
	var ph []string
	var total float64
	for _, p := range r.Phases {
		ph = append(ph, fmt.Sprintf("%s %.3fs", p.Name, p.Seconds))
		total += p.Seconds
	}
	fmt.Fprintf(w, "  time   %.3fs (%s)\n", total, strings.Join(ph, ", "))
	// Where the signature and the provenance attestation live (cosign's
	// REPO:sha256-HEX.sig and .att tags).
	for _, name := range []string{sign.StageSign, sign.StageAttest} {
		switch v := r.Stages[name].(type) {
		case *sign.SignResult:
			fmt.Fprintf(w, "  signed %s%s\n", v.SignatureTag, already(v.Existing))
		case *sign.AttestResult:
			fmt.Fprintf(w, "  attest %s%s\n", v.AttestationTag, already(v.Existing))
		}
	}
	if r.Target != "" {
		fmt.Fprintf(w, "  tagged %s\n", r.Target)
	}
}

// firstLineOf is s up to its first line break, at most 80 bytes.
func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func already(existing bool) string {
	if existing {
		return " (already there)"
	}
	return ""
}

// writeAtomic writes data to path through a temporary file beside it and a
// rename: path holds its old content or all of data, never a part, even
// when the process is killed.
func writeAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".oslayer-tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// summaries tells the user on stderr what was produced: the image, or
// each platform's image and their index.
func summaries(w io.Writer, res *assemble.Result) {
	if !res.IsIndex() {
		summary(w, res)
		return
	}
	for _, r := range res.Platforms {
		summary(w, r)
	}
	fmt.Fprintf(w, "pool %s: index %s (%d platforms)\n", res.Pool, res.Image, len(res.Platforms))
	if v, ok := res.Stages[sign.StageSign].(*sign.SignResult); ok {
		fmt.Fprintf(w, "  signed %s%s\n", v.SignatureTag, already(v.Existing))
	}
	if res.Target != "" {
		fmt.Fprintf(w, "  tagged %s\n", res.Target)
	}
}
