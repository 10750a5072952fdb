package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage/bud"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/publish/record"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/sources/imageref"
	"github.com/oslayer/oslayer/sources/model"
)

// Env is what a front-end shares between its builds or gives them
// without changing any image: logs, the version recorded, connections and
// known blobs (publish options), decrypted keys, imageRef readers.
type Env struct {
	// Version is the oslayer version recorded in the image.
	Version string
	// Logger receives progress and warnings; nil discards them.
	Logger *slog.Logger
	// Stdin is read for an input named "-".
	Stdin io.Reader
	// PackageLog receives the package stage's build output.
	PackageLog io.Writer
	// Publish are the publisher's options besides its logger (progress,
	// shared sessions and known blobs, sole writer, ...).
	Publish []publish.Option
	// Sign are the signing stages' options besides the registry, the
	// logger, the version and the Spec's (sole writer).
	Sign []sign.Option
	// Keys decrypts signing keys once for many builds (nil: every time).
	Keys *Keys
	// Images returns the imageRef reader of a platform (nil: linux/amd64)
	// shared by many builds; nil makes the build's own (Inputs.ImageRefs),
	// or takes the Cache's.
	Images func(*v1.Platform) model.ImageFiles
	// Cache is shared by the builds of one run (a fleet): bases, platform
	// lists, imageRef readers, known blobs and connections (see Cache,
	// Prepare). nil: the build resolves what it needs itself.
	Cache *Cache
	// SoleWriter says the front-end is the only writer of the tags,
	// signatures and attestations of its builds (publish.WithSoleWriter,
	// sign.WithSoleWriter): a fleet, whose every image is signed by one
	// pool.
	SoleWriter bool
	// SingleRequestUploads uploads each blob in one request
	// (publish.WithSingleRequestUploads).
	SingleRequestUploads bool
	// ManifestByTag puts a single image's manifest once, by tag, after
	// every stage (publish.WithManifestByTag; no stage may read it back
	// by digest). An index's platform images are put by digest anyway.
	ManifestByTag bool

	// Two policies of the front-end, the same for all its builds; they
	// change no image. ReadBack checks the written image as read back
	// from the target (oslayer build: other writers may share the
	// repository) instead of the assembled one, which a registry keeps
	// under its digest with exactly those bytes (a fleet, the
	// controller); it reads only what the write did not prove (a
	// registry that answered the manifest's PUT with its digest proved
	// it: assemble.Published.Proven). PublishBaseIndex pushes the base index artifact next
	// to the image in a registry target, for later builds into that
	// repository (oslayer build, a fleet; the controller's builds share
	// its disk cache).
	ReadBack         bool
	PublishBaseIndex bool
}

// Pipeline is a Spec made ready to run: the build request, the publisher
// and the stages. Run builds; Prepare resolves the bases (through the
// Env's Cache, shared by many builds) and renders into a Plan that builds
// the same image (Plan.Build), and Retag moves the tag to what a plan of
// the same identity built.
type Pipeline struct {
	Spec      Spec
	Request   assemble.Request
	Publisher *publish.Publisher
	// Stages are the build record, preflight (content, then the written
	// image) and, when signing, sign and attest, in order (the content
	// checks run before the write, the record first after it).
	Stages []assemble.Stage
	// Repository is the target's repository ("" for an OCI layout).
	Repository string

	env      Env
	packages *bud.Stage
	readers  []*imageref.Reader
}

// New turns a specification into the pipeline that runs it: the one
// place the publisher, the preflight and signing stages, the package
// stage, the base index options and the build request are made. It
// checks the specification first (nothing is built, pushed or tagged for
// a specification it refuses) and decrypts the signing key, so a wrong
// password fails before anything is built.
func New(spec Spec, env Env) (*Pipeline, error) {
	if err := spec.Check(); err != nil {
		return nil, err
	}
	reg := spec.Registry
	if reg == nil {
		reg = &registry.Options{}
	}
	if spec.RequestJobs > 0 {
		// The settings' bound of an image's blob requests at once.
		c := *reg
		c.Requests = spec.RequestJobs
		reg = &c
	}
	if reg.Shared == nil {
		// Every registry call of the build (the base and its index, the
		// push, the record, the read-back, the signatures) shares one
		// ping per registry and one token per repository, unless the
		// front-end shares its own between builds.
		c := *reg
		c.Shared = &registry.Connections{}
		reg = &c
	}
	p := &Pipeline{Spec: spec, env: env}
	log := env.Logger
	pub, err := publish.New(spec.Target, reg, publishOptions(spec, env)...)
	if err != nil {
		return nil, inputErr("push", "", err)
	}
	p.Publisher = pub
	if !registry.IsLayout(spec.Target) {
		t, err := publish.ParseTarget(spec.Target)
		if err != nil {
			return nil, inputErr("push", "", err)
		}
		p.Repository = t.Context().Name()
	}
	// The build record first after the write: the image is dated before
	// any tag (its signature's, its own) names it, so prune cannot find
	// it undated (publish/record).
	p.Stages = []assemble.Stage{&record.Stage{Registry: reg, Version: env.Version}}
	p.Stages = append(p.Stages, preflight.Stages(preflightOptions(spec.Preflight, env.ReadBack, reg, log))...)
	ss, err := signStages(spec, reg, env)
	if err != nil {
		return nil, err
	}
	p.Stages = append(p.Stages, ss...)
	p.Request = p.request(reg, env)
	return p, nil
}

