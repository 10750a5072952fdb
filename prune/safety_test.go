package prune_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"net/http"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/prune"
)

// An image that gains a reference between the listing and its deletion
// stays: the references are read again right before each delete. The
// hook adds the reference at the last moment before that read.
func TestReferenceInWindowHonoured(t *testing.T) {
	e := newEnv(t, false)
	late, unused := e.push("worker", true), e.push("worker", true)
	hooked := 0
	res := e.prune(true, func(o *prune.Options) {
		o.BeforeCheck = func(ctx context.Context, im *prune.Image) {
			if im.Digest.String() != late.DigestStr() {
				return
			}
			hooked++
			e.apply(fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  annotations: {machineconfiguration.openshift.io/desiredImage: %q}
`, e.name("late"), late.String()))
		}
	})
	if hooked != 1 {
		t.Fatalf("the hook ran %d times for %s, want once (it was to be deleted)", hooked, late.DigestStr())
	}
	e.wantKept(res, late, "gained a reference before deletion: Node "+e.name("late"))
	e.wantDeleted(res, unused)
	e.wantNothingDeleted()
}

// A registry that refuses DELETE (distribution's default) gives one clear
// error before anything is deleted: the only DELETE sent is the probe.
func TestRefusedDeleteDeletesNothing(t *testing.T) {
	e := newEnv(t, true)
	a, b := e.push("worker", true), e.push("worker", true)
	tagsBefore := e.tags()
	e.proxy.Reset()
	_, err := prune.Run(e.ctx, prune.Options{Targets: []string{e.repo.Name()}, Sources: []prune.Source{prune.Cluster(e.dc)},
		Policy: prune.Policy{DeleteUndated: true}, Delete: true})
	var re *prune.RefusedError
	if !errors.As(err, &re) || re.Status != http.StatusMethodNotAllowed || !strings.Contains(err.Error(), "storage.delete.enabled") || !strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("err = %v, want a RefusedError naming storage.delete.enabled", err)
	}
	deletes := 0
	for _, r := range e.proxy.Requests() {
		if r.Method == http.MethodDelete {
			deletes++
		}
	}
	if deletes != 1 {
		t.Errorf("%d DELETE requests, want only the probe", deletes)
	}
	for _, d := range []string{a.DigestStr(), b.DigestStr()} {
		if s := e.status(d); s != 200 {
			t.Errorf("%s answers %d after a refused prune", d, s)
		}
	}
	if after := e.tags(); len(after) != len(tagsBefore) {
		t.Errorf("tags %v, were %v", after, tagsBefore)
	}
}

// An index goes with its platform images (and all their signatures); a
// kept index keeps its platform images.
func TestIndexWithPlatformImages(t *testing.T) {
	e := newEnv(t, false)
	keptIdx, keptPlatforms := e.index("multi")
	goneIdx, gonePlatforms := e.index("multi")
	e.apply(fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  annotations: {machineconfiguration.openshift.io/currentImage: %q}
`, e.name("node"), keptIdx.String()))
	res := e.prune(true)
	e.wantKept(res, keptIdx, "currentImage")
	for _, p := range keptPlatforms {
		e.wantKept(res, p, "platform image of the kept index")
	}
	e.wantDeleted(res, goneIdx)
	for _, p := range gonePlatforms {
		e.wantDeleted(res, p)
	}
	e.wantNothingDeleted()
}

// A base image (no io.oslayer.pool label) is never deleted, even found
// only through its signature and named by nothing.
func TestBaseNeverDeleted(t *testing.T) {
	e := newEnv(t, false)
	base := e.push("", true)
	res := e.prune(true)
	e.wantKept(res, base, "not an oslayer image")
}

// An image nothing dates stays in a pool with no build record unless
// DeleteUndated; a tag keeps the image it names.
func TestUndatedAndTagged(t *testing.T) {
	e := newEnv(t, false)
	tagged, undated := e.push("cli", true, "cli"), e.push("cli", true)
	res := e.prune(true, func(o *prune.Options) { o.Policy.DeleteUndated = false })
	e.wantKept(res, tagged, "tagged cli")
	e.wantKept(res, undated, "age unknown")
	if res.Deleted != 0 {
		t.Errorf("deleted %d", res.Deleted)
	}
	res = e.prune(true)
	e.wantKept(res, tagged, "tagged cli")
	e.wantDeleted(res, undated)
}

// index pushes a signed two-platform index of signed pool images.
func (e *env) index(pool string) (idx nameDigest, platforms []nameDigest) {
	e.t.Helper()
	var ix v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		img := image(e.t, pool)
		platforms = append(platforms, e.pushImage(img, pool, true))
		ix = mutate.AppendManifests(ix, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return e.pushImage(ix, pool, true), platforms
}

type nameDigest = name.Digest

// An image a tag moves to after the listing (a rebuild giving an older
// image's digest) stays: the tags are read again before deleting, and a
// DELETE by digest would take the tag with it.
func TestTagMovedAfterListingHonoured(t *testing.T) {
	e := newEnv(t, false)
	retagged, unused := e.push("worker", true), e.push("worker", true)
	res := e.prune(true, func(o *prune.Options) {
		o.AfterList = func(ctx context.Context) {
			desc, err := remote.Get(retagged)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Tag(e.repo.Tag("worker"), desc); err != nil {
				t.Fatal(err)
			}
		}
	})
	e.wantKept(res, retagged, "tagged worker since the listing")
	if s := e.status("worker"); s != 200 {
		t.Errorf("tag worker answers %d", s)
	}
	e.wantDeleted(res, unused)
	e.wantNothingDeleted()
}

// A reference to a digest this repository does not hold (a bare digest,
// an image deleted before) lists nothing and deletes nothing.
func TestReferenceToMissingImage(t *testing.T) {
	e := newEnv(t, false)
	kept := e.push("bootc", true)
	missing := "sha256:" + strings.Repeat("5a", 32)
	e.apply(fmt.Sprintf(`apiVersion: node.bootc.dev/v1alpha1
kind: BootcNode
metadata: {name: %s}
spec: {desiredImage: %q, desiredImageState: Booted}
status:
  rollback: {image: "%s@%s", imageDigest: %q}
`, e.name("node"), kept.String(), e.repo, missing, missing))
	for i := 0; i < 2; i++ {
		res := e.prune(true)
		e.wantKept(res, kept, "spec.desiredImage")
		if len(res.Images) != 1 || res.Deleted != 0 {
			t.Errorf("run %d: %v", i+1, digests(res))
		}
	}
}
