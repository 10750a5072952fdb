package build_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestBuildResolvedAndRetag: Build builds the platforms a
// caller prepared (Prepared, in its order: each platform's base resolved
// and the pool rendered onto it), and gives the index a build that
// resolves and renders itself gives; Retag then moves another tag of the
// repository to that index with a look at the tag and one PUT, and
// refuses a build that was not tagged without sending anything.
func TestBuildResolvedAndRetag(t *testing.T) {
	r, _, baseRef := multiBase(t)
	proxy := regtest.NewProxy(t, r.Host)
	ctx := ctxT(t)
	baseRef = proxy.Host + strings.TrimPrefix(baseRef, r.Host)

	plain := multiRequest(t, baseRef, "arm64", "amd64")
	pub, err := publish.New(proxy.Host+"/pools/worker:plain", &registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := assemble.Build(ctx, plain, pub)
	if err != nil {
		t.Fatal(err)
	}

	// The caller's platforms (arm64 first, as the plain build) override
	// ArchAll, which would read the base's index: its order is amd64 first.
	all := multiRequest(t, baseRef, assemble.ArchAll)
	all.Flags = plain.Flags
	proxy.Reset()
	for _, arch := range []string{"arm64", "amd64"} {
		all.Prepared = append(all.Prepared, prepare(ctx, t, all, arch))
	}
	pub, err = publish.New(proxy.Host+"/pools/worker:resolved", &registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := assemble.Build(ctx, all, pub)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want.Digest || len(got.Platforms) != 2 || got.Platforms[0].Platform != "linux/arm64" {
		t.Errorf("resolved build: %s (%d platforms, first %s), want %s", got.Digest, len(got.Platforms), got.Platforms[0].Platform, want.Digest)
	}
	indexReads := 0
	for _, q := range proxy.Requests() {
		if q.Method == http.MethodGet && q.Path == "/v2/fcos/base/manifests/stable" {
			indexReads++
		}
	}
	// One per platform's base; none to list the platforms (ArchAll).
	if indexReads > 2 {
		t.Errorf("the base's index read %d times, want once per platform (2)", indexReads)
	}

	// Another tag of the repository moves to the index: nothing else.
	other, err := publish.New(proxy.Host+"/pools/worker:other", &registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Reset()
	moved, err := assemble.Retag(ctx, got, other)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []string
	for _, q := range proxy.Requests() {
		if q.Path != "/v2/" {
			reqs = append(reqs, fmt.Sprintf("%s %s %d", q.Method, q.Path, q.Status))
		}
	}
	wantReqs := []string{"HEAD /v2/pools/worker/manifests/other 404", "PUT /v2/pools/worker/manifests/other 201"}
	if !slices.Equal(reqs, wantReqs) {
		t.Errorf("Retag sent %v, want %v", reqs, wantReqs)
	}
	if !moved.Tagged || moved.Digest != got.Digest || moved.Target != proxy.Host+"/pools/worker:other" ||
		len(moved.Phases) != 1 || moved.Phases[0].Name != "tag" || len(moved.Platforms) != 2 || moved.Platforms[0].BytesUploaded != 0 {
		t.Errorf("Retag result: %+v", moved)
	}
	if d, err := remote.Head(ref(t, proxy.Host+"/pools/worker:other")); err != nil || d.Digest != got.Digest {
		t.Errorf("tag other: %v %v, want %s", d, err, got.Digest)
	}

	// A build that failed has no index to move a tag to.
	failed, err := assemble.Build(ctx, multiRequest(t, baseRef, "amd64", "s390x"), pub)
	if err == nil {
		t.Fatal("a build for a platform the base lacks succeeded")
	}
	proxy.Reset()
	if _, err := assemble.Retag(ctx, failed, other); err == nil {
		t.Error("Retag of a failed build moved the tag")
	}
	if n := len(proxy.Requests()); n != 0 {
		t.Errorf("Retag of a failed build sent %d requests", n)
	}
}

// prepare resolves and indexes req's base for arch and renders the pool
// onto it, as pipeline.Prepare does.
func prepare(ctx context.Context, t *testing.T, req assemble.Request, arch string) assemble.Input {
	t.Helper()
	b, err := assemble.ResolveBase(ctx, req.Base, req.Registry, arch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := assemble.IndexBase(ctx, b, assemble.IndexOptions{Registry: req.Registry}); err != nil {
		t.Fatal(err)
	}
	rreq := req.Render
	rreq.Base = b.Index.FS()
	rreq.BaseName = fmt.Sprintf("base %s (%s)", b.Ref, b.Digest)
	rd, err := render.Render(ctx, rreq)
	if err != nil {
		t.Fatal(err)
	}
	return assemble.Input{Platform: v1.Platform{OS: "linux", Architecture: arch}, Base: b, Rendered: rd}
}
