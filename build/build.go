package build

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/build/baseindex"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/model"
)

// Renderer renders a pool's configuration into layers (render.Render).
type Renderer func(ctx context.Context, req render.Request) (*render.Result, error)

// Request is one build: what to render, onto which base, for which pool.
type Request struct {
	// Render is the render request; Render.Pool names the pool and
	// Render.Epoch is the image's created time.
	Render render.Request
	// Renderer renders; nil means render.Render.
	Renderer Renderer
	// Base is the base image reference ("" means the MachineConfig pool's
	// osImageURL). Ignored when BaseImage is set.
	Base string
	// BaseImage is an already resolved base, shared by many builds.
	BaseImage *Base
	// Registry reaches the base; nil means the zero Options.
	Registry *registry.Options
	// Arch selects the base platform ("" means amd64).
	Arch string
	// Version is the oslayer version recorded in a label.
	Version string
	// Flags are the options that change the output, for provenance.
	Flags map[string]string
	// Logger receives progress and warnings; nil discards them.
	Logger *slog.Logger
	// BaseIndex is BaseIndexAuto ("" too) or BaseIndexOff. With auto the
	// renderer gets the base's tree from its index (IndexBase with Index;
	// a BaseImage whose Index is set is used as is) unless Render.Base is
	// already set.
	BaseIndex string
	// Index says where the base index is cached and published; its
	// Registry and Logger default to the request's.
	Index IndexOptions
	// Packages runs the package stage (nil: none; a pool with extensions
	// or kernelType is then refused). When it returns a package base, the
	// base index and the render are redone onto it and the config layers
	// are appended to it.
	Packages PackageStage
}

// Result is what a build produced, ready for JSON output.
type Result struct {
	Pool string `json:"pool"`
	// Image is the digested reference of the built image
	// ("REG/REPO@sha256:..." or "oci:DIR@sha256:...").
	Image string `json:"image,omitempty"`
	// Digest is the built image's (omitted when the build stopped
	// before the image was assembled).
	Digest v1.Hash `json:"digest,omitzero"`
	// Target is where the tag moved (the publisher's target), if known.
	Target       string         `json:"target,omitempty"`
	Base         Base           `json:"base"`
	Layers       []AddedLayer   `json:"layers"`
	KernelArgs   []string       `json:"kernelArgs,omitempty"`
	InputsDigest string         `json:"inputsDigest,omitempty"`
	Inputs       []model.Input  `json:"inputs,omitempty"`
	Report       *render.Report `json:"report,omitempty"`
	// Bytes moved by the publisher: uploaded, skipped (already there) and
	// cross-repository mounted.
	BytesUploaded int64 `json:"bytesUploaded"`
	BytesSkipped  int64 `json:"bytesSkipped"`
	BytesMounted  int64 `json:"bytesMounted"`
	// Phases are the wall times of each step, in order.
	Phases []Phase `json:"phases"`
	// Stages holds each stage's output by stage name.
	Stages map[string]any `json:"stages,omitempty"`
	// PackageStage reports the package stage when one ran; Base is then
	// still the official base and PackageStage.Ref the package base the
	// layers were appended to.
	PackageStage *PackageResult `json:"packageStage,omitempty"`
	// BaseIndex is the base index the renderer used (nil: none).
	BaseIndex *IndexInfo `json:"baseIndex,omitempty"`
	Warnings  []string   `json:"warnings,omitempty"`
	// Platform is the platform built for, in a multi-platform build
	// ("linux/arm64").
	Platform string `json:"platform,omitempty"`
	// Tagged is true once the tag moved (the build fully succeeded).
	Tagged bool `json:"tagged"`
	// Error is why the build stopped (empty on success).
	Error string `json:"error,omitempty"`

	// What BuildMulti needs of a platform's build.
	built     *Built
	published *Published
	indexOpts IndexOptions
}

// Phase is one step of a build and its wall time.
type Phase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the process's CPU time (user and system, with its
	// waited-for children) during the phase (ProcessCPU).
	CPUSeconds float64 `json:"cpuSeconds"`
}

