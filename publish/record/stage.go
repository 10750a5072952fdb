package record

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
)

// StageName is the record stage's name (its result's key in a build
// result's stages).
const StageName = "record"

// Stage writes the build record of every image (and index) a build
// writes to a registry. The pipeline runs it first after the write, so
// the record exists before any tag (signature, attestation, the build's
// own) names the image: prune finds an image only through a tag or a
// reference, and then finds it dated. In an OCI layout, where prune dates
// an image by the time its manifest was written, it writes nothing.
type Stage struct {
	// Registry reaches the target.
	Registry *registry.Options
	// Version is the oslayer version recorded.
	Version string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Result is what the stage wrote, or found.
type Result struct {
	Tag    string    `json:"tag"`
	Digest string    `json:"digest"`
	Time   time.Time `json:"time"`
	// Existing is true when a record younger than Fresh was there:
	// nothing was written.
	Existing bool `json:"existing,omitempty"`
}

// Fresh is how old a record of the same image may be for a build to keep
// it rather than write its own: a build that runs again within it (an
// unchanged fleet or controller run) writes nothing. An older record is
// replaced: the image, published again (a revert to an older
// configuration gives an older image's digest), is new again for
// retention, and prune's --grace protects it until its tag moves.
const Fresh = 10 * time.Minute

// Name implements assemble.Stage.
func (*Stage) Name() string { return StageName }

// OnIndex implements assemble.OnIndex: the index a multi-platform build
// tags is dated too.
func (*Stage) OnIndex() bool { return true }

// Run writes the record of b, written as p, and sets p.Record (left nil
// when a fresh record of the image stands: it was signed when written).
func (s *Stage) Run(ctx context.Context, b *assemble.Built, p *assemble.Published) (any, error) {
	if p == nil {
		return nil, fmt.Errorf("%s: no published image", StageName)
	}
	if p.Digest == nil {
		return nil, nil
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	r := Record{Image: b.Digest, Time: now().UTC(), Builder: Builder, Version: s.Version,
		Pool: b.Pool, InputsDigest: b.InputsDigest}
	if b.Base.Digest.Hex != "" {
		r.BaseDigest = b.Base.Digest.String()
	}
	reg := s.Registry
	if reg == nil {
		reg = &registry.Options{}
	}
	if p.TagCurrent {
		// The target's tag names the image already (an unchanged
		// rebuild): nothing moves, the tag keeps it, nothing is written.
		return nil, nil
	}
	repo := p.Digest.Context()
	// A record stands only for an image that was there: one the publisher
	// wrote (not Found) was not, moments ago, so it is not looked for.
	if !p.Found {
		return s.write(ctx, reg, repo, r, b, p)
	}
	if old, od, err := Read(ctx, reg, repo, r.Image); err == nil && old != nil && r.Time.Sub(old.Time) < Fresh && r.Time.After(old.Time) {
		// Built again moments ago (an unchanged fleet run): the record
		// stands, nothing is written.
		return &Result{Tag: Tag(repo, r.Image).String(), Digest: od.String(), Time: old.Time, Existing: true}, nil
	}
	return s.write(ctx, reg, repo, r, b, p)
}

// write writes r and sets p.Record.
func (s *Stage) write(ctx context.Context, reg *registry.Options, repo name.Repository, r Record, b *assemble.Built, p *assemble.Published) (any, error) {
	desc, err := Write(ctx, reg, repo, r, configOf(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", StageName, err)
	}
	p.Record = &desc
	return &Result{Tag: Tag(repo, r.Image).String(), Digest: desc.Digest.String(), Time: r.Time}, nil
}

var (
	_ assemble.Stage   = (*Stage)(nil)
	_ assemble.OnIndex = (*Stage)(nil)
)

// configOf is the config descriptor of b's image (of an index's first
// platform image), a blob the repository holds once b is written; zero
// when it cannot be read.
func configOf(b *assemble.Built) v1.Descriptor {
	img := b.Image
	if img == nil && len(b.Platforms) > 0 {
		img = b.Platforms[0].Image
	}
	if img == nil {
		return v1.Descriptor{}
	}
	m, err := img.Manifest()
	if err != nil {
		return v1.Descriptor{}
	}
	return m.Config
}
