// Package publish publishes an assembled image: it implements
// build.Publisher for two kinds of target.
//
// A registry target "REG/REPO[:TAG]" (TAG defaults to "latest"):
//
//   - Write pushes the image by digest only (REG/REPO@sha256:...). One
//     authenticated transport serves the whole push (at most one ping of
//     the registry, none when the look at the tag stood for it: lookFirst;
//     one token covering the target and the repositories blobs are mounted
//     from). It looks at the tag first (the image there: nothing more is
//     sent), then for the image by digest (likewise). Otherwise the blobs
//     go as blobs.go describes: what a manifest in the target repository
//     proves is not checked; base layers of another repository of the same
//     registry are cross-repository mounted with one request each (no byte
//     of them downloaded or uploaded), never a blob the target has
//     (registries that keep links as files rewrite them in place, failing
//     concurrent readers and manifest PUTs); a mount the registry refuses
//     is uploaded (and the log says so); the image's own small blobs are
//     uploaded without a check. Blobs go in parallel
//     (registry.Options.Requests, Jobs for large uploads), every request
//     is retried with backoff on 5xx, 429 and broken connections
//     (registry.Options.Retry; an upload is retried as a whole). A base on
//     ANOTHER registry cannot be mounted: its layers are streamed from the
//     base registry to the target (downloaded once, never stored on disk).
//     The manifest is put by digest last (WithManifestByTag leaves it to
//     Commit, which puts it once, by tag); an answer that a blob it names
//     is unknown or corrupt is retried a few times (a concurrent build was
//     rewriting that blob's link).
//   - Commit moves TAG to the digest (one manifest PUT), the last step of a
//     build: until then the tag stays where it was. It reuses the
//     transport of the Write that published the image; a tag that already
//     names the digest is left alone (always checked: another build may
//     have just moved it there), so an unchanged rebuild sends nothing and
//     concurrent builds of the same inputs write the tag once.
//
// An OCI layout target "oci:DIR[:TAG]" (TAG defaults to "latest"):
//
//   - Write creates DIR as an OCI image layout if needed and writes every
//     missing blob (layers, config, manifest) atomically (temp file,
//     digest check, rename); a blob already present is reused only after
//     its content was read and has its digest (a corrupt one is written
//     again), so Write is idempotent. Temp files live in
//     DIR/.oslayer-tmp/run-*/, one directory per run, locked while the run
//     lives: the next Write or Commit removes what a killed run left (and
//     temp files older versions left among the blobs, once untouched for
//     10 minutes). Base layers of a registry base are downloaded (a layout
//     must hold them); layers of a layout base are copied file to file.
//   - Commit adds the manifest to DIR/index.json with the annotation
//     org.opencontainers.image.ref.name=TAG, replacing an entry with the same
//     tag; index.json is rewritten atomically (temp file and rename) under a
//     lock.
//
// Progress goes to an io.Writer: a single self-updating line on a terminal,
// plain lines every 10% otherwise.
package publish

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
)

// DefaultTag is used when a target names no tag.
const DefaultTag = "latest"

// Publisher writes images to one target. It implements build.Publisher
// and is safe for concurrent use by several builds.
type Publisher struct {
	target string
	reg    *registry.Options
	o      options
	impl   assemble.Publisher
	// Tag is the registry tag the target names (nil for a layout).
	tag *name.Tag
	// layout target.
	dir, layoutTag string

	mu sync.Mutex
	// sessions Write kept for the Commit of what it published.
	sessions map[*assemble.Published]*session
	// started is what Start began for the next Write.
	started *started
}

var _ assemble.Publisher = (*Publisher)(nil)

type options struct {
	progress io.Writer
	log      *slog.Logger
	terminal *bool
	known    *KnownBlobs
	sessions *Sessions
	sole     bool
	oneShot  bool
	byTag    bool
}

// Option configures a Publisher.
type Option func(*options)

// WithProgress reports progress on w (typically stderr): a bar updated in
// place when w is a terminal, plain lines otherwise. Nil disables it.
func WithProgress(w io.Writer) Option { return func(o *options) { o.progress = w } }

// WithTerminal forces (true) or suppresses (false) the in-place progress
// bar regardless of what the progress writer is.
func WithTerminal(isTerminal bool) Option {
	return func(o *options) { o.terminal = &isTerminal }
}

// WithKnownBlobs shares k between publishers: a blob one of them found,
// mounted or uploaded in a repository is not checked again by any of them
// (no HEAD, no mount). Meant for one run of many builds into the same
// repositories (a fleet), where nothing deletes blobs meanwhile.
func WithKnownBlobs(k *KnownBlobs) Option { return func(o *options) { o.known = k } }

// WithSessions shares authenticated connections between publishers (see
// Sessions): meant for one run of many builds, as WithKnownBlobs.
func WithSessions(s *Sessions) Option { return func(o *options) { o.sessions = s } }

// WithSoleWriter says that nothing else writes the target's tag while the
// publisher runs, and that the first image written into a repository is
// written alone (a fleet run: every tag belongs to one pool, and the first
// image of each repository goes before the others). Then Write looks at
// the tag first: when it names the image already, nothing else is sent
// (one request for an unchanged image); Commit moves the tag without
// looking at it again; when the tag names another image and a base layer
// is not known yet, that image's manifest is read (one GET) and every
// blob it references counts as known in the repository (no HEAD, mount
// or upload of it); and base layers to mount into a repository with no
// tag yet (GET tags/list answers 404) are mounted without checking each
// first (an image no tag names has no readers whose reads a mount could
// disturb).
func WithSoleWriter() Option { return func(o *options) { o.sole = true } }

