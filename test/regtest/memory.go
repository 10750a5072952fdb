package regtest

import (
	"io"
	"log"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Memory starts an in-memory OCI registry (go-containerregistry's
// pkg/registry) on a random 127.0.0.1 port for the test and returns it
// with Host set. It starts in microseconds and needs no tool: for tests
// that need a registry but do not test one. Tests of registry behaviour
// (request counts through a Proxy, injected faults, auth, cross-repository
// mounts, restarts, a real distribution's quirks) use Start. Only Host is
// meaningful: Log is empty, and Stop, Restart, CPU and Version do nothing
// useful. Like Debian's docker-registry 2.8 it serves no referrers API.
func Memory(t testing.TB) *Registry {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	return &Registry{Host: serveLoopback(t, h)}
}
