package prune_test

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/prune"
)

// partial is the digest of an image or index.
func partial(t remote.Taggable) (v1.Hash, error) {
	if d, ok := t.(interface{ Digest() (v1.Hash, error) }); ok {
		return d.Digest()
	}
	b, err := t.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(strings.NewReader(string(b)))
	return h, err
}

// writeTaggable pushes an image or an index by digest.
func writeTaggable(d name.Digest, t remote.Taggable) error {
	switch v := t.(type) {
	case v1.ImageIndex:
		return remote.WriteIndex(d, v)
	case v1.Image:
		return remote.Write(d, v)
	}
	return remote.Put(d, t)
}

// find returns the result's entry for digest d.
func find(t testing.TB, res *prune.Result, d name.Digest) *prune.Image {
	t.Helper()
	for _, im := range res.Images {
		if im.Digest.String() == d.DigestStr() {
			return im
		}
	}
	t.Fatalf("%s not listed; listed: %v", d.DigestStr(), digests(res))
	return nil
}

func digests(res *prune.Result) []string {
	var out []string
	for _, im := range res.Images {
		out = append(out, im.Digest.String()+" "+im.Action)
	}
	return out
}

// hex is a digest's hex part.
func hex(d name.Digest) string { return strings.TrimPrefix(d.DigestStr(), "sha256:") }

// wantKept fails unless d is kept with a reason containing why, and its
// manifest and signature tags are still there.
func (e *env) wantKept(res *prune.Result, d name.Digest, why string) {
	e.t.Helper()
	im := find(e.t, res, d)
	if im.Action != prune.ActionKeep || !strings.Contains(strings.Join(im.Reasons, "; "), why) {
		e.t.Errorf("%s: %s %q, want keep because %q", d.DigestStr(), im.Action, im.Reasons, why)
	}
	if s := e.status(d.DigestStr()); s != 200 {
		e.t.Errorf("kept %s: manifest answers %d", d.DigestStr(), s)
	}
	if tags := e.tags(); !tags["sha256-"+hex(d)+".sig"] || !tags["sha256-"+hex(d)+".att"] {
		e.t.Errorf("kept %s lost its .sig or .att tag: %v", d.DigestStr(), tags)
	}
}

// wantDeleted fails unless d was deleted: its manifest 404s and its
// .sig and .att tags are gone from the registry.
func (e *env) wantDeleted(res *prune.Result, d name.Digest) {
	e.t.Helper()
	if im := find(e.t, res, d); im.Action != prune.ActionDeleted {
		e.t.Errorf("%s: %s %q, want deleted", d.DigestStr(), im.Action, im.Reasons)
	}
	if s := e.status(d.DigestStr()); s != 404 {
		e.t.Errorf("deleted %s: manifest answers %d, want 404", d.DigestStr(), s)
	}
	tags := e.tags()
	for _, suffix := range []string{".sig", ".att"} {
		if tags["sha256-"+hex(d)+suffix] {
			e.t.Errorf("deleted %s: tag %s is still there", d.DigestStr(), "sha256-"+hex(d)+suffix)
		}
	}
}

// wantNothingDeleted runs prune again: nothing is left to delete.
func (e *env) wantNothingDeleted() {
	e.t.Helper()
	if res := e.prune(true); res.Deleted != 0 || res.Delete != 0 {
		e.t.Errorf("second run deleted %d: %v", res.Deleted, digests(res))
	}
}