// Targeter is implemented by publishers that can name their target.
type Targeter interface{ Target() string }

// Build renders, assembles, runs the PreWrite stages, writes the image by
// digest, runs the other stages in order and finally moves the tag. Any failure stops the build with an error
// that names the step ("render: ...", "push: ...", "preflight: ...") and
// leaves the tag where it was. The returned Result is filled as far as the
// build got, also on error.
func Build(ctx context.Context, req Request, pub Publisher, stages ...Stage) (*Result, error) {
	res, err := build(ctx, req, pub, stages, true)
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

// build runs one build; with commit false it stops after the stages (the
// tag and the base index artifact are left to BuildMulti).
func build(ctx context.Context, req Request, pub Publisher, stages []Stage, commit bool) (*Result, error) {
	log := req.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res := &Result{Pool: req.Render.Pool, Layers: []AddedLayer{}}
	if t, ok := pub.(Targeter); ok {
		res.Target = t.Target()
	}
	if pub == nil {
		return res, errors.New("build: no publisher (give a push target or an output layout)")
	}
	phase := func(name string, f func() error) error {
		err := TimePhase(&res.Phases, name, f)
		if err != nil {
			// Stages name themselves in their errors; name the step once.
			if strings.HasPrefix(err.Error(), name+": ") {
				return err
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		log.Debug("build step done", "pool", res.Pool, "step", name, "seconds", res.Phases[len(res.Phases)-1].Seconds)
		return nil
	}
	// A base given up front is resolved first: a bad base fails before
	// anything else, and its index feeds the renderer.
	base := req.BaseImage
	if base == nil && req.Base != "" {
		if err := phase("base", func() (err error) {
			base, err = ResolveBase(ctx, req.Base, req.Registry, req.Arch)
			return err
		}); err != nil {
			return res, errors.Unwrap(err) // ResolveBase names the base already
		}
	}
	res.Base = resolved(base)
	switch req.BaseIndex {
	case "", BaseIndexAuto, BaseIndexOff:
	default:
		return res, fmt.Errorf("base index mode %q: want %q or %q", req.BaseIndex, BaseIndexAuto, BaseIndexOff)
	}
	useIndex := req.BaseIndex != BaseIndexOff && req.Render.Base == nil
	iopts := req.Index
	if iopts.Registry == nil {
		iopts.Registry = req.Registry
	}
	if iopts.Logger == nil {
		iopts.Logger = log
	}
	renderFn := req.Renderer
	if renderFn == nil {
		renderFn = render.Render
	}
	var r *render.Result
	renderOnto := func(base *Base) error {
		rreq := req.Render
		if base != nil && base.Index != nil && useIndex {
			rreq.Base = base.Index.FS()
		}
		if base != nil && rreq.BaseName == "" {
			rreq.BaseName = fmt.Sprintf("base %s (%s)", base.Ref, base.Digest)
		}
		return phase("render", func() (err error) {
			r, err = renderFn(ctx, rreq)
			if err == nil && r == nil {
				err = errors.New("renderer returned nothing")
			}
			return err
		})
	}
	indexed := func() error {
		if !useIndex || base == nil {
			return nil
		}
		// The caller's Base may be shared by other builds: index a copy.
		b := *base
		base = &b
		return phase("base-index", func() error {
			info, err := IndexBase(ctx, base, iopts)
			if err != nil {
				return fmt.Errorf("%w (--base-index=off builds without reading the base)", err)
			}
			res.BaseIndex = info
			res.Warnings = append(res.Warnings, info.Warnings...)
			return nil
		})
	}
	if err := indexed(); err != nil {
		return res, err
	}
	if base == nil && useIndex {
		// The base comes from the MachineConfigs (osImageURL): render once
		// to learn it, then again onto its index.
		if err := renderOnto(nil); err != nil {
			return res, err
		}
		if r.OSImageURL != "" {
			if err := phase("base", func() (err error) {
				base, err = ResolveBase(ctx, r.OSImageURL, req.Registry, req.Arch)
				return err
			}); err != nil {
				return res, errors.Unwrap(err)
			}
			res.Base = resolved(base)
			log.Info("base image from the MachineConfig pool's osImageURL", "base", r.OSImageURL)
			if err := indexed(); err != nil {
				return res, err
			}
		}
	}
	if r == nil || (base != nil && base.Index != nil && useIndex) {
		if err := renderOnto(base); err != nil {
			return res, err
		}
	}
	official, err := runPackages(ctx, req, res, &base, r, phase)
	if err != nil {
		return res, err
	}
	if official != nil {
		// The package base's index starts from the official base's:
		// only the layers the stage added are read.
		iopts.Parent = official.Index
		if err := indexed(); err != nil {
			return res, err
		}
		if base.Index != nil && useIndex {
			if err := renderOnto(base); err != nil {
				return res, err
			}
		}
	}
	if req.BaseIndex == BaseIndexOff {
		w := offWarning(r.Report)
		res.Warnings = append(res.Warnings, w)
		log.Warn(w, "pool", res.Pool)
	}
	res.Report, res.KernelArgs, res.InputsDigest, res.Inputs = r.Report, r.KernelArgs, r.InputsDigest, r.Inputs

	var b *Built
	if err := phase("assemble", func() (err error) {
		areq := AssembleRequest{
			Base: req.Base, BaseImage: base, Registry: req.Registry, Arch: req.Arch,
			Pool: req.Render.Pool, Rendered: r, Epoch: req.Render.Epoch, Version: req.Version,
			Flags: req.Flags, Logger: log, Official: official,
		}
		if areq.BaseImage == nil && areq.Base == "" {
			if r.OSImageURL == "" {
				return errors.New("no base image: give --base (e.g. quay.io/fedora/fedora-coreos:stable), or MachineConfigs with osImageURL")
			}
			areq.Base = r.OSImageURL
			log.Info("base image from the MachineConfig pool's osImageURL", "base", r.OSImageURL)
		}
		b, err = Assemble(ctx, areq)
		return err
	}); err != nil {
		return res, err
	}
	res.Digest, res.Base, res.Layers = b.Digest, b.Base, b.Added
	if official != nil {
		res.Base = *official
	}
	res.Warnings = append(res.Warnings, b.Warnings...)
	if res.Layers == nil {
		res.Layers = []AddedLayer{}
	}

	runStages := func(stages []Stage, p *Published) error {
		for _, s := range stages {
			if err := runStage(phase, &res.Stages, s.Name(), func() (any, error) { return s.Run(ctx, b, p) }); err != nil {
				return err
			}
		}
		return nil
	}
	var pre, post []Stage
	for _, s := range stages {
		switch {
		case s == nil:
		case IsPreWrite(s):
			pre = append(pre, s)
		default:
			post = append(post, s)
		}
	}
	// Content checks first: a build they stop writes nothing.
	if err := runStages(pre, nil); err != nil {
		return res, err
	}

	var p *Published
	if err := phase("push", func() (err error) {
		p, err = pub.Write(ctx, b)
		if err == nil && p == nil {
			err = errors.New("publisher returned nothing")
		}
		return err
	}); err != nil {
		return res, err
	}
	res.Image, res.BytesUploaded, res.BytesSkipped, res.BytesMounted = p.Ref, p.Uploaded, p.Skipped, p.Mounted

	if err := runStages(post, p); err != nil {
		return res, err
	}
	res.built, res.published, res.indexOpts = b, p, iopts
	if !commit {
		return res, nil
	}

	if err := phase("tag", func() error { return pub.Commit(ctx, b, p) }); err != nil {
		return res, err
	}
	res.Tagged = true
	res.publishIndex(ctx, base, iopts, phase, log)
	log.Info("built", "pool", res.Pool, "image", res.Image)
	return res, nil
}

// publishIndex pushes the base index artifact next to the images once the
// tag moved: shared with every later build into this repository. The
// image is complete without it: a failure is a warning.
func (res *Result) publishIndex(ctx context.Context, base *Base, iopts IndexOptions, phase func(string, func() error) error, log *slog.Logger) {
	if res.BaseIndex == nil || res.BaseIndex.Source == string(baseindex.SourceRegistry) || iopts.Repository == "" || base == nil || base.Index == nil {
		return
	}
	err := phase("base-index-publish", func() error { return PublishIndex(ctx, base, iopts) })
	if err != nil {
		res.Warnings = append(res.Warnings, err.Error())
		log.Warn("base index not published", "error", err)
	} else {
		res.BaseIndex.Published = iopts.Repository + ":" + baseindex.Tag(base.Index.Base)
	}
}

// offWarning says what a build with the base index off assumed.
func offWarning(rep *render.Report) string {
	var assumed []string
	if rep != nil {
		for _, u := range rep.Units {
			if u.InstallFrom == "fallback" {
				assumed = append(assumed, u.Name)
			}
		}
	}
	msg := "base index off: the base image was not read, so nothing was checked against its units, files, users or groups"
	if len(assumed) > 0 {
		msg += "; assumed WantedBy=" + render.FallbackWantedBy + " for the units it ships: " + strings.Join(assumed, ", ")
	}
	return msg
}

// runStage runs one stage as the phase name and records its output (if
// any) in *outs under name.
func runStage(phase func(string, func() error) error, outs *map[string]any, name string, run func() (any, error)) error {
	var out any
	if err := phase(name, func() (err error) {
		out, err = run()
		return err
	}); err != nil {
		return err
	}
	if out != nil {
		if *outs == nil {
			*outs = map[string]any{}
		}
		(*outs)[name] = out
	}
	return nil
}

// runPackages runs req.Packages for the rendered pool r onto *base. When
// it gives a package base, *base becomes that (resolved by digest, not yet
// indexed) and the official base is returned; otherwise nil.
// resolved is what a result reports of a resolved base (the zero Base
// for none).
func resolved(b *Base) Base {
	if b == nil {
		return Base{}
	}
	return Base{Ref: b.Ref, Digest: b.Digest, Pinned: b.Pinned}
}

func runPackages(ctx context.Context, req Request, res *Result, base **Base, r *render.Result, phase func(string, func() error) error) (*Base, error) {
	if req.Packages == nil {
		return nil, nil
	}
	if *base == nil {
		// The base comes from the MachineConfigs and was not resolved
		// for an index (--base-index=off).
		if r.OSImageURL == "" {
			return nil, errors.New("package stage: no base image: give --base, or MachineConfigs with osImageURL")
		}
		if err := phase("base", func() (err error) {
			*base, err = ResolveBase(ctx, r.OSImageURL, req.Registry, req.Arch)
			return err
		}); err != nil {
			return nil, errors.Unwrap(err)
		}
		res.Base = resolved(*base)
	}
	log := req.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var pr *PackageResult
	if err := phase("package-stage", func() (err error) {
		pr, err = req.Packages.Run(ctx, PackageRequest{
			Pool: req.Render.Pool, Base: *base, Arch: req.Arch,
			Extensions: r.Extensions, KernelType: r.KernelType, Logger: log,
		})
		return err
	}); err != nil {
		// A stage that failed says how far it got.
		res.PackageStage = pr
		return nil, err
	}
	if pr == nil {
		return nil, nil
	}
	res.PackageStage = pr
	official := *base
	var pb *Base
	if err := phase("package-base", func() (err error) {
		pb, err = ResolveBase(ctx, pr.Ref, req.Registry, req.Arch)
		return err
	}); err != nil {
		return nil, err
	}
	// The package base is pinned by digest; the user's pinning is the
	// official base's.
	pb.Pinned = official.Pinned || registry.IsLayout(official.Ref)
	*base = pb
	log.Info("package stage", "pool", req.Render.Pool, "hit", pr.Hit, "key", pr.Key, "packageBase", pr.Ref)
	return official, nil
}
