package actuator

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

// maxSessions bounds the sets of credentials a sharedPush keeps sessions
// for.
const maxSessions = 64

// sharedPush is what the OSCs' builds share when they push, as the
// controller's builds do: the blobs the target repositories are known to
// hold and, per set of credentials, the authenticated connections. The
// extension is the sole writer of its targets (one active replica, one
// reconcile of an OSC at a time, a repository and tag per shoot and
// pool): a build looks at the tag first, mounts the base layers into a
// new repository without checking each, and signs without reading the
// signature tag back (publish.WithSoleWriter, sign.WithSoleWriter).
// Everything is forgotten after sharedTTL and when a build fails, in case
// the registry lost a blob meanwhile.
type sharedPush struct {
	mu       sync.Mutex
	since    time.Time
	known    *publish.KnownBlobs
	sessions map[[sha256.Size]byte]*connections
}

type connections struct {
	push publish.Sessions
	reg  registry.Connections
}

// options are the push and sign options of a build with the credentials
// cred (the digest of the Secret they come from), and the connections of
// its other registry calls (registry.Options.Shared).
func (s *sharedPush) options(cred [sha256.Size]byte) ([]publish.Option, []sign.Option, *registry.Connections) {
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
	pub := []publish.Option{publish.WithKnownBlobs(s.known), publish.WithSessions(&c.push),
		publish.WithSoleWriter(), publish.WithSingleRequestUploads()}
	return pub, []sign.Option{sign.WithSoleWriter()}, &c.reg
}

// forget drops what the builds learnt.
func (s *sharedPush) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known, s.sessions = nil, nil
}
