package build

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sources/model"
)

// ArchAll (--arch all) builds for every platform of the base's index.
const ArchAll = "all"

// BuiltIndex is a multi-platform pool image that has not been published
// yet: an OCI index of one Built image per platform, in the order built.
type BuiltIndex struct {
	Index  v1.ImageIndex
	Digest v1.Hash
	Pool   string
	// Platforms are the per-platform images, as written (Published)
	// before the index.
	Platforms []*Built
	Published []*Published
}

// IndexPublisher is a Publisher that also publishes an OCI index of images
// it wrote: WriteIndex writes the index by digest (every platform image
// is already there), CommitIndex moves the tag to it.
type IndexPublisher interface {
	Publisher
	WriteIndex(ctx context.Context, ix *BuiltIndex) (*Published, error)
	CommitIndex(ctx context.Context, ix *BuiltIndex, p *Published) error
}

// IndexStage is implemented by the stages that apply to the index too
// (its signature): BuildMulti runs them on the written index after every
// platform's stages succeeded and before the tag moves. Stages that do
// not implement it run per platform only.
type IndexStage interface {
	Stage
	RunIndex(ctx context.Context, ix *BuiltIndex, p *Published) (any, error)
}

// MultiRequest is a build for several platforms of one base.
type MultiRequest struct {
	// Request is the build of each platform; its Arch is ignored and
	// BaseImage must be nil (each platform has its own base manifest: see
	// Bases).
	Request
	// Arches are the architectures to build for, or one ArchAll (every
	// platform of the base's index, which needs Base).
	Arches []string
	// Images returns the reader of imageRef files for a platform: each
	// platform's content comes from that platform's image. Nil keeps
	// Render.Images for every platform.
	Images func(v1.Platform) model.ImageFiles
	// Bases returns a platform's resolved base (with its index, when
	// indexed): a caller building many pools on one base (a fleet run)
	// resolves each platform's base once for all of them. Nil resolves
	// it for this build.
	Bases func(context.Context, v1.Platform) (*Base, error)
	// Resolved, when set, are the platforms to build, in index order:
	// the caller resolved Arches already (ArchAll reads the base's index
	// once for every build on it). Nil resolves them (Platforms).
	Resolved []v1.Platform
	// Renderers returns the renderer of a platform: a caller that
	// rendered each platform already (onto that platform's base, with its
	// imageRef content) hands its result over. Nil, or a nil Renderer,
	// keeps Request.Renderer.
	Renderers func(v1.Platform) Renderer
}

// MultiResult is what a multi-platform build produced.
type MultiResult struct {
	Pool string `json:"pool"`
	// Image is the digested reference of the pool's OCI index.
	Image  string  `json:"image,omitempty"`
	Digest v1.Hash `json:"digest,omitzero"`
	Target string  `json:"target,omitempty"`
	// Platforms are the builds of each platform, in index order.
	Platforms []*Result `json:"platforms"`
	// Stages holds each index stage's output by stage name.
	Stages map[string]any `json:"stages,omitempty"`
	Phases []Phase        `json:"phases"`
	// Tagged is true once the tag moved to the index.
	Tagged bool   `json:"tagged"`
	Error  string `json:"error,omitempty"`

	// The index and where it was written, for TagIndex.
	index     *BuiltIndex
	published *Published
}

// ParseArches splits a --arch value: "" and one architecture give one
// entry (a single-platform build), "a,b" several, "all" ArchAll. Names are
// normalized (x86_64 → amd64); duplicates and empty entries are errors.
func ParseArches(s string) ([]string, error) {
	if s == "" {
		return []string{""}, nil
	}
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = registry.NormalizeArch(strings.TrimSpace(a))
		switch {
		case a == "":
			return nil, fmt.Errorf("--arch %q: empty architecture", s)
		case a == ArchAll && strings.Contains(s, ","):
			return nil, fmt.Errorf("--arch %q: %q stands alone", s, ArchAll)
		case slices.Contains(out, a):
			return nil, fmt.Errorf("--arch %q: %s given twice", s, a)
		}
		out = append(out, a)
	}
	return out, nil
}

