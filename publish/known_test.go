package publish_test

import (
	"net/http"
	"testing"

	"github.com/oslayer/oslayer/internal/registry"
)

// A pool pushed with a tag into its base's own repository: the registry
// served the base's manifest from there, so every base blob is there; no
// request about a base blob, only the pool's own uploads (no check of
// those small blobs either), its manifest and its tag.
func TestRemoteTagInBaseRepositoryChecksNoBaseBlob(t *testing.T) {
	_, px := startProxied(t)
	const nBase, nNew = 40, 2
	baseLayers := mkLayers(t, "base", nBase, 2048)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(t, reg, px.Host, baseLayers)
	added := mkLayers(t, "pool", nNew, 3000)
	img := mkImage(t, base, added...)
	b := builtAdding(t, img, added...)
	p := newPublisher(t, px.Host+"/fcos/base:worker", reg)
	px.Reset()
	pub := writeCommit(t, p, b)
	got := kinds(px.Requests(), "worker")
	want := map[string]int{
		"GET /v2/":                1,
		"HEAD manifest by digest": 1,
		"POST upload":             nNew + 1,
		"PUT upload":              nNew + 1,
		"PUT manifest by digest":  1,
		"HEAD manifest by tag":    2, // Write looks at it first, Commit again
		"PUT manifest by tag":     1,
	}
	if showKinds(got) != showKinds(want) {
		t.Errorf("requests per kind:\n%s\nwant:\n%s\nall:\n%s", showKinds(got), showKinds(want), px.Dump())
	}
	if want := layersSize(t, baseLayers); pub.Skipped != want || pub.Mounted != 0 {
		t.Errorf("Skipped=%d Mounted=%d, want %d and 0", pub.Skipped, pub.Mounted, want)
	}
	wantTag(t, px.Host+"/fcos/base:worker", b)
	validImage(t, px.Host+"/fcos/base:worker")
}

// A base in another registry is never mounted (a mount only comes from the
// same registry): into a new repository each base layer is one POST and
// one PUT at the target, without a check or a mount attempt, and is read
// once from the base's registry (in memory: it only serves reads).
func TestRemoteBaseInAnotherRegistryUploadsInTwoRequests(t *testing.T) {
	_, src := memoryProxied(t)
	_, px := startProxied(t)
	const nBase = 20
	baseLayers := mkLayers(t, "base", nBase, 2048)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(t, reg, src.Host, baseLayers)
	added := mkLayers(t, "pool", 1, 3000)
	img := mkImage(t, base, added...)
	b := builtAdding(t, img, added...)
	p := newPublisher(t, px.Host+"/pools/worker:v1", reg)
	src.Reset()
	px.Reset()
	writeCommit(t, p, b)
	got := kinds(px.Requests(), "v1")
	want := map[string]int{
		"GET /v2/":                1,
		"HEAD manifest by digest": 1,
		"GET tags/list":           1,
		"POST upload":             nBase + 2,
		"PUT upload":              nBase + 2,
		"PUT manifest by digest":  1,
		"HEAD manifest by tag":    2, // Write looks at it first, Commit again
		"PUT manifest by tag":     1,
	}
	if showKinds(got) != showKinds(want) {
		t.Errorf("requests per kind at the target:\n%s\nwant:\n%s\nall:\n%s", showKinds(got), showKinds(want), px.Dump())
	}
	if n := count(src.Requests(), http.MethodGet, "/blobs/sha256:"); n != nBase {
		t.Errorf("base blob reads at the base's registry: %d, want %d:\n%s", n, nBase, src.Dump())
	}
	wantTag(t, px.Host+"/pools/worker:v1", b)
	validImage(t, px.Host+"/pools/worker:v1")
}
