package publish

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
)

var _ assemble.Publisher = (*Publisher)(nil)

// indexManifest checks ix and returns its digest, media type and raw
// manifest.
func indexManifest(ix *assemble.Built, target string) (v1.Hash, []byte, error) {
	if ix == nil || ix.Index == nil {
		return v1.Hash{}, nil, fmt.Errorf("push %s: no index", target)
	}
	d, err := ix.Index.Digest()
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("push %s: index: %w", target, err)
	}
	if ix.Digest != (v1.Hash{}) && ix.Digest != d {
		return v1.Hash{}, nil, fmt.Errorf("push %s: index digest %s differs from the built digest %s", target, d, ix.Digest)
	}
	raw, err := ix.Index.RawManifest()
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("push %s: index: %w", target, err)
	}
	return d, raw, nil
}

// writeIndex is Write of a multi-platform build's index: it writes the
// index by digest. Every image it names must have been written by Write
// before (a registry refuses an index naming a manifest it lacks; a
// layout is checked here).
func (p *Publisher) writeIndex(ctx context.Context, ix *assemble.Built) (*assemble.Published, error) {
	d, raw, err := indexManifest(ix, p.target)
	if err != nil {
		return nil, err
	}
	if p.tag == nil {
		return p.writeLayoutIndex(ctx, ix, d, raw)
	}
	dref := p.tag.Context().Digest(d.String())
	s, err := p.connect(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("push %s: write index by digest %s: connect: %w", p.target, d, registry.ExplainRefused(err, dref.Context()))
	}
	pub := &assemble.Published{Ref: dref.String(), Digest: &dref}
	if desc, herr := remote.Head(dref, s.remoteOptions(ctx)...); herr == nil && desc.Digest == d {
		pub.Skipped, pub.Found = int64(len(raw)), true
	} else if herr != nil && !registry.IsStatus(herr, http.StatusNotFound, http.StatusForbidden) {
		return nil, fmt.Errorf("push %s: write index by digest %s: check manifest: %w", p.target, d, registry.ExplainRefused(herr, dref.Context()))
	} else {
		err := s.putManifest(ctx, dref, ix.Index, func(ctx context.Context, r name.Reference, m remote.Taggable) error {
			return remote.Put(r, m, s.remoteOptions(ctx)...)
		}, p.o.log)
		if err != nil {
			return nil, fmt.Errorf("push %s: write index by digest %s: put manifest: %w", p.target, d, registry.ExplainRefused(err, dref.Context()))
		}
		pub.Uploaded = int64(len(raw))
	}
	p.keep(pub, s)
	p.o.log.Info("index written by digest", "target", dref.String(), "platforms", len(ix.Platforms))
	return pub, nil
}

// commitIndex is Commit of an index: it moves the tag to the index
// writeIndex wrote (left alone when it already names it).
func (p *Publisher) commitIndex(ctx context.Context, ix *assemble.Built, pub *assemble.Published) error {
	d, raw, err := indexManifest(ix, p.target)
	if err != nil {
		return err
	}
	if pub == nil {
		return fmt.Errorf("push %s: commit without a written index", p.target)
	}
	if p.tag == nil {
		mt, err := ix.Index.MediaType()
		if err != nil {
			return fmt.Errorf("push %s: index: %w", p.target, err)
		}
		return (&layoutPublisher{p: p}).commit(ctx, pub, d, mt, raw)
	}
	return p.moveTag(ctx, pub, d, ix.Index)
}

// writeLayoutIndex writes the index manifest as a blob of the layout once
// every manifest it names is there.
func (p *Publisher) writeLayoutIndex(ctx context.Context, ix *assemble.Built, d v1.Hash, raw []byte) (*assemble.Published, error) {
	fail := func(step string, err error) (*assemble.Published, error) {
		return nil, fmt.Errorf("write OCI layout %s: %s: %w", p.dir, step, err)
	}
	im, err := ix.Index.IndexManifest()
	if err != nil {
		return fail("index", err)
	}
	for _, m := range im.Manifests {
		if h, _, err := fileDigest(blobPath(p.dir, m.Digest)); err != nil || h != m.Digest.Hex {
			return fail("index", fmt.Errorf("manifest %s (%s) is not in the layout (was Write called?)", m.Digest, m.Platform))
		}
	}
	rt, err := newRunTemp(p.dir, p.o.log)
	if err != nil {
		return fail("create temp dir", err)
	}
	defer rt.close()
	w := &layoutWriter{dir: p.dir, tmp: rt.dir, log: p.o.log}
	if err := w.write(ctx, blobSource{digest: d, size: int64(len(raw)), open: bytesOpener(raw), what: "index " + d.String()}); err != nil {
		return fail("write index", err)
	}
	return &assemble.Published{Ref: registry.LayoutPrefix + p.dir + "@" + d.String(), Uploaded: w.written, Skipped: w.skipped}, nil
}
