package publish_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
)

// kind names what a request to the registry does.
func kind(r regtest.Request, tag string) string {
	switch {
	case r.Path == "/v2/" || r.Path == "/v2":
		return r.Method + " /v2/"
	case strings.Contains(r.Path, "/manifests/sha256:"):
		return r.Method + " manifest by digest"
	case strings.HasSuffix(r.Path, "/manifests/"+tag):
		return r.Method + " manifest by tag"
	case r.Method == http.MethodPost && strings.Contains(r.Query, "mount="):
		return fmt.Sprintf("POST mount %d", r.Status)
	case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/blobs/uploads/"):
		return "POST upload"
	case strings.Contains(r.Path, "/blobs/uploads/"):
		return r.Method + " upload"
	case strings.Contains(r.Path, "/blobs/sha256:"):
		return r.Method + " blob"
	case strings.HasSuffix(r.Path, "/tags/list"):
		return r.Method + " tags/list"
	}
	return r.Method + " " + r.Path
}

// countQuery counts the requests of method whose query contains sub.
func countQuery(reqs []regtest.Request, method, sub string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == method && strings.Contains(r.Query, sub) {
			n++
		}
	}
	return n
}

func kinds(reqs []regtest.Request, tag string) map[string]int {
	m := map[string]int{}
	for _, r := range reqs {
		m[kind(r, tag)]++
	}
	return m
}

