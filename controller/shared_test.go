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
	_, ca := s.options(a)
	sa, known := s.sessions[a], s.known
	if _, c := s.options(a); s.sessions[a] != sa || s.known != known || c != ca {
		t.Error("the same credentials got another session or known-blob set")
	}
	if _, c := s.options(b); s.sessions[b] == sa || s.known != known || c == ca {
		t.Error("other credentials share a session, or a new known-blob set")
	}
	s.forget()
	s.options(a)
	if s.sessions[a] == sa || s.known == known {
		t.Error("forget kept what builds learnt")
	}
}
