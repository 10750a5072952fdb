package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/build"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage/bud"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/sources/model"
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
	fs := cmd.Flags()
	f.in.register(fs)
	f.reg.register(fs)
	f.preflight.register(fs)
	f.sign.register(fs)
	f.index.register(fs)
	f.pkg.register(fs)
	fs.StringVar(&f.base, "base", "", "base image: registry reference (pin @sha256:...) or oci:DIR[:TAG]; default: the MachineConfigs' osImageURL")
	fs.StringVar(&f.push, "push", "", "target: registry REG/REPO[:TAG] or OCI layout oci:DIR[:TAG] (tag defaults to latest)")
	fs.StringVar(&f.arch, "arch", "", "architecture to build for (amd64, arm64, x86_64, aarch64, ...): selects the platform of a multi-arch base and must match a single-arch one (default amd64); several (amd64,arm64) or all (every platform of the base's index) build one image per platform and push an OCI index of them")
	fs.StringVar(&f.digestFile, "digest-file", "", "also write the digested reference to this file")
	f.pod.register(fs)
	return cmd
}

func runBuild(cmd *cobra.Command, g *globals, f *buildFlags) error {
	ctx := cmd.Context()
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.pod.poolImage != "" {
		return runBuildPod(cmd, g, f)
	}
	if f.in.pool == "" {
		return errors.New("--pool is required (the pool's name, e.g. worker)")
	}
	if len(f.in.oscs) == 0 && len(f.in.mcs) == 0 {
		return errors.New("nothing to build: give --osc and/or --machineconfig")
	}
	target := f.push
	if target == "" {
		return errors.New("give a target: --push REG/REPO[:TAG] or --push oci:DIR[:TAG]")
	}
	arches, err := build.ParseArches(f.arch)
	if err != nil {
		return err
	}
	multi := len(arches) > 1 || arches[0] == build.ArchAll
	if multi && f.sign.key != "" && registry.IsLayout(f.push) {
		return fmt.Errorf("--arch %s with --sign-key: signing a multi-platform image in an OCI layout is not supported; push it to a registry", f.arch)
	}
	reg, err := f.reg.options()
	if err != nil {
		return err
	}
	reg.UserAgent = "oslayer/" + version
	f.in.stdin = cmd.InOrStdin()
	rreq, err := f.in.request(reg)
	if err != nil {
		return err
	}
	pub, err := publish.New(target, reg, publish.WithProgress(stderr), publish.WithLogger(g.log))
	if err != nil {
		return err
	}
	stages, err := f.preflight.stages(g, reg)
	if err != nil {
		return err
	}
	ss, err := f.sign.stages(g, reg, target)
	if err != nil {
		return err
	}
	stages = append(stages, ss...)
	repo := ""
	if !registry.IsLayout(f.push) {
		t, err := publish.ParseTarget(f.push)
		if err != nil {
			return err
		}
		repo = t.Context().Name()
	}
	iopts, err := f.index.options(reg, repo, g.log)
	if err != nil {
		return err
	}
	pcfg, err := f.pkg.config(reg, repo, stderr)
	if err != nil {
		return err
	}
	packages := bud.New(pcfg)
	// The package stage's scratch storage is removed while the build
	// goes on; the command ends once it is gone.
	defer packages.Wait()

	images, err := f.in.images(reg)
	if err != nil {
		return err
	}
	if len(arches) == 1 && arches[0] != build.ArchAll && arches[0] != "" {
		// imageRef content of the platform built for.
		rreq.Images = images(&v1.Platform{OS: "linux", Architecture: arches[0]})
	}
	if multi {
		return runBuildMulti(cmd, g, f, build.MultiRequest{
			Request: build.Request{
				Render: rreq, Base: f.base, Registry: reg, Version: version,
				Flags: provenanceFlags(f), Logger: g.log, BaseIndex: f.index.mode, Index: iopts,
				Packages: packages,
			},
			Arches: arches,
			Images: func(p v1.Platform) model.ImageFiles { return images(&p) },
		}, pub, stages)
	}

	res, err := build.Build(ctx, build.Request{
		Render:    rreq,
		Base:      f.base,
		Registry:  reg,
		Arch:      f.arch,
		Version:   version,
		Flags:     provenanceFlags(f),
		Logger:    g.log,
		BaseIndex: f.index.mode,
		Index:     iopts,
		Packages:  packages,
	}, pub, stages...)
	return f.report(g, stdout, []*build.Result{res}, res, err, func() { summary(stderr, res) })
}

// report ends a build: in text mode the render's and the build's warnings
// of every result go to stderr, even when the build failed (-o json has
// them in out); then the --digest-file, and out as JSON or text() (the
// summary on stderr) and the digested reference last on stdout.
func (f *buildFlags) report(g *globals, stdout io.Writer, results []*build.Result, out any, err error, text func()) error {
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
	image := digestedRef(out)
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

// digestedRef is the image a build result names.
func digestedRef(out any) string {
	switch r := out.(type) {
	case *build.Result:
		return r.Image
	case *build.MultiResult:
		return r.Image
	}
	return ""
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// provenanceFlags are the options that change the output.
func provenanceFlags(f *buildFlags) map[string]string {
	return build.OutputFlags{Pool: f.in.pool, Base: f.base, BaseIndex: f.index.mode, Arch: f.arch,
		BakeSecrets: f.in.bakeSecrets, AllowTopLevel: f.in.allowTopLevel}.Map()
}

// summary tells the user on stderr what was produced.
func summary(w io.Writer, r *build.Result) {
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

// runBuildMulti builds one image per platform and publishes their index
// (--arch with several architectures, or all).
func runBuildMulti(cmd *cobra.Command, g *globals, f *buildFlags, req build.MultiRequest, pub *publish.Publisher, stages []build.Stage) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	res, err := build.BuildMulti(cmd.Context(), req, pub, stages...)
	return f.report(g, stdout, res.Platforms, res, err, func() {
		for _, r := range res.Platforms {
			summary(stderr, r)
		}
		fmt.Fprintf(stderr, "pool %s: index %s (%d platforms)\n", res.Pool, res.Image, len(res.Platforms))
		if v, ok := res.Stages[sign.StageSign].(*sign.SignResult); ok {
			fmt.Fprintf(stderr, "  signed %s%s\n", v.SignatureTag, already(v.Existing))
		}
		if res.Target != "" {
			fmt.Fprintf(stderr, "  tagged %s\n", res.Target)
		}
	})
}