func showKinds(m map[string]int) string {
	var ks []string
	for k, n := range m {
		ks = append(ks, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(ks)
	return strings.Join(ks, "\n")
}

// A pool onto a 51-layer base in another repository of the registry, pushed
// into a new repository: one ping, a look at the tag (none yet), one
// manifest check, one look at the tag list (none: the repository is new, nothing in it needs a check),
// one mount request per base layer, an upload (POST, PUT) per new blob,
// the manifest by digest, then Commit checks the tag (another build may
// have moved it to the digest) and puts it.
func TestRemoteRequestsPerKind(t *testing.T) {
	_, px := startProxied(t)
	const nBase, nNew = 51, 2
	baseLayers := mkLayers(t, "base", nBase, 2048)
	reg := &registry.Options{Retry: fastRetry, Jobs: 4}
	base := pushBase(t, reg, px.Host, baseLayers)
	added := mkLayers(t, "pool", nNew, 3000)
	img := mkImage(t, base, added...)
	b := built(t, img)
	p := newPublisher(t, px.Host+"/pools/worker:v1", reg)
	px.Reset()
	pub := writeCommit(t, p, b)
	got := kinds(px.Requests(), "v1")
	want := map[string]int{
		"GET /v2/":                1,
		"HEAD manifest by digest": 1,
		"GET tags/list":           1,
		"POST mount 201":          nBase,
		"POST upload":             nNew + 1,
		"PUT upload":              nNew + 1,
		"PUT manifest by digest":  1,
		"HEAD manifest by tag":    2, // Write looks at it first, and again alongside the manifest's PUT
		"PUT manifest by tag":     1,
	}
	if showKinds(got) != showKinds(want) {
		t.Errorf("requests per kind:\n%s\nwant:\n%s\nall:\n%s", showKinds(got), showKinds(want), px.Dump())
	}
	// Each base blob is mounted once, without a check.
	for _, l := range baseLayers {
		d, _ := l.Digest()
		if n := count(px.Requests(), http.MethodHead, "/blobs/"+d.String()); n != 0 {
			t.Errorf("HEAD of base blob %s (%d times), want none", d, n)
		}
		if n := countQuery(px.Requests(), http.MethodPost, "mount="+url.QueryEscape(d.String())); n != 1 {
			t.Errorf("mounts of base blob %s: %d, want 1", d, n)
		}
	}
	if px.BlobGets() != 0 {
		t.Errorf("base blob downloads:\n%s", px.Dump())
	}
	if want := layersSize(t, baseLayers); pub.Mounted != want || pub.Skipped != want {
		t.Errorf("Mounted=%d Skipped=%d, want both %d", pub.Mounted, pub.Skipped, want)
	}
	if want := layersSize(t, added) + configSize(t, img) + manifestSize(t, img); pub.Uploaded != want {
		t.Errorf("Uploaded = %d, want %d", pub.Uploaded, want)
	}
	wantTag(t, px.Host+"/pools/worker:v1", b)

	// The unchanged rebuild with a fresh publisher: one ping and one look at
	// the tag, which names the image: nothing else.
	p2 := newPublisher(t, px.Host+"/pools/worker:v1", reg)
	px.Reset()
	writeCommit(t, p2, b)
	got = kinds(px.Requests(), "v1")
	want = map[string]int{"GET /v2/": 1, "HEAD manifest by tag": 1}
	if showKinds(got) != showKinds(want) {
		t.Errorf("rebuild requests per kind:\n%s\nwant:\n%s", showKinds(got), showKinds(want))
	}
}

// remounted wraps layers as remote layers of another repository, so a
// push tries to mount them from there.
func remounted(t *testing.T, from string, ls []v1.Layer) []v1.Layer {
	t.Helper()
	ref, err := name.ParseReference(from)
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Layer
	for _, l := range ls {
		if ml, ok := l.(*remote.MountableLayer); ok {
			l = ml.Layer
		}
		out = append(out, &remote.MountableLayer{Layer: l, Reference: ref})
	}
	return out
}

// A registry that answers a mount with an upload session (202: here the
// source repository does not have the blob, as a registry with mounting
// off answers every mount) is told apart at the first such answer: one
// warning naming the registry and the bytes, the blob goes into that
// session (no second POST, nothing deleted), and no later blob is mounted.
func TestRemoteRefusedMountUploads(t *testing.T) {
	_, px := startProxied(t)
	baseLayers := mkLayers(t, "base", 4, 4096)
	// One request at a time: the order of the answers is the blobs'.
	reg := &registry.Options{Retry: fastRetry, Jobs: 1, Requests: 1}
	base := pushBase(t, reg, px.Host, baseLayers)
	ls, err := base.Layers()
	if err != nil {
		t.Fatal(err)
	}
	// The last two layers claim to live in a repository that does not
	// have them.
	layers := append(append([]v1.Layer{}, ls[:2]...), remounted(t, px.Host+"/fcos/elsewhere:x", ls[2:])...)
	added := mkLayers(t, "pool", 1, 1000)
	img := mkImage(t, nil, append(layers, added...)...)
	b := built(t, img)
	var logs bytes.Buffer
	p := newPublisher(t, px.Host+"/pools/worker:v1", reg, publish.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	px.Reset()
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatalf("%v\n%s", err, px.Dump())
	}
	got := kinds(px.Requests(), "v1")
	want := map[string]int{
		// the tag: Write looks at it first, and again (for Commit)
		// alongside the manifest's PUT
		"GET /v2/": 1, "HEAD manifest by tag": 2, "HEAD manifest by digest": 1, "GET tags/list": 1,
		"POST mount 201": 2, "POST mount 202": 1,
		// the second refused layer, the new layer and the config
		"POST upload": 3,
		"PUT upload":  4,
		// the refused layers, read from the base repository
		"GET blob":               2,
		"PUT manifest by digest": 1,
	}
	if showKinds(got) != showKinds(want) {
		t.Errorf("requests per kind:\n%s\nwant:\n%s\nall:\n%s", showKinds(got), showKinds(want), px.Dump())
	}
	if n := strings.Count(logs.String(), "does not mount"); n != 1 || !strings.Contains(logs.String(), "registry="+px.Host) ||
		!strings.Contains(logs.String(), fmt.Sprintf("bytes=%d", layersSize(t, baseLayers[2:]))) {
		t.Errorf("want one warning naming the registry and the bytes of the layers to mount, got %d:\n%s", n, logs.String())
	}
	if want := layersSize(t, baseLayers[:2]); pub.Mounted != want || pub.Skipped != want {
		t.Errorf("Mounted=%d Skipped=%d, want both %d", pub.Mounted, pub.Skipped, want)
	}
	if want := layersSize(t, baseLayers[2:]) + layersSize(t, added) + configSize(t, img) + manifestSize(t, img); pub.Uploaded != want {
		t.Errorf("Uploaded = %d, want %d", pub.Uploaded, want)
	}
	commit(t, p, b, pub)
	wantTag(t, px.Host+"/pools/worker:v1", b)
}

// A 503 and a connection reset on mount requests are retried; every base
// layer ends up mounted, none downloaded.
func TestRemoteRetriesMount(t *testing.T) {
	_, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	const nBase = 5
	baseLayers := mkLayers(t, "base", nBase, 4096)
	reg := &registry.Options{Retry: fastRetry, Jobs: 2}
	base := pushBase(t, reg, fp.Host, baseLayers)
	img := mkImage(t, base, mkLayers(t, "pool", 1, 1000)...)
	b := built(t, img)
	var mounts atomic.Int32
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if isMount(r) {
			switch mounts.Add(1) {
			case 1:
				return regtest.Fault{Status: http.StatusServiceUnavailable}
			case 2:
				return regtest.Fault{Reset: true}
			}
		}
		return regtest.Fault{}
	})
	p := newPublisher(t, fp.Host+"/pools/worker:v1", reg)
	px.Reset()
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatalf("push with failing mounts: %v\ninjected: %v", err, fp.Injected())
	}
	if inj := fp.Injected(); len(inj) != 2 {
		t.Errorf("injected %d faults, want 2: %v", len(inj), inj)
	}
	if got := px.Mounts(); got != nBase {
		t.Errorf("mounts = %d, want %d:\n%s", got, nBase, px.Dump())
	}
	if got := px.BlobGets(); got != 0 {
		t.Errorf("blob downloads = %d, want 0:\n%s", got, px.Dump())
	}
	if want := layersSize(t, baseLayers); pub.Mounted != want {
		t.Errorf("Mounted = %d, want %d", pub.Mounted, want)
	}
}

