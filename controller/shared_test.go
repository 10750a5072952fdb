package controller

import (
	"crypto/sha256"
	"testing"
)

// TestSharedPush: builds with the same credentials share sessions, other
// credentials get their own, all share the known blobs, and forget drops
// everything.
func TestSharedPush(t *testing.T) {
	var s sharedPush
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	s.options(a)
	sa, known := s.sessions[a], s.known
	s.options(a)
	if s.sessions[a] != sa || s.known != known {
		t.Error("the same credentials got another session or known-blob set")
	}
	s.options(b)
	if s.sessions[b] == sa || s.known != known {
		t.Error("other credentials share a session, or a new known-blob set")
	}
	s.forget()
	s.options(a)
	if s.sessions[a] == sa || s.known == known {
		t.Error("forget kept what builds learnt")
	}
}
