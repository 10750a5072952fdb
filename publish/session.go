package publish

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
)

// session is one authenticated transport to the target repository: a
// single ping (and, for token registries, a single token covering push to
// the target and pull from the repositories blobs are mounted from) serves
// every request of a Write and of the Commit that follows it.
//
// The transport stack, outermost first: authentication, user agent,
// retries of single requests (registry.Options.Retry; blob uploads are
// retried as a whole by go-containerregistry), then the caller's inner
// transport (the byte counter for a Write).
type session struct {
	repo  name.Repository
	tr    http.RoundTripper // a transport.Wrapper: go-containerregistry adds nothing to it
	retry registry.Retry
	jobs  int
	// known are blobs known to be in repositories (WithKnownBlobs); ctr
	// counts one found there as skipped.
	known *KnownBlobs
	ctr   *counter
	// reqJobs bounds a Write's blob requests at once (mounts, checks,
	// uploads), jobs its uploads.
	reqJobs int
	// mounts is what the session learnt about mounting at the registry.
	mounts *mountState
	// runSlots, with WithSessions, bounds the blob requests of the whole
	// run at once.
	runSlots chan struct{}
	// tag is the publisher's tag (the image it names proves its blobs).
	tag *name.Tag
	// sole: WithSoleWriter.
	sole bool
	// tagLooked is set when Write looked at the tag, and
	// tagCurrent when the tag named the image already.
	tagLooked, tagCurrent bool
	// prev is what the tag named when Write looked at it, when that is
	// another image (or an index).
	prev *v1.Descriptor
	// manifestPending is set when Write left the manifest to Commit
	// (WithManifestByTag).
	manifestPending bool
	// relooked is set when Write looked at the tag again while it put the
	// manifest (lookAgain), and tagNow is what the tag named then.
	relooked bool
	tagNow   v1.Hash
}

// connect returns a session that pushes to the target repository and
// pulls from pulls: a new one (one ping of the registry, one token) or,
// with WithSessions, the one an earlier publisher of the run opened for
// the same repositories. What a Write moves is counted by the counter it
// puts in the requests' context (withCounter), so sessions can be shared.
func (p *Publisher) connect(ctx context.Context, pulls []name.Repository) (*session, error) {
	repo := p.tag.Context()
	var s *session
	var err error
	if p.o.sessions == nil {
		s, err = p.open(ctx, repo, pulls)
	} else {
		key := repo.Scope(transport.PushScope)
		for _, r := range pulls {
			key += " " + r.Scope(transport.PullScope)
		}
		if len(pulls) == 0 {
			// A session that pushes to repo serves a publisher that
			// only pushes there (a tag move), whatever else it pulls.
			s = p.o.sessions.covering(key)
		}
		if s == nil {
			s, err = p.o.sessions.get(key, func() (*session, error) { return p.open(ctx, repo, pulls) })
		}
	}
	if err != nil {
		return nil, err
	}
	// A shared session carries this publisher's options, not its opener's.
	s.known, s.sole, s.tag = p.o.known, p.o.sole, p.tag
	if p.o.sessions != nil {
		s.runSlots = p.o.sessions.slots()
	}
	return s, nil
}

// open pings the target registry once and authenticates for pushing to
// repo and pulling from pulls.
func (p *Publisher) open(ctx context.Context, repo name.Repository, pulls []name.Repository) (*session, error) {
	base := p.reg.Transport
	if base == nil {
		base = registry.DefaultTransport
	}
	inner := p.reg.RoundTripper(counting{base})
	kc := p.reg.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	auth, err := authn.Resolve(ctx, kc, repo)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", repo.Name(), err)
	}
	rt := transport.NewRetry(inner,
		transport.WithRetryBackoff(p.reg.Retry.Backoff()),
		transport.WithRetryPredicate(registry.Retryable),
		transport.WithRetryStatusCodes(registry.RetryStatusCodes...))
	rt = transport.NewUserAgent(rt, p.reg.UserAgent)
	scopes := []string{repo.Scope(transport.PushScope)}
	for _, r := range pulls {
		scopes = append(scopes, r.Scope(transport.PullScope))
	}
	// The ping and the token outlive this call when the session is shared.
	tr, err := transport.NewWithContext(context.WithoutCancel(ctx), repo.Registry, auth, rt, scopes)
	if err != nil {
		return nil, err
	}
	jobs := p.reg.Jobs
	if jobs <= 0 {
		jobs = 4
	}
	return &session{repo: repo, tr: tr, retry: p.reg.Retry, jobs: jobs, reqJobs: p.reg.RequestJobs(), mounts: &mountState{}, known: p.o.known}, nil
}

