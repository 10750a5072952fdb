// Package registry is the plumbing every stage uses to reach images: parsing
// references (registry references and "oci:DIR[:TAG]" OCI layouts), mirror
// rewriting for air-gapped sites, credentials, and remote options. It imports
// no pipeline stage; the stages (layers, builder, preflight, push, sign)
// import it.
package registry

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// LayoutPrefix marks an OCI image layout reference: "oci:DIR[:TAG]".
const LayoutPrefix = "oci:"

// Options configure how images are reached. The zero value uses the default
// keychain, no mirrors and http.DefaultTransport.
type Options struct {
	// Mirrors rewrite registry hosts (FROM=TO), applied to every pull.
	Mirrors []Mirror
	// Keychain resolves credentials; nil means authn.DefaultKeychain.
	Keychain authn.Keychain
	// Transport is the HTTP transport; nil means remote.DefaultTransport.
	Transport http.RoundTripper
	// UserAgent is added to every request.
	UserAgent string
	// Jobs bounds parallel blob transfers (0: 4).
	Jobs int
	// Requests bounds an image's parallel blob requests that move no
	// blob (mounts, checks), uploads included but at most Jobs of them
	// (0: DefaultRequests). Across a WAN each costs a round trip, so a
	// base of hundreds of layers goes to a new repository in a few.
	Requests int
	// Retry bounds the retries of failed registry requests (5xx, 429,
	// refused and reset connections); the zero value is DefaultRetry.
	Retry Retry
	// Timeout is the deadline of every registry request: connecting,
	// sending and answering each fail when no byte moves for this long
	// (0: DefaultTimeout; negative: none). See RoundTripper.
	Timeout time.Duration
	// Insecure lists registry hosts ("host[:port]") reached over plain
	// HTTP. Loopback, *.local and private-network hosts already are (the
	// go-containerregistry rule); this is for other hosts.
	Insecure []string
	// Shared, when set, makes every go-containerregistry call made with
	// RemoteOptions share its authenticated connections: one ping and one
	// token per repository for all of them instead of one per call. A run
	// of many builds (a fleet) sets it; nil means none.
	Shared *Connections
}

// DefaultRequests is Options.Requests when unset.
const DefaultRequests = 32

// RequestJobs is Requests, or DefaultRequests when unset, and never
// fewer than Jobs.
func (o *Options) RequestJobs() int {
	n := o.Requests
	if n <= 0 {
		n = DefaultRequests
	}
	return max(n, o.Jobs)
}

// Connections are the authenticated connections calls made with one
// Options' RemoteOptions share (Options.Shared). Tokens that expire are
// fetched again. The zero value is ready.
//
// Every registry is pinged at most once for all the connections (those of
// the calls, of publish's sessions and of anything else that reaches it
// through Options.RoundTripper), however many repositories they open: the
// answer (no authentication, or the challenge that says where tokens come
// from) is remembered for as long as the Connections are used. An
// anonymous read sent first (Options.FirstLook) may stand for the ping.
type Connections struct {
	once   sync.Once
	puller *remote.Puller
	pusher *remote.Pusher
	err    error
	pings  pings
	full   fullHosts
}

// reuse returns the options that make a call use c's connections, made
// from o's options on first use.
func (c *Connections) reuse(o *Options) ([]remote.Option, error) {
	c.once.Do(func() {
		opts := o.remoteOptions(context.Background(), false)
		if c.puller, c.err = remote.NewPuller(opts...); c.err == nil {
			c.pusher, c.err = remote.NewPusher(opts...)
		}
	})
	if c.err != nil {
		return nil, c.err
	}
	return []remote.Option{remote.Reuse(c.puller), remote.Reuse(c.pusher)}, nil
}

// IsInsecure reports whether host is listed in Insecure.
func (o *Options) IsInsecure(host string) bool {
	for _, h := range o.Insecure {
		if strings.EqualFold(strings.TrimSuffix(h, "/"), host) {
			return true
		}
	}
	return false
}