// request is the build request of the pipeline's spec.
func (p *Pipeline) request(reg *registry.Options, env Env) assemble.Request {
	spec := p.Spec
	in := spec.Inputs
	mode := spec.BaseIndex
	if mode == "" {
		mode = assemble.BaseIndexAuto
	}
	req := assemble.Request{
		Render:   spec.RenderRequest(),
		Base:     spec.Base,
		Registry: reg,
		Arch:     spec.Arch,
		Version:  env.Version,
		Flags: assemble.OutputFlags{Pool: in.Pool, Base: spec.Base, BaseIndex: mode, Arch: spec.Arch.String(),
			BakeSecrets: in.BakeSecrets, AllowTopLevel: in.AllowTopLevel}.Map(),
		Logger:    env.Logger,
		BaseIndex: mode,
		Index:     assemble.IndexOptions{CacheDir: spec.IndexCacheDir, Registry: reg, Logger: env.Logger},
	}
	req.Render.Stdin = env.Stdin
	if env.PublishBaseIndex && p.Repository != "" {
		req.Index.Repository = p.Repository
	}
	if images := p.images(reg, env); images != nil {
		if spec.Arch.Multi() {
			req.Render.Images = platformImages{ImageFiles: images(nil), of: images}
		} else if a := spec.Arch.Arch(); a != "" {
			// imageRef content of the platform built for.
			req.Render.Images = images(&v1.Platform{OS: "linux", Architecture: registry.NormalizeArch(a)})
		} else {
			req.Render.Images = images(nil)
		}
	}
	if pk := spec.Packages; pk != nil {
		p.packages = bud.New(bud.Config{
			Containerfile: pk.Containerfile, ContainerfileName: pk.ContainerfileName, ContextDir: pk.ContextDir,
			BuildArgs: pk.BuildArgs, Secrets: pk.Secrets, Repos: pk.Repos,
			Repository: p.Repository, Registry: reg, Log: env.PackageLog,
		})
		req.Packages = p.packages
	}
	return req
}

// images returns the constructor of imageRef readers: the Env's, the
// Cache's, or the pipeline's own within Inputs.ImageRefs (nil: imageRef
// files refused).
func (p *Pipeline) images(reg *registry.Options, env Env) func(*v1.Platform) model.ImageFiles {
	if env.Images != nil {
		return env.Images
	}
	lim := p.Spec.Inputs.ImageRefs
	if lim == nil {
		return nil
	}
	if env.Cache != nil {
		return func(pl *v1.Platform) model.ImageFiles { return env.Cache.images(pl, reg, lim) }
	}
	return func(pl *v1.Platform) model.ImageFiles {
		r := imageref.New(reg, imageRefOptions(lim, pl)...)
		p.readers = append(p.readers, r)
		return r
	}
}

// platformImages reads imageRef files for the default platform and, in a
// multi-platform build, for each platform through its own reader
// (assemble.PlatformImages).
type platformImages struct {
	model.ImageFiles
	of func(*v1.Platform) model.ImageFiles
}

func (p platformImages) ForPlatform(pl v1.Platform) model.ImageFiles { return p.of(&pl) }

// imageRefOptions are the options of an imageRef reader within lim for
// platform pl (nil: the default).
func imageRefOptions(lim *ImageRefs, pl *v1.Platform) []imageref.Option {
	var opts []imageref.Option
	if lim.Budget > 0 {
		opts = append(opts, imageref.WithBudget(lim.Budget))
	}
	if lim.Timeout > 0 {
		opts = append(opts, imageref.WithTimeout(lim.Timeout))
	}
	if pl != nil {
		opts = append(opts, imageref.WithPlatform(*pl))
	}
	return opts
}

// publishOptions are the publisher's options: the logger, the Env's
// policies and options, what the Cache shares.
func publishOptions(spec Spec, env Env) []publish.Option {
	opts := append([]publish.Option{publish.WithLogger(env.Logger)}, env.Publish...)
	if env.Cache != nil {
		opts = append(opts, env.Cache.publishOptions()...)
	}
	if env.SoleWriter {
		opts = append(opts, publish.WithSoleWriter())
	}
	if env.SingleRequestUploads {
		opts = append(opts, publish.WithSingleRequestUploads())
	}
	if env.ManifestByTag && !spec.Arch.Multi() {
		opts = append(opts, publish.WithManifestByTag())
	}
	return opts
}