// Sessions shares authenticated connections to target repositories between
// publishers (WithSessions): the registry is pinged and a token fetched
// once per repository (and set of repositories mounted from) for the
// whole run instead of once per image. Tokens that expire are fetched
// again by the transport. The zero value is empty and ready.
type Sessions struct {
	mu sync.Mutex
	m  map[string]*sessionEntry
	// inFlight bounds the blob requests of all the run's publishers at
	// once (runRequests): many images at once, each with its own
	// Options.Requests, would otherwise keep hundreds of requests open
	// against one registry, which then answers each more slowly.
	inFlight chan struct{}
}

// runRequests bounds the blob requests of a run's publishers at once.
const runRequests = 64

// slots returns the run's bound of requests at once.
func (ss *Sessions) slots() chan struct{} {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.inFlight == nil {
		ss.inFlight = make(chan struct{}, runRequests)
	}
	return ss.inFlight
}

type sessionEntry struct {
	mu sync.Mutex
	s  *session
}

// get returns a copy of the session under key, opened by open when there
// is none yet (a failure is not kept: the next publisher tries again).
func (ss *Sessions) get(key string, open func() (*session, error)) (*session, error) {
	ss.mu.Lock()
	if ss.m == nil {
		ss.m = map[string]*sessionEntry{}
	}
	e := ss.m[key]
	if e == nil {
		e = &sessionEntry{}
		ss.m[key] = e
	}
	ss.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.s == nil {
		s, err := open()
		if err != nil {
			return nil, err
		}
		e.s = s
	}
	c := *e.s
	return &c, nil
}

// covering returns a copy of an open session whose key is key or key and
// more scopes, or nil when there is none.
func (ss *Sessions) covering(key string) *session {
	ss.mu.Lock()
	var es []*sessionEntry
	for k, e := range ss.m {
		if k == key || strings.HasPrefix(k, key+" ") {
			es = append(es, e)
		}
	}
	ss.mu.Unlock()
	for _, e := range es {
		e.mu.Lock()
		s := e.s
		e.mu.Unlock()
		if s != nil {
			c := *s
			return &c
		}
	}
	return nil
}

// remoteOptions makes go-containerregistry use the session's transport
// as it is (no second ping) with the configured retries of whole
// operations.
func (s *session) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(s.tr),
		remote.WithJobs(s.jobs),
		remote.WithRetryBackoff(s.retry.Backoff()),
		remote.WithRetryStatusCodes(registry.RetryStatusCodes...),
		remote.WithRetryPredicate(func(err error) bool { return ctx.Err() == nil && registry.Retryable(err) }),
	}
}

// blob is one blob of an image: a layer or the config.
type blob struct {
	layer v1.Layer
	// digest, size and media type as the manifest lists them (asking a
	// remote layer parses its image's manifest again every time).
	digest v1.Hash
	size   int64
	mt     types.MediaType
	what   string
	// own is set for the config and the layers the build added (the
	// others are the base's, or unknown).
	own bool
}

// imageBlobs lists the distinct layers of img, then its config.
func imageBlobs(img v1.Image) ([]blob, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != len(m.Layers) {
		return nil, fmt.Errorf("manifest lists %d layers, image has %d", len(m.Layers), len(layers))
	}
	seen := map[v1.Hash]bool{}
	var out []blob
	for i, desc := range m.Layers {
		if seen[desc.Digest] {
			continue
		}
		seen[desc.Digest] = true
		out = append(out, blob{layer: layers[i], digest: desc.Digest, size: desc.Size, mt: desc.MediaType, what: fmt.Sprintf("layer %d", i+1)})
	}
	if !seen[m.Config.Digest] {
		cl, err := partial.ConfigLayer(img)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		out = append(out, blob{layer: cl, digest: m.Config.Digest, size: m.Config.Size, mt: m.Config.MediaType, what: "config", own: true})
	}
	return out, nil
}

// markOwn marks the blobs of layers the build added as the image's own.
func markOwn(blobs []blob, added []assemble.AddedLayer) {
	for i := range blobs {
		for _, a := range added {
			if blobs[i].digest == a.Digest {
				blobs[i].own = true
			}
		}
	}
}

