package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// The requests a Write sends for blobs follow from what is known, not from
// asking about each blob (a round trip each, which across a WAN is the
// whole cost of a build on a base of hundreds of layers):
//
//   - a blob proven by a manifest in the target repository is not checked:
//     a base read from the target repository itself (the registry served
//     its manifest from there, and a registry refuses a manifest whose
//     blobs the repository lacks), the image the target's tag names
//     (learn);
//   - in a repository with no tag (a new one), nothing is checked: base
//     layers of another repository of the registry are mounted, every
//     other blob uploaded;
//   - mounts, checks and uploads go many at a time (registry.Options
//     Requests bounds them, Jobs the uploads of blobs larger than
//     smallBlob);
//   - a registry that answers a mount with an upload session (202:
//     cross-repository mounting off) is told apart at the first such
//     answer: one warning, that upload session is used, and no blob is
//     mounted there again;
//   - a base in another registry is never mounted (a mount only comes from
//     the same registry): its layers are uploaded;
//   - every upload is a POST and one PUT with the whole blob (distribution
//     2.8 and 3 take no blob in the POST itself).

// smallBlob is the size up to which a blob of the image's own (its config,
// the layers the build added) is uploaded without a check first: it is
// new but for rare ones, and its upload costs about the round trip a
// check would.
const smallBlob = 1 << 20

// mountState is what a session learnt about mounting at its registry;
// the copies of a shared session share it.
type mountState struct {
	// refused is set once the registry answered a mount with an upload.
	refused atomic.Bool
}

// blobWrite is one Write's blob writing: the blobs' bounds and whether the
// repository is new.
type blobWrite struct {
	s     *session
	prog  *progress
	log   *slog.Logger
	fresh bool
	// mountBytes is what the base layers to mount weigh (the cost of
	// uploading them instead).
	mountBytes int64
	// mounted is what was mounted so far.
	mounted   atomic.Int64
	reqs, ups chan struct{}
}

