package assemble

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/model"
)

// renderFunc renders a pool's configuration into layers (render.Render;
// the package's tests give their own).
type renderFunc func(ctx context.Context, req render.Request) (*render.Result, error)

// PlatformImages is a reader of imageRef files that also reads them for
// another platform. In a multi-platform build each platform's render reads
// through ForPlatform of Render.Images when it is one (else through
// Render.Images itself).
type PlatformImages interface {
	model.ImageFiles
	ForPlatform(v1.Platform) model.ImageFiles
}

// Input is one platform's input prepared before its build: the base
// resolved (and indexed unless the base index is off) and the pool
// rendered onto it. A caller that builds many pools prepares what they
// share once (pipeline.Prepare) and hands it over in Request.Prepared.
type Input struct {
	// Platform is the platform built for (in a multi-platform build, its
	// place in the index).
	Platform v1.Platform
	// Base is the resolved base; it may be shared by other builds (the
	// build indexes a copy).
	Base *Base
	// Rendered is the pool rendered onto Base.
	Rendered *render.Result
}

// Request is one build: what to render, onto which base, for which pool.
type Request struct {
	// Render is the render request; Render.Pool names the pool and
	// Render.Epoch is the image's created time.
	Render render.Request
	// Base is the base image reference ("" means the MachineConfig pool's
	// osImageURL). Ignored when Prepared is set.
	Base string
	// Registry reaches the base; nil means the zero Options.
	Registry *registry.Options
	// Arch are the platforms to build for (none: amd64): one gives an
	// image of that platform, several (or ArchAll) one image per platform
	// and an index of them.
	Arch Platforms
	// Version is the oslayer version recorded in a label.
	Version string
	// Flags are the options that change the output, for provenance.
	Flags map[string]string
	// Logger receives progress and warnings; nil discards them.
	Logger *slog.Logger
	// BaseIndex is BaseIndexAuto ("" too) or BaseIndexOff. With auto the
	// renderer gets the base's tree from its index (IndexBase with Index;
	// a prepared Base whose Index is set is used as is) unless Render.Base
	// is already set.
	BaseIndex string
	// Index says where the base index is cached and published; its
	// Registry and Logger default to the request's.
	Index IndexOptions
	// Packages runs the package stage (nil: none; a pool with extensions
	// or kernelType is then refused). When it returns a package base, the
	// base index and the render are redone onto it and the config layers
	// are appended to it.
	Packages PackageStage
	// Prepared are the inputs prepared already: for a single image one,
	// for a multi-platform build (Arch names several architectures or
	// ArchAll) one per platform, in index order. nil: the build resolves
	// each base and renders.
	Prepared []Input

	// render renders; nil means render.Render (the package's tests).
	render renderFunc
}

// Result is what a build produced, ready for JSON output: one image, or
// for a multi-platform build an OCI index whose Platforms are the builds
// of each platform (the index's own fields are then Pool, Image, Digest,
// Target, Stages, Phases, Tagged and Error).
type Result struct {
	Pool string `json:"pool"`
	// Image is the digested reference of the built image or index
	// ("REG/REPO@sha256:..." or "oci:DIR@sha256:...").
	Image string `json:"image,omitempty"`
	// Digest is the built image's or index's (omitted when the build
	// stopped before it was assembled).
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
	// Platforms are the builds of each platform of a multi-platform
	// build, in index order (nil for a single image).
	Platforms []*Result `json:"platforms,omitempty"`

	// What was built (an image or an index) and written, for Retag and
	// the index.
	built     *Built
	published *Published
	indexOpts IndexOptions
}

// IsIndex reports whether the result is a multi-platform build's index.
func (r *Result) IsIndex() bool { return r.Platforms != nil }