// ParseInsecure checks an --insecure-registry value: a host with an
// optional port, no scheme and no path.
func ParseInsecure(s string) (string, error) {
	h := strings.TrimSpace(s)
	if h == "" || strings.Contains(h, "://") || strings.ContainsAny(h, "/ @") {
		return "", fmt.Errorf("registry.insecure %q: give a registry host[:port], e.g. registry.example.com:5000", s)
	}
	if _, err := name.NewRegistry(h, name.Insecure); err != nil {
		return "", fmt.Errorf("registry.insecure %q: %v", s, err)
	}
	return h, nil
}

// Mirror rewrites references whose registry (or registry/repository prefix)
// is From to To.
type Mirror struct {
	From string
	To   string
}

// ParseMirror parses "FROM=TO".
func ParseMirror(s string) (Mirror, error) {
	from, to, ok := strings.Cut(s, "=")
	from, to = strings.TrimSpace(from), strings.TrimSpace(to)
	if !ok || from == "" || to == "" {
		return Mirror{}, fmt.Errorf("registry.mirrors %q: want FROM=TO, e.g. quay.io=mirror.example.com:5000", s)
	}
	if strings.Contains(from, "://") || strings.Contains(to, "://") {
		return Mirror{}, fmt.Errorf("registry.mirrors %q: give registry hosts, not URLs", s)
	}
	return Mirror{From: strings.TrimSuffix(from, "/"), To: strings.TrimSuffix(to, "/")}, nil
}

// Rewrite applies the first matching mirror to ref (a registry reference
// string). The longest From that is the registry host or a path prefix of
// "host/repository" wins. Matching is on the normalized reference, the way
// containerd and containers/image resolve short names: "nginx:1" is
// docker.io/library/nginx:1, and index.docker.io and registry-1.docker.io
// are docker.io (in ref and in From). A matching reference is rewritten in
// its normalized form; any other is returned unchanged.
func (o *Options) Rewrite(ref string) string {
	norm := normalizeRef(ref)
	best, bestFrom := -1, ""
	for i, m := range o.Mirrors {
		from := normalizeHost(m.From)
		if norm == from || strings.HasPrefix(norm, from+"/") || strings.HasPrefix(norm, from+":") || strings.HasPrefix(norm, from+"@") {
			if best < 0 || len(from) > len(bestFrom) {
				best, bestFrom = i, from
			}
		}
	}
	if best < 0 {
		return ref
	}
	return o.Mirrors[best].To + strings.TrimPrefix(norm, bestFrom)
}

// dockerHubAliases are the names of Docker Hub's registry.
var dockerHubAliases = []string{"index.docker.io", "registry-1.docker.io"}

// normalizeHost maps a Docker Hub alias at the start of a registry host or
// host/path prefix to docker.io.
func normalizeHost(s string) string {
	for _, a := range dockerHubAliases {
		if s == a || strings.HasPrefix(s, a+"/") {
			return "docker.io" + strings.TrimPrefix(s, a)
		}
	}
	return s
}

// normalizeRef returns ref as host/repository[:tag][@digest] with the
// implicit parts spelled out: docker.io for a reference without a
// registry, library/ for an official Docker Hub image. An unparsable ref is
// returned unchanged.
func normalizeRef(ref string) string {
	r, err := name.ParseReference(ref, name.WeakValidation)
	if err != nil {
		return ref
	}
	repo := r.Context()
	host := normalizeHost(repo.RegistryStr())
	s := host + "/" + repo.RepositoryStr()
	switch v := r.(type) {
	case name.Tag:
		s += ":" + v.TagStr()
	case name.Digest:
		// Keep a tag written before the digest ("x:1@sha256:...").
		if at := strings.LastIndex(ref, "@"); at >= 0 {
			if c := strings.LastIndex(ref[:at], ":"); c > strings.LastIndex(ref[:at], "/") {
				s += ref[c:at]
			}
		}
		s += "@" + v.DigestStr()
	}
	return s
}

