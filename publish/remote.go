package publish

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
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

func checkDigest(b *assemble.Built) (v1.Hash, error) {
	d, err := b.Image.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if b.Digest != (v1.Hash{}) && b.Digest != d {
		return v1.Hash{}, fmt.Errorf("image digest %s differs from the built digest %s", d, b.Digest)
	}
	return d, nil
}

// remoteWrite is the state of one image's write by digest to a
// registry: what it writes, the counter of its transfers, its progress
// and its session.
type remoteWrite struct {
	p     *Publisher
	b     *assemble.Built
	d     v1.Hash
	dref  name.Digest
	sizes map[v1.Hash]int64
	total int64
	raw   []byte
	log   *slog.Logger
	ctr   *counter
	prog  *progress
	s     *session
	// proven: the registry answered the manifest's PUT with its digest.
	proven bool
	// started is what Start began for this Write (nil: nothing).
	started *started
}

// Write writes b's blobs and manifest by digest (the manifest by tag,
// in Commit, for a publisher that puts by tag), unless the image is
// there already.
func (r *remotePublisher) Write(ctx context.Context, b *assemble.Built) (*assemble.Published, error) {
	w, err := r.p.newRemoteWrite(b)
	if err != nil {
		return nil, err
	}
	ctx = withCounter(ctx, w.ctr)
	found, err := w.write(ctx)
	if found != "" {
		w.prog.setMoved("uploaded", "already there", func() (int64, int64) { return 0, w.total })
	}
	w.finish(err)
	if err != nil {
		return nil, err
	}
	return w.published(found), nil
}

// newRemoteWrite checks b's digest, reads its blob sizes and manifest and
// sets up the counter and the progress.
func (p *Publisher) newRemoteWrite(b *assemble.Built) (*remoteWrite, error) {
	d, err := checkDigest(b)
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", p.target, err)
	}
	w := &remoteWrite{p: p, b: b, d: d, dref: p.tag.Context().Digest(d.String())}
	if w.sizes, w.total, err = blobSizes(b.Image); err != nil {
		return nil, fmt.Errorf("push %s: read manifest: %w", p.target, err)
	}
	if w.raw, err = b.Image.RawManifest(); err != nil {
		return nil, fmt.Errorf("push %s: read manifest: %w", p.target, err)
	}
	w.log = p.o.log.With("target", w.dref.String())
	w.ctr = newCounter(w.dref.RegistryStr(), w.dref.RepositoryStr(), d, w.sizes, w.log)
	w.prog = newProgress(p.o, "push "+w.dref.Context().Name(), w.total+int64(len(w.raw)))
	w.prog.setMoved("uploaded", "already there or mounted", func() (int64, int64) {
		up, skipped, _, _, _ := w.ctr.stats()
		return up, skipped
	})
	return w, nil
}

// fail is the error of step.
func (w *remoteWrite) fail(step string, err error) error {
	return fmt.Errorf("push %s: write image by digest %s: %s: %w", w.p.target, w.dref.DigestStr(), step, registry.ExplainRefused(err, w.dref.Context()))
}

// finish ends the progress (complete when err is nil).
func (w *remoteWrite) finish(err error) {
	if w.prog == nil {
		return
	}
	close(w.prog.updates)
	<-w.prog.done
	if err == nil {
		w.prog.complete()
	}
	w.prog.finish(err)
}

// write connects, looks whether the image is there ("tag" or "digest":
// found, nothing more sent) and otherwise uploads it.
func (w *remoteWrite) write(ctx context.Context) (found string, err error) {
	pulls := w.p.mountHint(w.dref.Context(), w.b)
	var s *session
	if w.started = w.p.takeStarted(pulls); w.started != nil {
		s, err = w.started.s, w.started.err
	} else {
		s, err = w.p.connect(ctx, pulls)
	}
	if err != nil {
		return "", w.fail("connect", err)
	}
	s.ctr, w.s = w.ctr, s
	for _, look := range []func(context.Context) (string, error){w.lookAtTag, w.lookByDigest} {
		if found, err := look(ctx); found != "" || err != nil {
			return found, err
		}
	}
	return "", w.upload(ctx)
}

// lookAtTag: Write looks at the tag first: a tag that names the image
// says the image is there, and it stays where it is (an unchanged rebuild
// costs this one request after the ping); a tag that names another image
// proves that image's blobs (learn).
func (w *remoteWrite) lookAtTag(ctx context.Context) (string, error) {
	p, s := w.p, w.s
	var desc *v1.Descriptor
	var herr error
	if st := w.started; st != nil {
		desc, herr = st.tag, st.tagErr
	} else {
		desc, herr = remote.Head(*p.tag, s.remoteOptions(ctx)...)
	}
	if herr != nil && !registry.IsStatus(herr, http.StatusNotFound, http.StatusForbidden) {
		return "", w.fail("check tag", herr)
	}
	s.tagLooked = true
	if herr == nil && desc.Digest == w.d {
		s.tagCurrent = true
		return "tag", nil
	}
	if herr == nil {
		s.prev = desc
	}
	return "", nil
}

