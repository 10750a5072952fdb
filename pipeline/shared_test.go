package pipeline

import (
	"crypto/sha256"
	"testing"
)

// TestShared: builds with the same credentials share sessions, other
// credentials get their own, all share the known blobs, and Forget drops
// everything.
func TestShared(t *testing.T) {
	var s Shared
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	_, _, ca := s.Options(a)
	sa, known := s.sessions[a], s.known
	if _, _, c := s.Options(a); s.sessions[a] != sa || s.known != known || c != ca {
		t.Error("the same credentials got another session or known-blob set")
	}
	if _, _, c := s.Options(b); s.sessions[b] == sa || s.known != known || c == ca {
		t.Error("other credentials share a session, or a new known-blob set")
	}
	s.Forget()
	s.Options(a)
	if s.sessions[a] == sa || s.known == known {
		t.Error("forget kept what builds learnt")
	}
}

// TestSharedSoleWriter: a sole writer's builds get the sole-writer push
// and sign options, others none.
func TestSharedSoleWriter(t *testing.T) {
	cred := sha256.Sum256([]byte("a"))
	pub, sig, _ := (&Shared{}).Options(cred)
	solePub, soleSig, _ := (&Shared{SoleWriter: true}).Options(cred)
	if len(sig) != 0 || len(soleSig) != 1 || len(solePub) != len(pub)+1 {
		t.Errorf("options: %d push, %d sign; sole writer: %d push, %d sign", len(pub), len(sig), len(solePub), len(soleSig))
	}
}