// ParseReference parses a registry reference after mirror rewriting. The
// error names the reference and what is wrong with it.
func (o *Options) ParseReference(ref string) (name.Reference, error) {
	if ref == "" {
		return nil, fmt.Errorf("empty image reference")
	}
	r, err := name.ParseReference(o.Rewrite(ref), name.StrictValidation)
	if err != nil {
		// StrictValidation refuses implicit "latest" and docker.io defaults;
		// retry leniently so "quay.io/x/y" works, but never accept garbage.
		r2, err2 := name.ParseReference(o.Rewrite(ref))
		if err2 != nil {
			return nil, fmt.Errorf("invalid image reference %q: %v", ref, err2)
		}
		r = r2
	}
	if o.IsInsecure(r.Context().RegistryStr()) {
		if r2, err := name.ParseReference(r.String(), name.Insecure); err == nil {
			r = r2
		}
	}
	return r, nil
}

// RemoteOptions returns the go-containerregistry remote options for ctx.
func (o *Options) RemoteOptions(ctx context.Context) []remote.Option {
	return o.remoteOptions(ctx, true)
}

// remoteOptions are RemoteOptions, with the shared connections when reuse
// is set (without them for the ones making them).
func (o *Options) remoteOptions(ctx context.Context, reuse bool) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(o.RoundTripper(nil))}
	if o.UserAgent != "" {
		opts = append(opts, remote.WithUserAgent(o.UserAgent))
	}
	// go-containerregistry's jobs bound its blob reads too (a pull
	// limiter): the base's layers read for its index, a base in another
	// registry streamed to the target. Across a WAN a small blob's read
	// is mostly waiting for the answer, so they go as many at once as an
	// image's blob requests (RequestJobs), not Jobs.
	opts = append(opts, remote.WithJobs(o.RequestJobs()))
	opts = append(opts, o.Retry.remoteOptions(ctx)...)
	if o.Shared != nil && reuse {
		// Options fail only for invalid values, which RemoteOptions
		// does not make; without them the call connects on its own.
		if reuse, err := o.Shared.reuse(o); err == nil {
			opts = append(opts, reuse...)
		}
	}
	return opts
}

// IsLayout reports whether ref names an OCI layout ("oci:DIR[:TAG]").
func IsLayout(ref string) bool { return strings.HasPrefix(ref, LayoutPrefix) }

// Layout is a parsed OCI layout reference.
type Layout struct {
	Dir    string
	Tag    string  // "" when none is named
	Digest v1.Hash // zero unless the reference names a digest
}

// ParseLayout parses the OCI layout references oslayer takes and prints:
// "oci:DIR", "oci:DIR:TAG" and "oci:DIR@sha256:HEX" (the digested form
// build prints, which names one manifest of DIR's index.json).
func ParseLayout(ref string) (Layout, error) {
	s := strings.TrimPrefix(ref, LayoutPrefix)
	if i := strings.LastIndex(s, "@"); i >= 0 && strings.Contains(s[i:], ":") {
		h, err := v1.NewHash(s[i+1:])
		if err != nil {
			return Layout{}, fmt.Errorf("OCI layout reference %q: invalid digest %q: %v", ref, s[i+1:], err)
		}
		if s[:i] == "" {
			return Layout{}, fmt.Errorf("OCI layout reference %q: missing directory (want oci:DIR@sha256:...)", ref)
		}
		return Layout{Dir: s[:i], Digest: h}, nil
	}
	dir, tag, err := SplitLayout(ref)
	return Layout{Dir: dir, Tag: tag}, err
}

// SplitLayout splits "oci:DIR[:TAG]" into DIR and TAG (TAG may be empty).
// A DIR containing ':' must be written with a trailing ":TAG".
func SplitLayout(ref string) (dir, tag string, err error) {
	s := strings.TrimPrefix(ref, LayoutPrefix)
	if s == "" {
		return "", "", fmt.Errorf("OCI layout reference %q: missing directory (want oci:DIR[:TAG])", ref)
	}
	if i := strings.LastIndex(s, ":"); i >= 0 {
		dir, tag = s[:i], s[i+1:]
	} else {
		dir = s
	}
	if dir == "" {
		return "", "", fmt.Errorf("OCI layout reference %q: missing directory (want oci:DIR[:TAG])", ref)
	}
	if tag != "" {
		if _, err := name.NewTag("localhost/x:"+tag, name.StrictValidation); err != nil {
			return "", "", fmt.Errorf("OCI layout reference %q: invalid tag %q", ref, tag)
		}
	}
	return dir, tag, nil
}