// lookByDigest: an image already there by digest (written before, its tag
// not moved yet): send nothing more. The sole writer of an image put by
// tag does not ask: its tag names another image (or none), so the image
// is new but for a rare one under another tag, whose blobs the checks of
// the upload find and whose manifest is put again, as the tag move of a
// pool sharing another's image puts it. (The images of an index are put
// by digest and are asked for.)
func (w *remoteWrite) lookByDigest(ctx context.Context) (string, error) {
	if w.s.tagLooked && w.p.o.byTag {
		return "", nil
	}
	desc, herr := remote.Head(w.dref, w.s.remoteOptions(ctx)...)
	if herr == nil && desc.Digest == w.d {
		return "digest", nil
	}
	if herr != nil && !registry.IsStatus(herr, http.StatusNotFound, http.StatusForbidden) {
		return "", w.fail("check manifest", herr)
	}
	return "", nil
}

// upload uploads the blobs the target lacks and puts the manifest by
// digest (or leaves it to Commit, by tag).
func (w *remoteWrite) upload(ctx context.Context) error {
	p, s := w.p, w.s
	blobs, err := imageBlobs(w.b.Image)
	if err != nil {
		return fmt.Errorf("push %s: read layers: %w", p.target, err)
	}
	markOwn(blobs, w.b.Added)
	w.log.Info("writing image by digest", "blobs", len(w.sizes), "bytes", w.total)
	if err := s.writeBlobs(ctx, blobs, w.prog, w.log); err != nil {
		return w.fail("upload blobs", err)
	}
	if p.o.byTag {
		// Commit puts the manifest, by tag.
		s.manifestPending = true
		return nil
	}
	looked := s.lookAgain(ctx, p.o.sole)
	err = s.putManifest(ctx, w.dref, w.b.Image, w.putByDigest, w.log)
	looked()
	if err != nil {
		return w.fail("put manifest", err)
	}
	w.prog.add(int64(len(w.raw)))
	return nil
}

// putByDigest puts the manifest by its digest in one request. The digest
// the registry answers proves the write (Published.Proven): a registry
// keeps a manifest under a digest only with those bytes, and only with
// every blob it names in the repository. An answer naming another digest
// is an error; none proves nothing (a stage that reads the image back
// then does).
func (w *remoteWrite) putByDigest(ctx context.Context, _ name.Reference, m remote.Taggable) error {
	got, err := w.s.putAt(ctx, w.d.String(), m)
	if err != nil {
		return err
	}
	if got != "" && got != w.d.String() {
		return fmt.Errorf("the registry answered digest %s", got)
	}
	w.proven = got != ""
	return nil
}

// published is where the image was written, kept with its session for
// Commit; found says why nothing was sent ("": it was uploaded).
func (w *remoteWrite) published(found string) *assemble.Published {
	dref := w.dref
	if found != "" {
		pub := &assemble.Published{Ref: dref.String(), Digest: &dref, Skipped: w.total, TagCurrent: w.s.tagCurrent, Found: true}
		w.p.keep(pub, w.s)
		w.log.Info("image written by digest", "uploaded", 0, "skipped", w.total, "mounted", 0, "blobUploads", 0, "manifestExisted", true, "found", found)
		return pub
	}
	up, skipped, mounted, puts, _ := w.ctr.stats()
	pub := &assemble.Published{Ref: dref.String(), Digest: &dref, Uploaded: up, Skipped: skipped, Mounted: mounted, Proven: w.proven}
	w.p.keep(pub, w.s)
	w.log.Info("image written by digest", "uploaded", up, "skipped", skipped, "mounted", mounted, "blobUploads", puts, "manifestExisted", false, "manifestByTag", w.s.manifestPending)
	return pub
}

func (r *remotePublisher) Commit(ctx context.Context, b *assemble.Built, pub *assemble.Published) error {
	d, err := checkDigest(b)
	if err != nil {
		return fmt.Errorf("push %s: %w", r.p.target, err)
	}
	return r.p.moveTag(ctx, pub, d, b.Image)
}

// moveTag moves the target's tag to the manifest m (an image or an index)
// with digest d, which Write published as pub.
func (p *Publisher) moveTag(ctx context.Context, pub *assemble.Published, d v1.Hash, m remote.Taggable) error {
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
	if !(p.o.sole && s.tagLooked) && s.tagAgain(ctx) == d {
		p.o.log.Info("tag already current", "tag", p.tag.String(), "digest", d.String())
		return nil
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