// A mount that keeps failing (after the bounded retries) is given up: the
// blob is uploaded instead, as go-containerregistry does, and the log says
// so. The push succeeds.
func TestRemoteMountKeepsFailingUploads(t *testing.T) {
	r, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	const nBase = 2
	baseLayers := mkLayers(t, "base", nBase, 4096)
	reg := &registry.Options{Retry: fastRetry, Jobs: 1}
	base := pushBase(t, reg, fp.Host, baseLayers)
	added := mkLayers(t, "pool", 1, 1000)
	img := mkImage(t, base, added...)
	b := built(t, img)
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if isMount(r) {
			return regtest.Fault{Status: http.StatusInternalServerError}
		}
		return regtest.Fault{}
	})
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	p := newPublisher(t, fp.Host+"/pools/worker:v1", reg, publish.WithLogger(logger))
	px.Reset()
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatalf("%v\ninjected: %v", err, fp.Injected())
	}
	if inj := len(fp.Injected()); inj != nBase*fastRetry.Attempts {
		t.Errorf("%d mount attempts failed, want %d (%d per base layer)", inj, nBase*fastRetry.Attempts, fastRetry.Attempts)
	}
	if got := strings.Count(logs.String(), "mount failed, uploading instead"); got != nBase {
		t.Errorf("logged %d failed mounts, want %d:\n%s", got, nBase, logs.String())
	}
	if got := px.BlobGets(); got != nBase {
		t.Errorf("base blob downloads = %d, want %d:\n%s", got, nBase, px.Dump())
	}
	if got := px.Uploads(); got != nBase+len(added)+1 {
		t.Errorf("uploads = %d, want %d:\n%s", got, nBase+len(added)+1, px.Dump())
	}
	if pub.Mounted != 0 {
		t.Errorf("Mounted = %d, want 0", pub.Mounted)
	}
	if want := layersSize(t, baseLayers) + layersSize(t, added) + configSize(t, img) + manifestSize(t, img); pub.Uploaded != want {
		t.Errorf("Uploaded = %d, want %d", pub.Uploaded, want)
	}
	commit(t, p, b, pub)
	wantTag(t, r.Host+"/pools/worker:v1", b)
}

// A registry that cannot be reached fails the push at its first step, named
// in the error, and the progress says it failed.
func TestRemoteUnreachableRegistry(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	b := built(t, mkImage(t, nil, mkLayers(t, "l", 1, 100)...))
	var prog bytes.Buffer
	p := newPublisher(t, host+"/pools/worker:v1", &registry.Options{Retry: fastRetry}, publish.WithProgress(&prog))
	_, err = p.Write(ctx, b)
	if err == nil {
		t.Fatal("push to a closed port succeeded")
	}
	for _, want := range []string{"push " + host + "/pools/worker:v1", "write image by digest " + b.Digest.String(), ": connect: ", "refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !strings.Contains(prog.String(), "failed") {
		t.Errorf("progress does not say the push failed: %q", prog.String())
	}
}

// One Publisher serves several builds at once: each Write keeps its own
// transport for its own Commit.
func TestRemoteConcurrentBuildsOnePublisher(t *testing.T) {
	_, px := startProxied(t)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(t, reg, px.Host, mkLayers(t, "base", 3, 1024))
	p := newPublisher(t, px.Host+"/pools/worker:v1", reg)
	const n = 4
	var bs [n]*assemble.Built
	for i := range bs {
		bs[i] = built(t, mkImage(t, base, mkLayers(t, fmt.Sprintf("pool%d", i), 1, 500)...))
	}
	px.Reset()
	errs := make(chan error, n)
	for i := range bs {
		go func() {
			pub, err := p.Write(ctx, bs[i])
			if err == nil {
				err = p.Commit(ctx, bs[i], pub)
			}
			errs <- err
		}()
	}
	for range bs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := kinds(px.Requests(), "v1"); got["GET /v2/"] != n || got["HEAD manifest by tag"] != 2*n || got["PUT manifest by tag"] != n {
		t.Errorf("pings, tag checks and tag puts = %d, %d, %d; want %d, %d, %d", got["GET /v2/"], got["HEAD manifest by tag"], got["PUT manifest by tag"], n, 2*n, n)
	}
	tag := tagDigest(t, px.Host+"/pools/worker:v1")
	found := false
	for _, b := range bs {
		if got := tagDigest(t, px.Host+"/pools/worker@"+b.Digest.String()); got != b.Digest.String() {
			t.Errorf("manifest %s missing", b.Digest)
		}
		found = found || tag == b.Digest.String()
	}
	if !found {
		t.Errorf("tag names %q, none of the built digests", tag)
	}
}
