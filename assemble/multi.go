package assemble

import (
	"context"
	"errors"
	"fmt"
	"maps"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platforms resolves the request's platforms (Platforms.Resolve: ArchAll
// reads the base's index). Prepared inputs name their platforms.
func (r Request) Platforms(ctx context.Context) ([]v1.Platform, error) {
	if r.Prepared != nil {
		ps := make([]v1.Platform, len(r.Prepared))
		for i, in := range r.Prepared {
			ps[i] = in.Platform
		}
		return ps, nil
	}
	return r.Arch.Resolve(ctx, r.Base, r.Registry)
}

// buildIndex builds the pool once per platform (build on that platform's
// base manifest, with the platform's imageRef content, running every
// stage: preflight, signature and attestation of each platform image),
// then writes one OCI index of the platform images with the same
// publisher, runs the OnIndex stages on it (its signature) and only then
// moves the tag to the index. Any
// failure stops before the tag moves: nothing is tagged unless every
// platform succeeded. The same inputs give the same index digest.
func buildIndex(ctx context.Context, req Request, pub Publisher, stages []Stage) (*Result, error) {
	res := &Result{Pool: req.Render.Pool, Platforms: []*Result{}, Target: target(pub)}
	switch {
	case pub == nil:
		return res, errors.New("build: no publisher (give a push target or an output layout)")
	case req.Prepared != nil && len(req.Prepared) == 0:
		return res, errors.New("no platform to build for")
	}
	platforms, err := req.Platforms(ctx)
	if err != nil {
		return res, err
	}
	for i, p := range platforms {
		if err := res.buildPlatform(ctx, req, i, p, pub, stages); err != nil {
			return res, err
		}
	}
	if err := res.publishIndex(ctx, pub, platforms, stages); err != nil {
		return res, err
	}
	for _, r := range res.Platforms {
		r.pushBaseIndex(ctx, &r.built.Base, r.indexOpts, res.phase(req.Logger))
	}
	logger(req.Logger).Info("built", "pool", res.Pool, "image", res.Image, "platforms", len(platforms))
	return res, nil
}

// platformRequest is req for platform p alone, the i-th of the index.
func platformRequest(req Request, i int, p v1.Platform) Request {
	preq := req
	preq.Arch, preq.Prepared = OnePlatform(p.Architecture), nil
	if req.Prepared != nil {
		preq.Prepared = req.Prepared[i : i+1]
	} else if pi, ok := req.Render.Images.(PlatformImages); ok {
		preq.Render.Images = pi.ForPlatform(p)
	}
	preq.Logger = logger(req.Logger).With("platform", p.String())
	// Each platform image records its own architecture, as a
	// single-platform build of it does: the two are the same image.
	preq.Flags = maps.Clone(req.Flags)
	if preq.Flags != nil {
		preq.Flags["arch"] = p.Architecture
	}
	return preq
}

// buildPlatform builds platform p's image (the i-th of the index),
// written by digest and through its stages but not tagged, into
// res.Platforms.
func (res *Result) buildPlatform(ctx context.Context, req Request, i int, p v1.Platform, pub Publisher, stages []Stage) error {
	preq := platformRequest(req, i, p)
	r, err := build(ctx, preq, pub, stages, false)
	r.Platform = p.String()
	res.Platforms = append(res.Platforms, r)
	if err != nil {
		r.Error = err.Error()
		return fmt.Errorf("platform %s: %w", p.String(), err)
	}
	return nil
}

// publishIndex writes the index of the platform images by digest, runs
// the index stages on it and moves the tag.
func (res *Result) publishIndex(ctx context.Context, pub Publisher, platforms []v1.Platform, stages []Stage) error {
	phase := res.phase(nil)
	built := make([]*Built, len(res.Platforms))
	for i, r := range res.Platforms {
		built[i] = r.built
	}
	var ix *Built
	if err := phase("index", func() (err error) {
		ix, err = NewIndex(res.Pool, built, platforms)
		return err
	}); err != nil {
		return err
	}
	res.Digest = ix.Digest
	var ip *Published
	if err := phase("push-index", func() (err error) {
		ip, err = pub.Write(ctx, ix)
		if err == nil && ip == nil {
			err = errors.New("publisher returned nothing")
		}
		return err
	}); err != nil {
		return err
	}
	res.Image = ip.Ref
	for _, s := range stages {
		if s == nil || !RunsOnIndex(s) {
			continue
		}
		if err := runStage(phase, &res.Stages, s.Name(), func() (any, error) { return s.Run(ctx, ix, ip) }); err != nil {
			return err
		}
	}
	if err := phase("tag", func() error { return pub.Commit(ctx, ix, ip) }); err != nil {
		return err
	}
	res.Tagged = true
	res.built, res.published = ix, ip
	return nil
}

// NewIndex returns what a multi-platform build publishes: the OCI index
// of the platform images (in the order given), each described with its
// platform (OS, architecture and variant from its config).
func NewIndex(pool string, built []*Built, platforms []v1.Platform) (*Built, error) {
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
	return &Built{Index: idx, Digest: d, Pool: pool, Platforms: built}, nil
}

// plainImage describes an image in an index without the artifactType
// go-containerregistry would add (its config media type): the entries
// of a pool index are plain images, as in any multi-platform image.
type plainImage struct{ v1.Image }

func (plainImage) ArtifactType() (string, error) { return "", nil }
