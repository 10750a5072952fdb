package record

import (
	"context"
	"fmt"
	"time"

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

// Result is what the stage wrote.
type Result struct {
	Tag    string    `json:"tag"`
	Digest string    `json:"digest"`
	Time   time.Time `json:"time"`
}

// Name implements assemble.Stage.
func (*Stage) Name() string { return StageName }

// OnIndex implements assemble.OnIndex: the index a multi-platform build
// tags is dated too.
func (*Stage) OnIndex() bool { return true }

// Run writes the record of b, written as p, and sets p.Record.
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
	repo := p.Digest.Context()
	desc, err := Write(ctx, reg, repo, r)
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
