package publish

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/build"
	"github.com/oslayer/oslayer/internal/registry"
)

type remotePublisher struct{ p *Publisher }

// blobSizes maps every blob of img (layers and config) to its size.
func blobSizes(img v1.Image) (map[v1.Hash]int64, int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, 0, err
	}
	sizes := map[v1.Hash]int64{m.Config.Digest: m.Config.Size}
	total := m.Config.Size
	for _, l := range m.Layers {
		if _, dup := sizes[l.Digest]; !dup {
			total += l.Size
		}
		sizes[l.Digest] = l.Size
	}
	return sizes, total, nil
}

func checkDigest(b *build.Built) (v1.Hash, error) {
	d, err := b.Image.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if b.Digest != (v1.Hash{}) && b.Digest != d {
		return v1.Hash{}, fmt.Errorf("image digest %s differs from the built digest %s", d, b.Digest)
	}
	return d, nil
}

func (r *remotePublisher) Write(ctx context.Context, b *build.Built) (*build.Published, error) {
	p := r.p
	d, err := checkDigest(b)
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", p.target, err)
	}
	dref := p.tag.Context().Digest(d.String())
	fail := func(step string, err error) (*build.Published, error) {
		return nil, fmt.Errorf("push %s: write image by digest %s: %s: %w", p.target, dref.DigestStr(), step, registry.ExplainRefused(err, dref.Context()))
	}
	sizes, total, err := blobSizes(b.Image)
	if err != nil {
		return nil, fmt.Errorf("push %s: read manifest: %w", p.target, err)
	}
	raw, err := b.Image.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("push %s: read manifest: %w", p.target, err)
	}
	repo := dref.Context()
	log := p.o.log.With("target", dref.String())
	ctr := newCounter(dref.RegistryStr(), dref.RepositoryStr(), d, sizes, log)
	ctx = withCounter(ctx, ctr)
	prog := newProgress(p.o, "push "+repo.Name(), total+int64(len(raw)))
	prog.setMoved("uploaded", "already there or mounted", func() (int64, int64) {
		up, skipped, _, _, _ := ctr.stats()
		return up, skipped
	})
	finish := func(err error) {
		if prog != nil {
			close(prog.updates)
			<-prog.done
			if err == nil {
				prog.complete()
			}
			prog.finish(err)
		}
	}
	s, err := p.connect(ctx, p.mountHint(repo, b))
	if err != nil {
		finish(err)
		return fail("connect", err)
	}
	s.ctr = ctr
	exists := func(why string) (*build.Published, error) {
		prog.setMoved("uploaded", "already there", func() (int64, int64) { return 0, total })
		finish(nil)
		pub := &build.Published{Ref: dref.String(), Digest: &dref, Skipped: total}
		p.keep(pub, s)
		log.Info("image written by digest", "uploaded", 0, "skipped", total, "mounted", 0, "blobUploads", 0, "manifestExisted", true, "found", why)
		return pub, nil
	}

	// The sole writer of the tag looks at it first: a tag that names the
	// image says the image is there, and it stays where it is.
	if p.o.sole {
		desc, herr := remote.Head(*p.tag, s.remoteOptions(ctx)...)
		if herr != nil && !registry.IsStatus(herr, http.StatusNotFound, http.StatusForbidden) {
			finish(herr)
			return fail("check tag", herr)
		}
		s.tagLooked = true
		if herr == nil && desc.Digest == d {
			s.tagCurrent = true
			return exists("tag")
		}
		if herr == nil {
			s.prev = desc
		}
	}
	// An image already there by digest: send nothing more. The sole
	// writer of an image put by tag does not ask: its tag names another
	// image (or none), so the image is new but for a rare one under
	// another tag, whose blobs the checks below find and whose manifest is
	// put again, as the tag move of a pool sharing another's image puts
	// it. (The images of an index are put by digest and are asked for.)
	if !(s.tagLooked && p.o.byTag) {
		if desc, herr := remote.Head(dref, s.remoteOptions(ctx)...); herr == nil && desc.Digest == d {
			return exists("digest")
		} else if herr != nil && !registry.IsStatus(herr, http.StatusNotFound, http.StatusForbidden) {
			finish(herr)
			return fail("check manifest", herr)
		}
	}

	blobs, err := imageBlobs(b.Image)
	if err != nil {
		finish(err)
		return nil, fmt.Errorf("push %s: read layers: %w", p.target, err)
	}
	markOwn(blobs, b.Added)
	opts := s.remoteOptions(ctx)
	if prog != nil {
		opts = append(opts, remote.WithProgress(prog.updates))
	}
	pusher, err := remote.NewPusher(opts...)
	if err != nil {
		finish(err)
		return fail("upload blobs", err)
	}
	log.Info("writing image by digest", "blobs", len(sizes), "bytes", total)
	if err := s.writeBlobs(ctx, pusher, blobs, prog, log); err != nil {
		finish(err)
		return fail("upload blobs", err)
	}
	if p.o.byTag {
		// Commit puts the manifest, by tag.
		s.manifestPending = true
	} else if err := s.putManifest(ctx, dref, b.Image, func(ctx context.Context, r name.Reference, img remote.Taggable) error { return pusher.Put(ctx, r, img) }, log); err != nil {
		finish(err)
		return fail("put manifest", err)
	}
	finish(nil)
	up, skipped, mounted, puts, _ := ctr.stats()
	pub := &build.Published{Ref: dref.String(), Digest: &dref, Uploaded: up, Skipped: skipped, Mounted: mounted}
	p.keep(pub, s)
	log.Info("image written by digest", "uploaded", up, "skipped", skipped, "mounted", mounted, "blobUploads", puts, "manifestExisted", false, "manifestByTag", s.manifestPending)
	return pub, nil
}

