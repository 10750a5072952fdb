package controller

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
)

// sharedTTL is how long builds trust what earlier builds learnt about the
// target repositories.
const sharedTTL = 10 * time.Minute

// maxSessions bounds the sets of credentials a sharedPush keeps sessions
// for.
const maxSessions = 64

// sharedPush is what the controller's builds share when they push: the
// blobs the target repositories are known to hold (a base layer is not
// checked again by every pool's build) and, per set of credentials, the
// authenticated connections to the repositories of the push and of every
// other registry call (base, signatures, attestations): one ping and token
// per repository for all builds instead of several per build. Builds with
// other credentials never share a connection. Everything is forgotten after sharedTTL and when a
// build fails, in case the registry lost a blob meanwhile (a garbage
// collection, a restore): the next build checks again.
type sharedPush struct {
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

// options are the push options of a build with the credentials cred (the
// digest of the Secrets they come from), and the connections of its other
// registry calls (registry.Options.Shared).
func (s *sharedPush) options(cred [sha256.Size]byte) ([]publish.Option, *registry.Connections) {
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
	return []publish.Option{publish.WithKnownBlobs(s.known), publish.WithSessions(&c.push)}, &c.reg
}

// forget drops what the builds learnt.
func (s *sharedPush) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known, s.sessions = nil, nil
}
