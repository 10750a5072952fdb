package pipeline

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/sign"
)

// sharedTTL is how long builds trust what earlier builds learnt about the
// target repositories.
const sharedTTL = 10 * time.Minute

// maxSessions bounds the sets of credentials a Shared keeps sessions for.
const maxSessions = 64

// Shared is what the builds of a long-running front-end (the controller,
// the Gardener OS extension) share when they push: the blobs the target
// repositories are known to hold (a base layer is not checked again by
// every pool's build) and, per set of credentials, the authenticated
// connections to the repositories of the push and of every other registry
// call (base, signatures, attestations): one ping and token per repository
// for all builds instead of several per build. Builds with other
// credentials never share a connection. Everything is forgotten after
// sharedTTL and on Forget (a failed build: the registry may have lost a
// blob meanwhile, a garbage collection, a restore), so the next build
// checks again. The zero value is ready to use.
type Shared struct {
	// SoleWriter says the front-end is the only writer of its targets
	// (one active replica, one build of a target at a time): a build looks
	// at the tag first, mounts the base layers into a new repository
	// without checking each, and signs without reading the signature tag
	// back (publish.WithSoleWriter, sign.WithSoleWriter).
	SoleWriter bool

	mu       sync.Mutex
	since    time.Time
	known    *publish.KnownBlobs
	sessions map[[sha256.Size]byte]*connections
}

// connections are the shared connections of one set of credentials.
type connections struct {
	push publish.Sessions
	reg  registry.Connections
}

// Options are the push and sign options of a build with the credentials
// cred (a digest of where they come from), and the connections of its
// other registry calls (registry.Options.Shared).
func (s *Shared) Options(cred [sha256.Size]byte) ([]publish.Option, []sign.Option, *registry.Connections) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil || time.Since(s.since) > sharedTTL || len(s.sessions) >= maxSessions {
		s.since, s.known, s.sessions = time.Now(), &publish.KnownBlobs{}, map[[sha256.Size]byte]*connections{}
	}
	c := s.sessions[cred]
	if c == nil {
		c = &connections{}
		s.sessions[cred] = c
	}
	pub := []publish.Option{publish.WithKnownBlobs(s.known), publish.WithSessions(&c.push)}
	if !s.SoleWriter {
		return pub, nil, &c.reg
	}
	return append(pub, publish.WithSoleWriter()), []sign.Option{sign.WithSoleWriter()}, &c.reg
}

// Forget drops what the builds learnt.
func (s *Shared) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known, s.sessions = nil, nil
}