// MarshalJSON writes an index's result with the index's own fields only.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	if !r.IsIndex() {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		Pool      string         `json:"pool"`
		Image     string         `json:"image,omitempty"`
		Digest    v1.Hash        `json:"digest,omitzero"`
		Target    string         `json:"target,omitempty"`
		Platforms []*Result      `json:"platforms"`
		Stages    map[string]any `json:"stages,omitempty"`
		Phases    []Phase        `json:"phases"`
		Tagged    bool           `json:"tagged"`
		Error     string         `json:"error,omitempty"`
	}{r.Pool, r.Image, r.Digest, r.Target, r.Platforms, r.Stages, r.Phases, r.Tagged, r.Error})
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
// digest, runs the other stages in order and finally moves the tag. Any
// failure stops the build with an error that names the step ("render:
// ...", "push: ...", "preflight: ...") and leaves the tag where it was.
// When req.Arch names several architectures (or ArchAll) it builds one
// image per platform and publishes an index of them with the same
// publisher and stages (Built.IsIndex). The returned Result is filled as far as the build got,
// also on error.
func Build(ctx context.Context, req Request, pub Publisher, stages ...Stage) (*Result, error) {
	var res *Result
	var err error
	if req.Arch.Multi() {
		res, err = buildIndex(ctx, req, pub, stages)
	} else {
		res, err = build(ctx, req, pub, stages, true)
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

// builder is the state of one image's build; each step reads and adds to
// it, in the order build runs them.
type builder struct {
	ctx      context.Context
	req      Request
	res      *Result
	log      *slog.Logger
	phase    phaseFunc
	useIndex bool
	iopts    IndexOptions
	// base is where the layers go: the official base, or the package
	// base once the package stage gave one (official is then the
	// official base).
	base     *Base
	official *Base
	// prepared is the render handed over (Request.Prepared), taken by
	// the first render onto the given base.
	prepared *render.Result
	rendered *render.Result
	built    *Built
	written  *Published
}

// phaseFunc runs one named, timed step.
type phaseFunc func(name string, f func() error) error

// build runs one image's build; with commit false it stops after the
// stages (the tag and the base index artifact are left to buildIndex).
func build(ctx context.Context, req Request, pub Publisher, stages []Stage, commit bool) (*Result, error) {
	res := &Result{Pool: req.Render.Pool, Layers: []AddedLayer{}, Target: target(pub)}
	if pub == nil {
		return res, errors.New("build: no publisher (give a push target or an output layout)")
	}
	log := logger(req.Logger)
	b := &builder{ctx: ctx, req: req, res: res, log: log, phase: res.phase(log)}
	if len(req.Prepared) == 1 {
		b.base, b.prepared = req.Prepared[0].Base, req.Prepared[0].Rendered
	}
	pre, post := splitStages(stages)
	for _, step := range []func() error{
		func() error { b.start(pub, commit); return nil }, b.resolveGiven,
		b.mode, b.index, b.render, b.packages, b.assemble,
		func() error { return b.runStages(pre) },
		func() error { return b.push(pub) },
		func() error { return b.runStages(post) },
	} {
		if err := step(); err != nil {
			return res, err
		}
	}
	res.built, res.published, res.indexOpts = b.built, b.written, b.iopts
	if !commit {
		return res, nil
	}
	if err := b.phase("tag", func() error { return pub.Commit(ctx, b.built, b.written) }); err != nil {
		return res, err
	}
	res.Tagged = true
	res.pushBaseIndex(ctx, b.base, b.iopts, b.phase)
	log.Info("built", "pool", res.Pool, "image", res.Image)
	return res, nil
}

// resolveGiven resolves a base given up front, first: a bad base fails
// before anything else, and its index feeds the renderer.
func (b *builder) resolveGiven() error {
	if b.base != nil || b.req.Base == "" {
		return nil
	}
	return b.resolve(b.req.Base)
}

// start lets a publisher that can (Starter) begin its write while the
// image is built: a single image's only (an index's platform images are
// written one after the other by one publisher), on a base given up
// front; first, before the base is even resolved.
func (b *builder) start(pub Publisher, commit bool) {
	st, ok := pub.(Starter)
	base := b.req.Base
	if b.base != nil {
		base = b.base.Ref
	}
	if !ok || !commit || base == "" {
		// Without a base (a MachineConfig pool's osImageURL) the write
		// does not know yet whence it mounts.
		return
	}
	st.Start(b.ctx, base)
}

// resolve resolves ref as the base.
func (b *builder) resolve(ref string) error {
	err := b.phase("base", func() (err error) {
		b.base, err = ResolveBaseCached(b.ctx, ref, b.req.Registry, b.req.Arch.Arch(), b.req.Index.CacheDir)
		return err
	})
	if err != nil {
		return errors.Unwrap(err) // ResolveBase names the base already
	}
	// A build that stops later still says which base it resolved.
	b.res.Base = resolved(b.base)
	return nil
}

// resolved is what a result reports of a resolved base (the zero Base
// for none).
func resolved(b *Base) Base {
	if b == nil {
		return Base{}
	}
	return Base{Ref: b.Ref, Digest: b.Digest, Pinned: b.Pinned}
}

// mode checks the base index mode and sets the index options.
func (b *builder) mode() error {
	switch b.req.BaseIndex {
	case "", BaseIndexAuto, BaseIndexOff:
	default:
		return fmt.Errorf("base index mode %q: want %q or %q", b.req.BaseIndex, BaseIndexAuto, BaseIndexOff)
	}
	b.useIndex = b.req.BaseIndex != BaseIndexOff && b.req.Render.Base == nil
	b.iopts = b.req.Index
	if b.iopts.Registry == nil {
		b.iopts.Registry = b.req.Registry
	}
	if b.iopts.Logger == nil {
		b.iopts.Logger = b.log
	}
	return nil
}

// index reads the base's index (once per base: the official base, then
// the package base from the official base's).
func (b *builder) index() error {
	if !b.useIndex || b.base == nil {
		return nil
	}
	// The caller's Base may be shared by other builds: index a copy.
	c := *b.base
	b.base = &c
	return b.phase("base-index", func() error {
		info, err := IndexBase(b.ctx, b.base, b.iopts)
		if err != nil {
			return field.Errorf("%w (%v=off builds without reading the base)", err, field.Name("baseIndex"))
		}
		b.res.BaseIndex = info
		b.res.Warnings = append(b.res.Warnings, info.Warnings...)
		return nil
	})
}

// render renders the pool onto the base. Without a base (a MachineConfig
// pool's osImageURL is its base) it renders to learn the base, resolves
// it once and, when indexed, renders again onto its index.
func (b *builder) render() error {
	if b.base == nil {
		if err := b.renderOnto(); err != nil {
			return err
		}
		url := b.rendered.OSImageURL
		if url == "" {
			return nil // assemble says there is no base
		}
		if err := b.resolve(url); err != nil {
			return err
		}
		b.log.Info("base image from the MachineConfig pool's osImageURL", "base", url)
		if !b.useIndex {
			return nil
		}
		if err := b.index(); err != nil {
			return err
		}
	}
	return b.renderOnto()
}

// renderOnto renders the pool onto b.base (its index when indexed).
func (b *builder) renderOnto() error {
	rreq := b.req.Render
	if b.base != nil && b.base.Index != nil && b.useIndex {
		rreq.Base = b.base.Index.FS()
	}
	if b.base != nil && rreq.BaseName == "" {
		rreq.BaseName = fmt.Sprintf("base %s (%s)", b.base.Ref, b.base.Digest)
	}
	renderFn := b.req.render
	if renderFn == nil {
		renderFn = render.Render
	}
	if pr := b.prepared; pr != nil {
		b.prepared = nil
		renderFn = func(context.Context, render.Request) (*render.Result, error) { return pr, nil }
	}
	return b.phase("render", func() (err error) {
		b.rendered, err = renderFn(b.ctx, rreq)
		if err == nil && b.rendered == nil {
			err = errors.New("renderer returned nothing")
		}
		return err
	})
}

// packages runs the package stage onto the base. When it gives a package
// base, that becomes the base (indexed from the official base's index:
// only the layers the stage added are read) and the pool is rendered onto
// it.
func (b *builder) packages() error {
	if b.req.Packages == nil {
		return nil
	}
	if b.base == nil {
		return field.Inputf("package stage: no base image: give %v, or MachineConfigs with osImageURL", field.Name("base"))
	}
	r := b.rendered
	var pr *PackageResult
	if err := b.phase("package-stage", func() (err error) {
		pr, err = b.req.Packages.Run(b.ctx, PackageRequest{
			Pool: b.req.Render.Pool, Base: b.base, Arch: b.req.Arch.Arch(),
			Extensions: r.Extensions, KernelType: r.KernelType, Logger: b.log,
		})
		return err
	}); err != nil || pr == nil {
		// A stage that failed says how far it got.
		b.res.PackageStage = pr
		return err
	}
	b.res.PackageStage = pr
	var pb *Base
	if err := b.phase("package-base", func() (err error) {
		pb, err = ResolveBase(b.ctx, pr.Ref, b.req.Registry, b.req.Arch.Arch())
		return err
	}); err != nil {
		return err
	}
	// The package base is pinned by digest; the user's pinning is the
	// official base's.
	pb.Pinned = b.base.Pinned || registry.IsLayout(b.base.Ref)
	b.official, b.base = b.base, pb
	b.log.Info("package stage", "pool", b.req.Render.Pool, "hit", pr.Hit, "key", pr.Key, "packageBase", pr.Ref)
	b.iopts.Parent = b.official.Index
	if err := b.index(); err != nil {
		return err
	}
	if b.base.Index != nil && b.useIndex {
		return b.renderOnto()
	}
	return nil
}

// assemble appends the rendered layers to the base.
func (b *builder) assemble() error {
	res, r := b.res, b.rendered
	if b.req.BaseIndex == BaseIndexOff {
		w := offWarning(r.Report)
		res.Warnings = append(res.Warnings, w)
		b.log.Warn(w, "pool", res.Pool)
	}
	res.Report, res.KernelArgs, res.InputsDigest, res.Inputs = r.Report, r.KernelArgs, r.InputsDigest, r.Inputs
	if err := b.phase("assemble", func() (err error) {
		if b.base == nil {
			return field.Inputf("no base image: give %v (e.g. quay.io/fedora/fedora-coreos:stable), or MachineConfigs with osImageURL", field.Name("base"))
		}
		b.built, err = Assemble(b.ctx, AssembleRequest{
			Base: b.req.Base, BaseImage: b.base, Registry: b.req.Registry, Arch: b.req.Arch.Arch(),
			Pool: b.req.Render.Pool, Rendered: r, Epoch: b.req.Render.Epoch, Version: b.req.Version,
			Flags: b.req.Flags, Logger: b.log, Official: b.official,
		})
		return err
	}); err != nil {
		return err
	}
	res.Digest, res.Base, res.Layers = b.built.Digest, b.built.Base, b.built.Added
	if b.official != nil {
		res.Base = *b.official
	}
	res.Warnings = append(res.Warnings, b.built.Warnings...)
	if res.Layers == nil {
		res.Layers = []AddedLayer{}
	}
	return nil
}

// splitStages separates the stages that run before the write (content
// checks: a build they stop writes nothing) from the others.
func splitStages(stages []Stage) (pre, post []Stage) {
	for _, s := range stages {
		switch {
		case s == nil:
		case IsPreWrite(s):
			pre = append(pre, s)
		default:
			post = append(post, s)
		}
	}
	return pre, post
}

// runStages runs stages on the built image (and, after the push, on
// where it was written).
func (b *builder) runStages(stages []Stage) error {
	for _, s := range stages {
		if err := runStage(b.phase, &b.res.Stages, s.Name(), func() (any, error) { return s.Run(b.ctx, b.built, b.written) }); err != nil {
			return err
		}
	}
	return nil
}

// push writes the image by digest.
func (b *builder) push(pub Publisher) error {
	if err := b.phase("push", func() (err error) {
		b.written, err = pub.Write(b.ctx, b.built)
		if err == nil && b.written == nil {
			err = errors.New("publisher returned nothing")
		}
		return err
	}); err != nil {
		return err
	}
	p := b.written
	b.res.Image, b.res.BytesUploaded, b.res.BytesSkipped, b.res.BytesMounted = p.Ref, p.Uploaded, p.Skipped, p.Mounted
	return nil
}

// phase returns the function that runs a named step of the build into
// res.Phases; its error names the step once.
func (res *Result) phase(log *slog.Logger) phaseFunc {
	return func(name string, f func() error) error {
		err := TimePhase(&res.Phases, name, f)
		if err != nil {
			// Stages name themselves in their errors; name the step once.
			if strings.HasPrefix(err.Error(), name+": ") {
				return err
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		if log != nil {
			log.Debug("build step done", "pool", res.Pool, "step", name, "seconds", res.Phases[len(res.Phases)-1].Seconds)
		}
		return nil
	}
}

// logger is log, or one that discards.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// pushBaseIndex pushes the base index artifact next to the images once the
// tag moved: shared with every later build into this repository. The
// image is complete without it: a failure is a warning. An index found in
// the registry (next to the base or here) or in the disk cache (which
// holds what an earlier build fetched or built and published) is not
// pushed: once per base digest is enough, and an unchanged rebuild sends
// nothing for it.
func (res *Result) pushBaseIndex(ctx context.Context, base *Base, iopts IndexOptions, phase phaseFunc) {
	if res.BaseIndex == nil || iopts.Repository == "" || base == nil || base.Index == nil {
		return
	}
	switch res.BaseIndex.Source {
	case string(baseindex.SourceRegistry), string(baseindex.SourceCache):
		return
	}
	err := phase("base-index-publish", func() error { return PublishIndex(ctx, base, iopts) })
	if err != nil {
		res.Warnings = append(res.Warnings, err.Error())
		logger(iopts.Logger).Warn("base index not published", "error", err)
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
func runStage(phase phaseFunc, outs *map[string]any, name string, run func() (any, error)) error {
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