// Platforms resolves the request's architectures to platforms: ArchAll
// reads the base's index.
func (r MultiRequest) Platforms(ctx context.Context) ([]v1.Platform, error) {
	if r.Resolved != nil {
		if len(r.Resolved) == 0 {
			return nil, errors.New("no platform to build for")
		}
		return r.Resolved, nil
	}
	if len(r.Arches) == 1 && r.Arches[0] == ArchAll {
		if r.Base == "" {
			return nil, fmt.Errorf("--arch %s: give --base (the platforms are those of the base's index)", ArchAll)
		}
		reg := r.Registry
		if reg == nil {
			reg = &registry.Options{}
		}
		ps, err := reg.Platforms(ctx, r.Base)
		if err != nil {
			return nil, fmt.Errorf("base %s: --arch %s: %w", r.Base, ArchAll, err)
		}
		return ps, nil
	}
	if len(r.Arches) == 0 {
		return nil, errors.New("no architecture to build for")
	}
	var ps []v1.Platform
	for _, a := range r.Arches {
		if a == ArchAll {
			return nil, fmt.Errorf("--arch %s stands alone", ArchAll)
		}
		p := registry.DefaultPlatform
		if a != "" {
			p.Architecture = registry.NormalizeArch(a)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// BuildMulti builds the pool once per platform (Build on that platform's
// base manifest, with the platform's imageRef content, running every
// stage: preflight, signature and attestation of each platform image),
// then writes one OCI index of the platform images, runs the IndexStages
// on it (its signature) and only then moves the tag to the index. Any
// failure stops before the tag moves: nothing is tagged unless every
// platform succeeded. The same inputs give the same index digest.
func BuildMulti(ctx context.Context, req MultiRequest, pub IndexPublisher, stages ...Stage) (*MultiResult, error) {
	res := &MultiResult{Pool: req.Render.Pool, Platforms: []*Result{}}
	if t, ok := pub.(Targeter); ok {
		res.Target = t.Target()
	}
	err := buildMulti(ctx, req, pub, stages, res)
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

func buildMulti(ctx context.Context, req MultiRequest, pub IndexPublisher, stages []Stage, res *MultiResult) error {
	log := req.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if pub == nil {
		return errors.New("build: no publisher (give a push target or an output layout)")
	}
	if req.BaseImage != nil {
		return errors.New("build: a multi-platform build resolves each platform's base itself or through Bases (BaseImage must be nil)")
	}
	platforms, err := req.Platforms(ctx)
	if err != nil {
		return err
	}
	var built []*Built
	var written []*Published
	for _, p := range platforms {
		preq := req.Request
		preq.Arch = p.Architecture
		if req.Images != nil {
			preq.Render.Images = req.Images(p)
		}
		if req.Renderers != nil {
			if rd := req.Renderers(p); rd != nil {
				preq.Renderer = rd
			}
		}
		preq.Logger = log.With("platform", p.String())
		if req.Bases != nil {
			b, err := req.Bases(ctx, p)
			if err != nil {
				res.Platforms = append(res.Platforms, &Result{Pool: req.Render.Pool, Platform: p.String(), Layers: []AddedLayer{},
					Phases: []Phase{{Name: "base"}}, Error: err.Error()})
				return fmt.Errorf("platform %s: %w", p.String(), err)
			}
			preq.BaseImage = b
		}
		// Each platform image records its own architecture, as a
		// single-platform build of it does: the two are the same image.
		preq.Flags = maps.Clone(req.Flags)
		if preq.Flags != nil {
			preq.Flags["arch"] = p.Architecture
		}
		r, err := build(ctx, preq, pub, stages, false)
		r.Platform = p.String()
		res.Platforms = append(res.Platforms, r)
		if err != nil {
			r.Error = err.Error()
			return fmt.Errorf("platform %s: %w", p.String(), err)
		}
		built = append(built, r.built)
		written = append(written, r.published)
	}
	phase := func(name string, f func() error) error {
		err := TimePhase(&res.Phases, name, f)
		if err != nil && !strings.HasPrefix(err.Error(), name+": ") {
			return fmt.Errorf("%s: %w", name, err)
		}
		return err
	}
	var ix *BuiltIndex
	if err := phase("index", func() (err error) {
		ix, err = NewIndex(res.Pool, built, platforms)
		return err
	}); err != nil {
		return err
	}
	ix.Published = written
	res.Digest = ix.Digest
	var ip *Published
	if err := phase("push-index", func() (err error) {
		ip, err = pub.WriteIndex(ctx, ix)
		if err == nil && ip == nil {
			err = errors.New("publisher returned nothing")
		}
		return err
	}); err != nil {
		return err
	}
	res.Image = ip.Ref
	for _, s := range stages {
		is, ok := s.(IndexStage)
		if !ok || IsPreWrite(s) {
			continue
		}
		if err := runStage(phase, &res.Stages, s.Name(), func() (any, error) { return is.RunIndex(ctx, ix, ip) }); err != nil {
			return err
		}
	}
	if err := phase("tag", func() error { return pub.CommitIndex(ctx, ix, ip) }); err != nil {
		return err
	}
	res.Tagged = true
	res.index, res.published = ix, ip
	for _, r := range res.Platforms {
		base := r.built.Base
		r.publishIndex(ctx, &base, r.indexOpts, phase, log)
	}
	log.Info("built", "pool", res.Pool, "image", res.Image, "platforms", len(platforms))
	return nil
}

// TagIndex moves pub's tag to the index that built (a BuildMulti that
// succeeded) wrote and tagged: another pool whose image is the same (same
// repository, content and options) gets it without anything being built,
// written or signed again. The result is built's index and platform images
// (their stage outputs, such as the signature tags, included) with pub's
// target, nothing uploaded, and the one phase "tag".
func TagIndex(ctx context.Context, built *MultiResult, pub IndexPublisher) (*MultiResult, error) {
	if built == nil || !built.Tagged || built.index == nil || built.published == nil {
		return nil, errors.New("tag: no index built and tagged to move the tag to")
	}
	res := &MultiResult{Pool: built.Pool, Image: built.Image, Digest: built.Digest, Stages: built.Stages,
		Platforms: make([]*Result, len(built.Platforms)), index: built.index, published: built.published}
	res.Target = target(pub)
	for i, p := range built.Platforms {
		res.Platforms[i] = p.movedTo(res.Target)
	}
	err := TimePhase(&res.Phases, "tag", func() error { return pub.CommitIndex(ctx, built.index, built.published) })
	if err != nil {
		err = fmt.Errorf("tag: %w", err)
		res.Error = err.Error()
		return res, err
	}
	res.Tagged = true
	return res, nil
}

// NewIndex returns the OCI index of the platform images (in the order
// given), each described with its platform (OS, architecture and variant
// from its config).
func NewIndex(pool string, built []*Built, platforms []v1.Platform) (*BuiltIndex, error) {
	if len(built) == 0 || len(built) != len(platforms) {
		return nil, fmt.Errorf("pool %s: %d images for %d platforms", pool, len(built), len(platforms))
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for i, b := range built {
		mt, err := b.Image.MediaType()
		if err != nil {
			return nil, err
		}
		raw, err := b.Image.RawManifest()
		if err != nil {
			return nil, err
		}
		cf, err := b.Image.ConfigFile()
		if err != nil {
			return nil, err
		}
		plat := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant, OSVersion: cf.OSVersion}
		if plat.OS == "" || plat.Architecture == "" {
			plat = platforms[i]
		}
		adds = append(adds, mutate.IndexAddendum{Add: plainImage{b.Image}, Descriptor: v1.Descriptor{
			MediaType: mt, Digest: b.Digest, Size: int64(len(raw)), Platform: &plat,
		}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	return &BuiltIndex{Index: idx, Digest: d, Pool: pool, Platforms: built}, nil
}

// plainImage describes an image in an index without the artifactType
// go-containerregistry would add (its config media type): the entries
// of a pool index are plain images, as in any multi-platform image.
type plainImage struct{ v1.Image }

func (plainImage) ArtifactType() (string, error) { return "", nil }