// WithSingleRequestUploads is how every blob is uploaded now (a POST,
// then one PUT with the whole blob, retried as a whole); the option is
// kept for the callers that ask for it.
func WithSingleRequestUploads() Option { return func(o *options) { o.oneShot = true } }

// WithManifestByTag makes Write upload the image's blobs but not its
// manifest, and Commit put the manifest once, by tag: one request fewer
// for every new image, and the image is reachable (by tag or by digest)
// only once every stage succeeded, as its tag is. Commit checks the digest
// the registry answers. Only for a single image whose stages do not read
// it back from the registry (preflight.Options.NoReadBack, classic
// signatures; not an index's platform images, which the index names by
// digest): a fleet run.
func WithManifestByTag() Option { return func(o *options) { o.byTag = true } }

// KnownBlobs is a set of blobs known to be in repositories, safe for
// concurrent use; the zero value is empty and ready.
type KnownBlobs struct {
	mu sync.Mutex
	m  map[string]bool
}

func (k *KnownBlobs) key(repo name.Repository, d string) string { return repo.Name() + "@" + d }

func (k *KnownBlobs) has(repo name.Repository, d string) bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[k.key(repo, d)]
}

func (k *KnownBlobs) add(repo name.Repository, d string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]bool{}
	}
	k.m[k.key(repo, d)] = true
}

// WithLogger logs each step (debug: every blob) to l.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// New checks target and returns a Publisher for it. target is a registry
// reference "REG/REPO[:TAG]" or an OCI layout "oci:DIR[:TAG]". An invalid
// target is an error before any network or file system access. A registry
// target must not be a digest (the digest is the image's). reg may be nil
// (defaults).
func New(target string, reg *registry.Options, opts ...Option) (*Publisher, error) {
	if reg == nil {
		reg = &registry.Options{}
	}
	p := &Publisher{target: target, reg: reg}
	for _, o := range opts {
		o(&p.o)
	}
	if p.o.log == nil {
		p.o.log = slog.New(slog.DiscardHandler)
	}
	if registry.IsLayout(target) {
		dir, tag, err := registry.SplitLayout(target)
		if err != nil {
			return nil, fmt.Errorf("push target: %w", err)
		}
		if strings.Contains(dir, "@") {
			return nil, fmt.Errorf("push target %q: a layout target takes a tag, not a digest", target)
		}
		if tag == "" {
			tag = DefaultTag
		}
		p.dir, p.layoutTag = dir, tag
		p.impl = &layoutPublisher{p: p}
		return p, nil
	}
	tag, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	if reg.IsInsecure(tag.RegistryStr()) {
		if tag, err = name.NewTag(tag.Name(), name.Insecure); err != nil {
			return nil, fmt.Errorf("push target %q: %v", target, err)
		}
	}
	p.tag = &tag
	p.impl = &remotePublisher{p: p}
	return p, nil
}

// ParseTarget checks a registry push target and returns its tag
// ("latest" when none is given). It refuses URLs, whitespace, relative
// path segments, upper case repositories and digests.
func ParseTarget(target string) (name.Tag, error) {
	bad := func(why string) (name.Tag, error) {
		return name.Tag{}, fmt.Errorf("push target %q: %s", target, why)
	}
	switch {
	case target == "":
		return bad("empty reference")
	case strings.Contains(target, "://"):
		return bad("give REGISTRY/REPOSITORY[:TAG], not a URL")
	case strings.ContainsAny(target, " \t\r\n\\"):
		return bad("contains whitespace or a backslash")
	case strings.Contains(target, "@"):
		return bad("give a tag, not a digest (the digest is the built image's)")
	case strings.HasPrefix(target, "/") || strings.HasSuffix(target, "/") || strings.Contains(target, "//"):
		return bad("empty path component")
	}
	for _, seg := range strings.Split(target, "/") {
		if seg == "." || seg == ".." {
			return bad("relative path component " + seg)
		}
	}
	ref, err := name.ParseReference(target, name.StrictValidation)
	if err != nil {
		ref, err = name.ParseReference(target)
		if err != nil {
			return bad(err.Error())
		}
	}
	t, ok := ref.(name.Tag)
	if !ok {
		return bad("give a tag, not a digest")
	}
	// The lenient parse checks the repository before adding an implicit
	// "library/"; check the full name as it will be pushed.
	if _, err := name.NewTag(t.Name(), name.StrictValidation); err != nil {
		return bad(err.Error())
	}
	return t, nil
}

// Target is the reference the tag moves: the target given to New with
// its tag spelled out ("oci:DIR:latest", "REG/REPO:latest" when none was
// given), so it can be passed on as it is.
func (p *Publisher) Target() string {
	if p.tag != nil {
		return p.tag.Name()
	}
	return registry.LayoutPrefix + p.dir + ":" + p.layoutTag
}

// Write implements build.Publisher: it writes b, an image or an index,
// by digest only.
func (p *Publisher) Write(ctx context.Context, b *assemble.Built) (*assemble.Published, error) {
	if b.IsIndex() {
		return p.writeIndex(ctx, b)
	}
	if b == nil || b.Image == nil {
		return nil, fmt.Errorf("push %s: no image", p.target)
	}
	return p.impl.Write(ctx, b)
}

// Commit implements build.Publisher: it moves the tag to the image or
// index Write published.
func (p *Publisher) Commit(ctx context.Context, b *assemble.Built, pub *assemble.Published) error {
	if b.IsIndex() {
		return p.commitIndex(ctx, b, pub)
	}
	if b == nil || b.Image == nil || pub == nil {
		return fmt.Errorf("push %s: commit without a written image", p.target)
	}
	return p.impl.Commit(ctx, b, pub)
}
