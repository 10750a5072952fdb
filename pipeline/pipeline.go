package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage/bud"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/publish/record"
	"github.com/oslayer/oslayer/render"
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
	// shared by many builds; nil makes the build's own (Inputs.ImageRefs).
	Images func(*v1.Platform) model.ImageFiles

	// Two policies of the front-end, the same for all its builds; they
	// change no image. ReadBack checks the written image as read back
	// from the target (oslayer build: other writers may share the
	// repository) instead of the assembled one, which a registry keeps
	// under its digest with exactly those bytes (a fleet, the
	// controller). PublishBaseIndex pushes the base index artifact next
	// to the image in a registry target, for later builds into that
	// repository (oslayer build, a fleet; the controller's builds share
	// its disk cache).
	ReadBack         bool
	PublishBaseIndex bool
}

// Pipeline is a Spec made ready to run: the build request, the publisher
// and the stages. A front-end may hand over what it resolved already for
// many builds (Request.BaseImage, Request.Bases, Request.Renderer, ...)
// before Run: that changes no image.
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

	packages *bud.Stage
	readers  []*imageref.Reader
}

// Error is a specification New refuses: Field names it (as the fleet
// plan and the PoolImage name it: "preflight.maxLayers"), Step is the
// build step it belongs to ("push", "sign", "preflight", "config").
type Error struct {
	Field string
	Step  string
	Err   error
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

func specErr(step, field string, err error) error {
	return &Error{Step: step, Field: field, Err: err}
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
	p := &Pipeline{Spec: spec}
	log := env.Logger
	pub, err := publish.New(spec.Target, reg, append([]publish.Option{publish.WithLogger(log)}, env.Publish...)...)
	if err != nil {
		return nil, specErr("push", "", err)
	}
	p.Publisher = pub
	if !registry.IsLayout(spec.Target) {
		t, err := publish.ParseTarget(spec.Target)
		if err != nil {
			return nil, specErr("push", "", err)
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
	arch := strings.Join(spec.Arch, ",")
	req := assemble.Request{
		Render: render.Request{
			OSCs: in.OSCs, Stdin: env.Stdin, MachineConfigs: in.MachineConfigs, MachineConfigPools: in.MachineConfigPools,
			Pool: in.Pool, SecretsDir: in.SecretsDir, BakeSecrets: in.BakeSecrets, Strict: in.Strict,
			AllowTopLevel: in.AllowTopLevel, Epoch: in.Epoch, AllowSecrets: spec.Preflight.AllowSecrets,
		},
		Base:     spec.Base,
		Registry: reg,
		Arch:     arch,
		Version:  env.Version,
		Flags: assemble.OutputFlags{Pool: in.Pool, Base: spec.Base, BaseIndex: mode, Arch: arch,
			BakeSecrets: in.BakeSecrets, AllowTopLevel: in.AllowTopLevel}.Map(),
		Logger:    env.Logger,
		BaseIndex: mode,
		Index:     assemble.IndexOptions{CacheDir: spec.IndexCacheDir, Registry: reg, Logger: env.Logger},
	}
	if env.PublishBaseIndex && p.Repository != "" {
		req.Index.Repository = p.Repository
	}
	if images := p.images(reg, env); images != nil {
		if multi, _ := req.MultiPlatform(); multi {
			req.Images = func(pl v1.Platform) model.ImageFiles { return images(&pl) }
		} else if len(spec.Arch) == 1 && spec.Arch[0] != "" {
			// imageRef content of the platform built for.
			req.Render.Images = images(&v1.Platform{OS: "linux", Architecture: registry.NormalizeArch(spec.Arch[0])})
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

// images returns the constructor of imageRef readers: the Env's, or the
// pipeline's own within Inputs.ImageRefs (nil: imageRef files refused).
func (p *Pipeline) images(reg *registry.Options, env Env) func(*v1.Platform) model.ImageFiles {
	if env.Images != nil {
		return env.Images
	}
	lim := p.Spec.Inputs.ImageRefs
	if lim == nil {
		return nil
	}
	return func(pl *v1.Platform) model.ImageFiles {
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
		r := imageref.New(reg, opts...)
		p.readers = append(p.readers, r)
		return r
	}
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
	if o.MaxAddedBytes == 0 {
		o.MaxAddedBytes = DefaultMaxAddedBytes
	}
	o.Open = func(ctx context.Context, ref string, p *v1.Platform) (v1.Image, error) {
		img, _, err := reg.Image(ctx, ref, p)
		return img, err
	}
	return o
}

// DefaultMaxAddedBytes is the budget of added compressed bytes.
const DefaultMaxAddedBytes = 2 << 30

// signStages are the sign and attest stages (none without Signing); the
// key is decrypted here, before anything is built.
func signStages(spec Spec, reg *registry.Options, env Env) ([]assemble.Stage, error) {
	s := spec.Signing
	if s == nil {
		return nil, nil
	}
	if s.Key == nil {
		return nil, specErr(sign.StageSign, "signing.key", errors.New("no key"))
	}
	sv, err := env.Keys.Signer(s.Key, s.Password)
	if err != nil {
		return nil, specErr(sign.StageSign, "", fmt.Errorf("%s: %w", sign.StageSign, err))
	}
	opts := []sign.Option{sign.WithRegistry(reg), sign.WithReferrers(s.Referrers), sign.WithVersion(env.Version), sign.WithIdentity(s.Identity)}
	if env.Logger != nil {
		opts = append(opts, sign.WithLogger(env.Logger))
	}
	key := func(context.Context) (signature.SignerVerifier, error) { return sv, nil }
	return sign.Stages(key, append(opts, env.Sign...)...), nil
}

// ParseArch splits a comma-separated architecture list (as --arch and a
// fleet plan write it) and checks it: nil for "", ArchAll alone, no
// duplicates (x86_64 is amd64). The names stay as given: errors about
// the base quote them.
func ParseArch(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if _, err := assemble.ParseArches(s); err != nil {
		return nil, err
	}
	out := strings.Split(s, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out, nil
}

// Check validates the specification; each error names the field.
func (s Spec) Check() error {
	var errs []error
	add := func(step, field string, err error) { errs = append(errs, specErr(step, field, err)) }
	if s.Target == "" {
		add("push", "target", errors.New("no target: give REG/REPO[:TAG] or oci:DIR[:TAG]"))
	}
	if len(s.Arch) > 0 {
		if _, err := assemble.ParseArches(strings.Join(s.Arch, ",")); err != nil {
			add("config", "arch", errors.New(strings.TrimPrefix(err.Error(), "--arch ")))
		}
	}
	switch s.BaseIndex {
	case "", assemble.BaseIndexAuto, assemble.BaseIndexOff:
	default:
		add("config", "baseIndex", fmt.Errorf("%q: want %s or %s", s.BaseIndex, assemble.BaseIndexAuto, assemble.BaseIndexOff))
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
			errs = append(errs, specErr("preflight", fmt.Sprintf("preflight.skip[%d]", i), err))
		}
	}
	if pf.MaxAddedBytes < 0 {
		errs = append(errs, specErr("preflight", "preflight.maxAddedBytes", fmt.Errorf("%d: want a positive size", pf.MaxAddedBytes)))
	}
	warn, max := pf.WarnLayers, pf.MaxLayers
	if warn < 0 || max < 0 {
		errs = append(errs, specErr("preflight", "preflight.warnLayers", fmt.Errorf("%d, maxLayers %d: want positive layer counts", warn, max)))
	}
	if warn == 0 {
		warn = preflight.DefaultWarnLayers
	}
	if max == 0 {
		max = preflight.DefaultMaxLayers
	}
	if warn >= max {
		errs = append(errs, specErr("preflight", "preflight.warnLayers", fmt.Errorf("%d must be below maxLayers %d", warn, max)))
	}
	return errs
}