// mountFrom returns the repository b can be mounted from: another
// repository of repo's registry that b is a remote layer of. Layers of
// another registry, or of repo itself, are not mounted.
func mountFrom(repo name.Repository, b blob) (*remote.MountableLayer, name.Repository, bool) {
	ml, ok := b.layer.(*remote.MountableLayer)
	if !ok || ml.Reference == nil || !b.mt.IsDistributable() {
		return nil, name.Repository{}, false
	}
	src := ml.Reference.Context()
	if !sameRegistryOtherRepo(repo, src) {
		return nil, name.Repository{}, false
	}
	return ml, src, true
}

func sameRegistryOtherRepo(repo, src name.Repository) bool {
	return src.RegistryStr() == repo.RegistryStr() && src.RepositoryStr() != repo.RepositoryStr()
}

// mountHint returns the repository of b's base when it is another
// repository of repo's registry: the one base layers will be mounted from.
// It is only a hint for the token's scopes (a token registry that wants
// another scope says so, and the transport asks for it), so it is
// computed from the base reference rather than from every layer.
func (p *Publisher) mountHint(repo name.Repository, b *assemble.Built) []name.Repository {
	return p.mountHintOf(repo, b.Base.Ref)
}

// mountHintOf is mountHint of a base reference.
func (p *Publisher) mountHintOf(repo name.Repository, base string) []name.Repository {
	if base == "" || registry.IsLayout(base) {
		return nil
	}
	ref, err := p.reg.ParseReference(base)
	if err != nil || !sameRegistryOtherRepo(repo, ref.Context()) {
		return nil
	}
	return []name.Repository{ref.Context()}
}

// untagged reports whether the target repository has no tag at all: the
// registry answers its tag list with 404 (distribution's NAME_UNKNOWN).
// Anything else, or a failure, is "maybe tagged".
func (s *session) untagged(ctx context.Context, log *slog.Logger) bool {
	u := url.URL{Scheme: s.repo.Scheme(), Host: s.repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/tags/list", s.repo.RepositoryStr()), RawQuery: "n=1"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return false
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return false
	}
	defer drain(resp)
	if resp.StatusCode == http.StatusNotFound {
		log.Debug("repository has no tag: mounting base layers without checking each", "repository", s.repo.Name())
		return true
	}
	return false
}

// maxManifest bounds the manifest learn reads (distribution's own limit
// for a manifest it accepts is 4 MiB).
const maxManifest = 4 << 20

// learn marks every blob of the image the tag names (s.prev, another image
// than the one being written) as known in the target repository: a
// manifest in a repository says that the registry linked every blob it
// references there (distribution refuses a manifest whose blobs the
// repository lacks and keeps the blobs a manifest references), so blobs
// of the new image that the old one has need no check (HEAD), mount or
// upload. It costs one GET of the manifest by digest and is only sent
// when it can save requests: some layer of the base (a layer the build
// did not add) is not known yet. The image's own blobs alone are not
// worth it: when an image changed, its added layers changed too but for
// one or two (the content that did not change), and its config always
// did. An index, a failure or an answer that is not the manifest of that
// digest is no error: the blobs are checked as without it. Foreign
// layers (not distributable, or with URLs) are not marked: registries
// accept manifests without them.
func (s *session) learn(ctx context.Context, blobs []blob, log *slog.Logger) {
	prev := s.prev
	if !prev.MediaType.IsImage() {
		return
	}
	worth := false
	for _, b := range blobs {
		if !b.own && !s.known.has(s.repo, b.digest.String()) {
			worth = true
			break
		}
	}
	if !worth {
		return
	}
	skip := func(why string, args ...any) {
		log.Debug("not learning the blobs of the image the tag names: "+why, append([]any{"digest", prev.Digest.String()}, args...)...)
	}
	u := url.URL{Scheme: s.repo.Scheme(), Host: s.repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/manifests/%s", s.repo.RepositoryStr(), prev.Digest)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		skip("request", "error", err)
		return
	}
	req.Header.Set("Accept", string(prev.MediaType))
	resp, err := s.client().Do(req)
	if err != nil {
		skip("request", "error", err)
		return
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		skip("registry answer", "status", resp.StatusCode)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
	if err != nil || len(raw) > maxManifest {
		skip("manifest unreadable or too large", "error", err)
		return
	}
	if h, _, err := v1.SHA256(bytes.NewReader(raw)); err != nil || h != prev.Digest {
		skip("the registry answered another manifest", "got", h.String())
		return
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		skip("manifest", "error", err)
		return
	}
	if s.known == nil {
		// This Write's own set (the session is this Write's copy).
		s.known = &KnownBlobs{}
	}
	n := 0
	for _, desc := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if desc.MediaType.IsDistributable() && len(desc.URLs) == 0 {
			s.known.add(s.repo, desc.Digest.String())
			n++
		}
	}
	log.Debug("learnt the blobs of the image the tag names", "digest", prev.Digest.String(), "blobs", n)
}