func (r *remotePublisher) Commit(ctx context.Context, b *build.Built, pub *build.Published) error {
	d, err := checkDigest(b)
	if err != nil {
		return fmt.Errorf("push %s: %w", r.p.target, err)
	}
	return r.p.moveTag(ctx, pub, d, b.Image)
}

// moveTag moves the target's tag to the manifest m (an image or an index)
// with digest d, which Write published as pub.
func (p *Publisher) moveTag(ctx context.Context, pub *build.Published, d v1.Hash, m remote.Taggable) error {
	if pub.Digest == nil || pub.Digest.DigestStr() != d.String() || pub.Digest.Context().String() != p.tag.Context().String() {
		return fmt.Errorf("push %s: commit of %s, which this publisher did not write", p.target, pub.Ref)
	}
	s := p.take(pub)
	var err error
	if s == nil {
		if s, err = p.connect(ctx, nil); err != nil {
			return fmt.Errorf("push %s: move tag %s to %s: %w", p.target, p.tag.TagStr(), d, registry.ExplainRefused(err, p.tag.Context()))
		}
	}
	// A tag that already names the digest is left alone: an unchanged
	// rebuild sends nothing at all, and a tag another build just moved to
	// the same digest is not written again (every manifest PUT rewrites
	// links that readers of the tag read). This is checked even when Write
	// put the manifest (concurrent builds of the same inputs do), unless
	// the publisher is the tag's sole writer and Write looked at it.
	if s.manifestPending {
		// Write put the blobs only: one PUT by tag publishes the image.
		err = s.putManifest(ctx, *p.tag, m, func(ctx context.Context, r name.Reference, m remote.Taggable) error {
			return s.putTagged(ctx, *p.tag, m, d)
		}, p.o.log)
		if err != nil {
			return fmt.Errorf("push %s: put manifest %s by tag %s: %w", p.target, d, p.tag.TagStr(), registry.ExplainRefused(err, p.tag.Context()))
		}
		p.o.log.Info("image put by tag", "tag", p.tag.String(), "digest", d.String())
		return nil
	}
	if s.tagCurrent {
		p.o.log.Info("tag already current", "tag", p.tag.String(), "digest", d.String())
		return nil
	}
	if !(p.o.sole && s.tagLooked) {
		if desc, herr := remote.Head(*p.tag, s.remoteOptions(ctx)...); herr == nil && desc.Digest == d {
			p.o.log.Info("tag already current", "tag", p.tag.String(), "digest", d.String())
			return nil
		}
	}
	err = s.putManifest(ctx, *p.tag, m, func(ctx context.Context, r name.Reference, m remote.Taggable) error {
		return remote.Put(r, m, s.remoteOptions(ctx)...)
	}, p.o.log)
	if err != nil {
		return fmt.Errorf("push %s: move tag %s to %s: %w", p.target, p.tag.TagStr(), d, registry.ExplainRefused(err, p.tag.Context()))
	}
	p.o.log.Info("tag moved", "tag", p.tag.String(), "digest", d.String())
	return nil
}
