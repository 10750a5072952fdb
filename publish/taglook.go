package publish

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Before it moves the tag, Commit looks at it once more: another build of
// the same inputs may have moved it to the digest since Write first
// looked, and a tag that names the digest is not written again (every
// manifest PUT rewrites links that readers of the tag read). That look
// needs nothing of the manifest's PUT, so Write sends it alongside (one
// round trip fewer on a build's path), unless the publisher is the tag's
// sole writer and looked at it already (then Commit does not look again).

// lookAgain looks at the tag again in the background; the returned
// function waits for it.
func (s *session) lookAgain(ctx context.Context, sole bool) func() {
	if s.tag == nil || (sole && s.tagLooked) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if desc, err := remote.Head(*s.tag, s.remoteOptions(ctx)...); err == nil {
			s.tagNow = desc.Digest
		}
		s.relooked = true
	}()
	return func() { <-done }
}

// tagAgain is what the tag names now (the zero hash when nothing or when
// the look failed): what Write saw alongside the manifest's PUT, or a new
// look when it did not look.
func (s *session) tagAgain(ctx context.Context) v1.Hash {
	if s.relooked {
		return s.tagNow
	}
	if desc, err := remote.Head(*s.tag, s.remoteOptions(ctx)...); err == nil {
		return desc.Digest
	}
	return v1.Hash{}
}