// has reports whether the target repository has blob d (HEAD).
func (s *session) has(ctx context.Context, d v1.Hash) (bool, error) {
	u := url.URL{Scheme: s.repo.Scheme(), Host: s.repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/blobs/%s", s.repo.RepositoryStr(), d)}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), http.NoBody)
	if err != nil {
		return false, err
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return false, err
	}
	defer drain(resp)
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, transport.CheckError(resp, http.StatusOK, http.StatusNotFound)
}

// putManifest puts the manifest of img (an image or an index) at ref, retrying (a bounded number
// of times) answers that say a blob it names is unknown or does not match:
// every blob was just written or found, so the registry read a link that
// a concurrent writer (another build) was rewriting at that moment.
func (s *session) putManifest(ctx context.Context, ref name.Reference, img remote.Taggable, put func(context.Context, name.Reference, remote.Taggable) error, log *slog.Logger) error {
	const attempts = 5
	wait := 100 * time.Millisecond
	for i := 1; ; i++ {
		err := put(ctx, ref, img)
		if err == nil || i == attempts || !tornRead(err) || ctx.Err() != nil {
			return err
		}
		log.Warn("registry read a blob link another writer was rewriting; putting the manifest again", "ref", ref.String(), "attempt", i+1, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait)))):
		}
		wait *= 2
	}
}

// putTagged puts m (whose digest is d) by tag in one request and checks
// the digest the registry answers: it must be d (a registry that answers
// none is asked for d by digest).
func (s *session) putTagged(ctx context.Context, tag name.Tag, m remote.Taggable, d v1.Hash) error {
	got, err := s.putAt(ctx, tag.TagStr(), m)
	if err != nil {
		return err
	}
	if got == "" {
		desc, err := remote.Head(s.repo.Digest(d.String()), s.remoteOptions(ctx)...)
		if err != nil {
			return fmt.Errorf("manifest %s put by tag: the registry answered no digest, and by digest: %w", d, err)
		}
		got = desc.Digest.String()
	}
	if got != d.String() {
		return fmt.Errorf("manifest %s put by tag: the registry answered digest %s", d, got)
	}
	return nil
}

// putAt puts m at ref (a tag, or m's digest) in one request and returns
// the digest the registry answered (Docker-Content-Digest; "" when it
// answered none).
func (s *session) putAt(ctx context.Context, ref string, m remote.Taggable) (string, error) {
	raw, err := m.RawManifest()
	if err != nil {
		return "", err
	}
	mtm, ok := m.(interface {
		MediaType() (types.MediaType, error)
	})
	if !ok {
		return "", fmt.Errorf("manifest for %s: no media type", ref)
	}
	mt, err := mtm.MediaType()
	if err != nil {
		return "", err
	}
	u := url.URL{
		Scheme: s.repo.Scheme(),
		Host:   s.repo.RegistryStr(),
		Path:   fmt.Sprintf("/v2/%s/manifests/%s", s.repo.RepositoryStr(), ref),
	}
	// The retries send the manifest again (resendable: from GetBody).
	req, err := http.NewRequestWithContext(resendable(ctx), http.MethodPut, u.String(), bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", string(mt))
	resp, err := s.client().Do(req)
	if err != nil {
		return "", err
	}
	defer drain(resp)
	if err := transport.CheckError(resp, http.StatusOK, http.StatusCreated, http.StatusAccepted); err != nil {
		return "", err
	}
	return resp.Header.Get("Docker-Content-Digest"), nil
}

// tornRead reports whether err is a manifest PUT refused because a blob it
// names looked unknown or corrupt (registry.TornManifestPut).
func tornRead(err error) bool { return registry.TornManifestPut(err) }

// client follows no redirects: every request here expects its answer from
// the registry itself.
func (s *session) client() *http.Client {
	return &http.Client{Transport: s.tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// maxKept bounds the sessions kept for Commits that may never come (a
// later stage failed).
const maxKept = 64

func (p *Publisher) keep(pub *assemble.Published, s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions == nil {
		p.sessions = map[*assemble.Published]*session{}
	}
	if len(p.sessions) >= maxKept {
		for k := range p.sessions {
			delete(p.sessions, k)
			break
		}
	}
	p.sessions[pub] = s
}

func (p *Publisher) take(pub *assemble.Published) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sessions[pub]
	delete(p.sessions, pub)
	return s
}