// Run runs the build: one image, or for several platforms one image per
// platform and their index (build.Build).
func (p *Pipeline) Run(ctx context.Context) (*assemble.Result, error) {
	return assemble.Build(ctx, p.Request, p.Publisher, p.Stages...)
}

// Close waits for the package stage's scratch storage to be removed and
// closes the imageRef readers the pipeline made.
func (p *Pipeline) Close() {
	if p.packages != nil {
		p.packages.Wait()
	}
	for _, r := range p.readers {
		r.Close()
	}
}

// preflightOptions are the checks' options; the one Open of the base and
// of the written image goes through reg.
func preflightOptions(pf Preflight, readBack bool, reg *registry.Options, log *slog.Logger) preflight.Options {
	o := preflight.Options{
		Skip: pf.Skip, ExpectVersion: pf.ExpectVersion, FatalWarnings: pf.FatalWarnings,
		DenyUsrOverride: pf.DenyUsrOverride, AllowSecrets: pf.AllowSecrets,
		MaxAddedBytes: pf.MaxAddedBytes, WarnLayers: pf.WarnLayers, MaxLayers: pf.MaxLayers,
		RequireBase: pf.RequireBase, NoReadBack: !readBack, Log: log,
	}
	o.Open = func(ctx context.Context, ref string, p *v1.Platform) (v1.Image, error) {
		img, _, err := reg.Image(ctx, ref, p)
		return img, err
	}
	return o
}

// signStages are the sign and attest stages (none without Signing); the
// key is decrypted here, before anything is built.
func signStages(spec Spec, reg *registry.Options, env Env) ([]assemble.Stage, error) {
	s := spec.Signing
	if s == nil {
		return nil, nil
	}
	if s.Key == nil {
		return nil, inputErr(sign.StageSign, "signing.key", errors.New("no key"))
	}
	sv, err := env.Keys.Signer(s.Key, s.Password)
	if err != nil {
		// "signing.key: key cosign.key: wrong or missing password".
		return nil, inputErr(sign.StageSign, "signing.key", err)
	}
	opts := []sign.Option{sign.WithRegistry(reg), sign.WithReferrers(s.Referrers), sign.WithVersion(env.Version), sign.WithIdentity(s.Identity)}
	if env.SoleWriter {
		opts = append(opts, sign.WithSoleWriter())
	}
	if env.Logger != nil {
		opts = append(opts, sign.WithLogger(env.Logger))
	}
	key := func(context.Context) (signature.SignerVerifier, error) { return sv, nil }
	return sign.Stages(key, append(opts, env.Sign...)...), nil
}

// Check validates the specification; each error names the field.
func (s Spec) Check() error {
	var errs []error
	add := func(step, field string, err error) { errs = append(errs, inputErr(step, field, err)) }
	if s.Target == "" {
		add("push", "target", errors.New("no target: give REG/REPO[:TAG] or oci:DIR[:TAG]"))
	}
	switch s.BaseIndex {
	case "", assemble.BaseIndexAuto, assemble.BaseIndexOff:
	default:
		add("config", "baseIndex", fmt.Errorf("%q: want %s or %s", s.BaseIndex, assemble.BaseIndexAuto, assemble.BaseIndexOff))
	}
	if s.RequestJobs < 0 || s.RequestJobs > 256 {
		add("push", "requestJobs", fmt.Errorf("%d: want 1 to 256", s.RequestJobs))
	}
	errs = append(errs, s.Preflight.check()...)
	if g := s.Signing; g != nil && g.Identity != "" {
		if !registry.IsLayout(s.Target) {
			add(sign.StageSign, "signing.identity", fmt.Errorf("for OCI layout targets; a signature of %s names its own repository", s.Target))
		} else if _, err := name.NewRepository(g.Identity); err != nil {
			add(sign.StageSign, "signing.identity", fmt.Errorf("%q: %v", g.Identity, err))
		}
	}
	return errors.Join(errs...)
}

// check validates the preflight options.
func (pf Preflight) check() []error {
	var errs []error
	for i, sk := range pf.Skip {
		if err := preflight.CheckKnown(sk, nil); err != nil {
			errs = append(errs, inputErr("preflight", fmt.Sprintf("preflight.skip[%d]", i), err))
		}
	}
	if pf.MaxAddedBytes < 0 {
		errs = append(errs, inputErr("preflight", "preflight.maxAddedBytes", fmt.Errorf("%d: want a positive size", pf.MaxAddedBytes)))
	}
	warn, max := pf.WarnLayers, pf.MaxLayers
	if warn < 0 || max < 0 {
		errs = append(errs, inputErr("preflight", "preflight.warnLayers", fmt.Errorf("%d, maxLayers %d: want positive layer counts", warn, max)))
	}
	if warn == 0 {
		warn = preflight.DefaultWarnLayers
	}
	if max == 0 {
		max = preflight.DefaultMaxLayers
	}
	if warn >= max {
		errs = append(errs, inputErr("preflight", "preflight.warnLayers", fmt.Errorf("%d must be below maxLayers %d", warn, max)))
	}
	return errs
}
