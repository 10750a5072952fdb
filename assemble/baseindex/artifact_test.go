package baseindex

import (
	"archive/tar"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/test/regtest"
)

// The artifact round-trips through a real registry under
// "sha256-<hex>.baseindex"; publishing it again writes nothing; an artifact
// that names another base is refused and the resolver rebuilds.
func TestArtifact(t *testing.T) {
	ctx := context.Background()
	reg := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, reg.Host)
	repo, err := name.NewRepository(proxy.Host + "/pools/worker")
	if err != nil {
		t.Fatal(err)
	}
	img := image(t, []te{{name: "usr/lib/systemd/system/a.service", data: unit, typ: tar.TypeReg}})
	ix := build(t, img)

	if got, err := Fetch(ctx, repo, ix.Base); got != nil || err != nil {
		t.Fatalf("fetch from an empty repository: %v %v", got, err)
	}
	if err := Publish(ctx, repo, ix); err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(repo.Tag(Tag(ix.Base)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(strings.NewReader(string(desc.Manifest)))
	if err != nil || m.ArtifactType != ArtifactType || m.Annotations[AnnotationBase] != ix.Base.String() || len(m.Layers) != 1 || m.Layers[0].MediaType != MediaType {
		t.Errorf("artifact manifest %+v %v", m, err)
	}
	if want, _ := (mustArtifact(t, ix)).Digest(); desc.Digest != want {
		t.Errorf("artifact digest %s, want %s", desc.Digest, want)
	}
	proxy.Reset()
	if err := Publish(ctx, repo, ix); err != nil {
		t.Fatal(err)
	}
	for _, r := range proxy.Requests() {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			t.Errorf("second publish wrote: %s %s", r.Method, r.Path)
		}
		if r.Method == http.MethodGet && r.Path != "/v2/" {
			t.Errorf("second publish read %s: the look at the tag is a HEAD", r.Path)
		}
	}
	got, err := Fetch(ctx, repo, ix.Base)
	if err != nil || got.Digest != ix.Digest {
		t.Fatalf("fetch: %v", err)
	}

	// Another base's index under this base's tag.
	other := build(t, image(t, []te{{name: "etc/passwd", data: "root:x:0:0::/root:/bin/bash\n", typ: tar.TypeReg}}))
	forged, err := Artifact(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(Tag(ix.Base)), forged); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(ctx, repo, ix.Base); err == nil || !strings.Contains(err.Error(), AnnotationBase) {
		t.Errorf("forged artifact: %v", err)
	}
	res, err := (&Resolver{Repository: &repo}).Resolve(ctx, img)
	if err != nil || res.Source != SourceBuilt || res.Index.Digest != ix.Digest || len(res.Warnings) != 1 {
		t.Errorf("resolve over a forged artifact: %+v %v", res, err)
	}

	// A repository the credentials cannot read: the base is read, without
	// a warning.
	proxy.SetFail(func(r *http.Request) int {
		if strings.Contains(r.URL.Path, "/manifests/") {
			return http.StatusForbidden
		}
		return 0
	})
	res, err = (&Resolver{Repository: &repo}).Resolve(ctx, img)
	if err != nil || res.Source != SourceBuilt || len(res.Warnings) != 0 {
		t.Errorf("resolve with a forbidden repository: %+v %v", res, err)
	}
}

func mustArtifact(t *testing.T, ix *Index) v1.Image {
	t.Helper()
	a, err := Artifact(ix)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