// writeBlobs writes every blob: at most s.reqJobs requests at once, at
// most s.jobs of them uploads. The first failure cancels the others and
// is returned.
func (s *session) writeBlobs(ctx context.Context, blobs []blob, prog *progress, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &blobWrite{s: s, prog: prog, log: log, reqs: make(chan struct{}, s.reqJobs), ups: make(chan struct{}, s.jobs)}
	w.fresh = s.prepare(ctx, blobs, log)
	for _, b := range blobs {
		if _, _, ok := mountFrom(s.repo, b); ok && !s.known.has(s.repo, b.digest.String()) {
			w.mountBytes += b.size
		}
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	// The first mount goes alone: it tells a registry that does not mount
	// (one refusal, not one per request under way) and gets the token
	// scope a token registry wants for mounting before the others ask.
	alone := firstMount(s, blobs)
	if alone >= 0 {
		if err := w.write(ctx, blobs[alone]); err != nil {
			return err
		}
	}
	for i, b := range blobs {
		if i == alone {
			continue
		}
		select {
		case w.reqs <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-w.reqs }()
			if s.runSlots != nil {
				select {
				case s.runSlots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-s.runSlots }()
			}
			if err := w.write(ctx, b); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// firstMount is the index of the first blob to mount, or -1.
func firstMount(s *session, blobs []blob) int {
	for i, b := range blobs {
		if _, _, ok := mountFrom(s.repo, b); ok && !s.known.has(s.repo, b.digest.String()) {
			return i
		}
	}
	return -1
}

// prepare marks the blobs proven to be in the target and reports whether
// the repository is new (nothing in it needs a check). It asks the
// registry only when a base layer is not known yet: the image the tag
// names (learn), or whether the repository has a tag at all.
func (s *session) prepare(ctx context.Context, blobs []blob, log *slog.Logger) bool {
	pending := false
	for _, b := range blobs {
		if proven(s.repo, b) {
			s.knowBlob(b.digest)
		}
		if !b.own && !s.known.has(s.repo, b.digest.String()) {
			pending = true
		}
	}
	if !pending {
		return false
	}
	if s.prev == nil && s.untagged(ctx, log) {
		return true
	}
	if s.prev == nil && !s.tagLooked && s.tag != nil {
		// A repository with tags: the image this tag names, if any,
		// proves its blobs (one HEAD, then one GET).
		if desc, err := remote.Head(*s.tag, s.remoteOptions(ctx)...); err == nil {
			s.prev = desc
		}
	}
	if s.prev != nil {
		s.learn(ctx, blobs, log)
	}
	return false
}

// proven reports whether b is a layer of an image read from repo itself:
// the registry served that image's manifest from repo, so repo has b.
func proven(repo name.Repository, b blob) bool {
	ml, ok := b.layer.(*remote.MountableLayer)
	if !ok || ml.Reference == nil {
		return false
	}
	src := ml.Reference.Context()
	return src.RegistryStr() == repo.RegistryStr() && src.RepositoryStr() == repo.RepositoryStr()
}

// knowBlob records d as in the target repository (in this Write's own set
// when the publisher shares none).
func (s *session) knowBlob(d v1.Hash) {
	if s.known == nil {
		s.known = &KnownBlobs{}
	}
	s.known.add(s.repo, d.String())
}

// write writes one blob: skipped when known, mounted when it is a layer of
// another repository of the registry (unless the registry refused a
// mount), otherwise uploaded; checked first only in a repository that is
// not new (and not when it is small and the image's own).
func (w *blobWrite) write(ctx context.Context, b blob) error {
	s := w.s
	if s.known.has(s.repo, b.digest.String()) {
		if s.ctr != nil {
			s.ctr.skip(b.digest)
		}
		w.prog.add(b.size)
		return nil
	}
	_, src, mountable := mountFrom(s.repo, b)
	if !w.fresh && (mountable || !b.own || b.size > smallBlob) {
		// Never mount what the repository already has: a mount rewrites
		// the blob's link in the repository, and registries that store
		// links as files (distribution's filesystem driver) serve errors
		// to readers and to concurrent manifest PUTs while it is rewritten.
		has, err := s.has(ctx, b.digest)
		if err != nil {
			return fmt.Errorf("check %s %s: %w", b.what, b.digest, err)
		}
		if has {
			s.knowBlob(b.digest)
			w.prog.add(b.size)
			return nil
		}
	}
	loc := ""
	if mountable && !s.mounts.refused.Load() {
		mounted, l, err := s.mount(ctx, b.digest, src, w.mountBytes-w.mounted.Load(), w.log)
		if err != nil {
			return fmt.Errorf("mount %s %s from %s: %w", b.what, b.digest, src.RepositoryStr(), err)
		}
		if mounted {
			s.knowBlob(b.digest)
			w.mounted.Add(b.size)
			w.prog.add(b.size)
			return nil
		}
		loc = l
	}
	return w.upload(ctx, b, loc)
}

// upload uploads b (POST, unless loc is an upload session a refused mount
// opened, then one PUT), at most s.jobs blobs larger than smallBlob at
// once, retried as a whole.
func (w *blobWrite) upload(ctx context.Context, b blob, loc string) error {
	if b.size > smallBlob {
		// A small blob's upload is a request more than a transfer: only
		// the request bound holds it.
		select {
		case w.ups <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-w.ups }()
	}
	if err := w.s.uploadRetried(ctx, b, loc); err != nil {
		return fmt.Errorf("upload %s %s: %w", b.what, b.digest, err)
	}
	w.s.knowBlob(b.digest)
	w.prog.add(b.size)
	return nil
}

// uploadRetried uploads b, again from a new upload session when the
// registry lost the one the PUT went to (the session's transport retries
// each request on the failures worth it, registry.Options.Retry; this
// bounds the whole uploads the same way).
func (s *session) uploadRetried(ctx context.Context, b blob, loc string) error {
	bo := s.retry.Backoff()
	wait := bo.Duration
	for attempt := 1; ; attempt++ {
		err := s.putBlob(ctx, b, loc)
		if err == nil || attempt >= max(bo.Steps, 1) || ctx.Err() != nil || !uploadLost(err) {
			return err
		}
		loc = ""
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = time.Duration(float64(wait) * max(bo.Factor, 1))
	}
}

// uploadLost reports whether err says the registry no longer knows the
// upload session or no longer takes it: a PUT the transport sent again
// after the first one's connection broke, when the first had reached the
// registry (which then completed, dropped or half-wrote the session). A
// new session is worth a try.
func uploadLost(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	for _, d := range te.Errors {
		if d.Code == transport.BlobUploadUnknownErrorCode || d.Code == transport.BlobUploadInvalidErrorCode {
			return true
		}
	}
	return false
}

// putBlob finishes the upload session at loc with b's content (PUT), after
// opening one (POST) when loc is "".
func (s *session) putBlob(ctx context.Context, b blob, loc string) error {
	if loc == "" {
		var err error
		if loc, err = s.openUpload(ctx); err != nil {
			return err
		}
	}
	lu, err := url.Parse(loc)
	if err != nil {
		return err
	}
	q := lu.Query()
	q.Set("digest", b.digest.String())
	lu.RawQuery = q.Encode()
	body, err := b.layer.Compressed()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(resendable(ctx), http.MethodPut, lu.String(), body)
	if err != nil {
		body.Close()
		return err
	}
	req.ContentLength = b.size
	req.GetBody = func() (io.ReadCloser, error) { return b.layer.Compressed() }
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.client().Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	return transport.CheckError(resp, http.StatusCreated)
}

// openUpload opens an upload session (POST) and returns its URL.
func (s *session) openUpload(ctx context.Context) (string, error) {
	u := url.URL{Scheme: s.repo.Scheme(), Host: s.repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/blobs/uploads/", s.repo.RepositoryStr())}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), http.NoBody)
	if err != nil {
		return "", err
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return "", err
	}
	// The error first: CheckError reads the registry's error body (a full
	// registry's ENOSPC detail), which drain would discard.
	defer drain(resp)
	if err := transport.CheckError(resp, http.StatusAccepted); err != nil {
		return "", err
	}
	return uploadLocation(resp)
}

// uploadLocation is the absolute URL of the upload session resp opened.
func uploadLocation(resp *http.Response) (string, error) {
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.Header.Get("Location") == "" {
		return "", fmt.Errorf("registry opened an upload without a usable Location (%q)", resp.Header.Get("Location"))
	}
	return resp.Request.URL.ResolveReference(loc).String(), nil
}

// mount asks the registry to mount blob d from the repository src into
// the target with a single request. It reports false when the blob must
// be uploaded instead, with the upload session to use when the registry
// opened one: the registry refused (202: the first such answer marks the
// registry as one that does not mount, with one warning saying what
// uploading the base costs) or the mount failed even after the retries (a
// mount is an optimization: registries answer 401 or 404 when the source
// repository is not readable, and the upload that follows says what is
// really wrong if anything is). Only a cancelled push is an error.
func (s *session) mount(ctx context.Context, d v1.Hash, src name.Repository, bytes int64, log *slog.Logger) (bool, string, error) {
	u := url.URL{
		Scheme:   s.repo.Scheme(),
		Host:     s.repo.RegistryStr(),
		Path:     fmt.Sprintf("/v2/%s/blobs/uploads/", s.repo.RepositoryStr()),
		RawQuery: "mount=" + url.QueryEscape(d.String()) + "&from=" + url.QueryEscape(src.RepositoryStr()),
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), http.NoBody)
	if err != nil {
		return false, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client().Do(req)
	if err == nil {
		defer drain(resp)
		switch resp.StatusCode {
		case http.StatusCreated:
			return true, "", nil
		case http.StatusAccepted:
			if s.mounts.refused.CompareAndSwap(false, true) {
				log.Warn("the registry does not mount blobs from another repository (it answered a mount with an upload): uploading the base's layers instead",
					"registry", s.repo.RegistryStr(), "from", src.RepositoryStr(), "bytes", bytes)
			}
			loc, lerr := uploadLocation(resp)
			if lerr != nil {
				return false, "", nil
			}
			return false, loc, nil
		}
		err = transport.CheckError(resp, http.StatusCreated, http.StatusAccepted)
	}
	if ctx.Err() != nil {
		return false, "", ctx.Err()
	}
	log.Warn("mount failed, uploading instead", "digest", d.String(), "from", src.RepositoryStr(), "error", err)
	return false, "", nil
}
