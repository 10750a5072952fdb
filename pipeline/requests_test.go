package pipeline_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// requestKinds names what each request did (the manifest's by tag or by
// digest, blobs, uploads) and counts them, sorted, one per line.
func requestKinds(reqs []regtest.Request) string {
	return strings.Join(regtest.Tally(reqs, requestKind), "\n")
}

func requestKind(r regtest.Request) string {
	switch {
	case r.Path == "/v2/":
		return r.Method + " /v2/"
	case strings.HasSuffix(r.Path, ".rec"):
		return r.Method + " record"
	case strings.Contains(r.Path, "/manifests/sha256:"):
		return r.Method + " manifest by digest"
	case strings.Contains(r.Path, "/manifests/"):
		return r.Method + " manifest by tag"
	case strings.Contains(r.Query, "mount="):
		return r.Method + " mount"
	case strings.Contains(r.Path, "/blobs/uploads/"):
		return r.Method + " upload"
	case strings.Contains(r.Path, "/blobs/"):
		return r.Method + " blob"
	}
	return r.Method + " " + r.Path
}

// wanBuild is a base in Debian's docker-registry behind a counting proxy,
// and builds of pools onto it by digest with oslayer build's policies
// (the written image read back, the base index published).
type wanBuild struct {
	t     *testing.T
	px    *regtest.Proxy
	base  string
	dir   string
	cache string
	n     int
}

func newWANBuild(t *testing.T) *wanBuild {
	regtest.Require(t, "docker-registry")
	reg := regtest.Start(t, regtest.Config{Quiet: true})
	px := regtest.NewProxy(t, reg.Host)
	img, err := synth.ChunkahBase(8)
	if err != nil {
		t.Fatal(err)
	}
	d, err := synth.Push(context.Background(), img, reg.Host+"/fcos/base:next")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &wanBuild{t: t, px: px, base: "/fcos/base@" + d.DigestStr(), dir: dir, cache: filepath.Join(dir, "cache")}
}

// build builds pool (its content: the pool's name in a file) into tag of
// the base's repository through host (the counting proxy, or a proxy in
// front of it) and returns the requests the registry saw.
func (w *wanBuild) build(host, pool, tag string) []regtest.Request {
	w.t.Helper()
	osc := filepath.Join(w.dir, pool+".yaml")
	files := "  - path: /etc/oslayer/pool\n    permissions: 420\n    content:\n      inline:\n        data: " + pool + "\n"
	if err := os.WriteFile(osc, []byte(synth.OSCFiles(files)), 0o644); err != nil {
		w.t.Fatal(err)
	}
	spec := pipeline.Spec{Inputs: pipeline.Inputs{Pool: pool, OSCs: []string{osc}, Epoch: time.Unix(1700000000, 0)},
		Base: host + w.base, Target: host + "/fcos/base:" + tag, Registry: &registry.Options{}, IndexCacheDir: w.cache}
	p, err := pipeline.New(spec, pipeline.Env{Version: "test", ReadBack: true, PublishBaseIndex: true})
	if err != nil {
		w.t.Fatal(err)
	}
	w.px.Reset()
	if _, err := p.Run(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	return w.px.Requests()
}

// TestBuildRequestsIntoBaseRepository: a changed pool into a new tag of
// the base's own repository, on a base given by digest whose index is
// cached, as oslayer build runs it, costs at the registry a look at the
// tag (anonymous, in place of the ping: the registry needs no
// credentials; and one more alongside the manifest's PUT, before the tag
// moves), one look for the image by digest, a POST and a PUT per new blob
// (the config and the added layers; no request about a base blob: the
// base's manifest in that repository proves them), the manifest by
// digest, the build record (not looked for first: the image was not
// there) and the manifest by tag: 12 for 3 new blobs. Nothing is read
// back: the registry answered the manifest's PUT with its digest. No
// call pings. An unchanged rebuild costs the look at the tag.
func TestBuildRequestsIntoBaseRepository(t *testing.T) {
	w := newWANBuild(t)
	w.build(w.px.Host, "first", "first") // indexes the base (cached)
	reqs := w.build(w.px.Host, "changed", "changed")
	want := strings.Join([]string{
		"HEAD manifest by digest: 1",
		"HEAD manifest by tag: 2",
		"POST upload: 3",
		"PUT manifest by digest: 1",
		"PUT manifest by tag: 1",
		"PUT record: 1",
		"PUT upload: 3",
	}, "\n")
	if got := requestKinds(reqs); got != want {
		t.Errorf("changed pool: %d requests:\n%s\nwant:\n%s\nall:\n%s", len(reqs), got, want, w.px.Dump())
	}
	reqs = w.build(w.px.Host, "changed", "changed")
	if got, want := requestKinds(reqs), "HEAD manifest by tag: 1"; got != want {
		t.Errorf("unchanged rebuild:\n%s\nwant:\n%s", got, want)
	}
}

// TestBuildReadsBackWhatWasNotProven: a registry whose answer to the
// manifest's PUT names no digest (a proxy in front of it drops the
// header) proves nothing: the written half of preflight reads the image
// back by digest (its manifest and config) before the tag moves.
func TestBuildReadsBackWhatWasNotProven(t *testing.T) {
	w := newWANBuild(t)
	u, _ := url.Parse("http://" + w.px.Host)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodPut && strings.Contains(r.Request.URL.Path, "/manifests/") {
			r.Header.Del("Docker-Content-Digest")
		}
		return nil
	}
	front := httptest.NewServer(rp)
	defer front.Close()
	host := strings.TrimPrefix(front.URL, "http://")
	w.build(host, "first", "first")
	reqs := w.build(host, "changed", "changed")
	got := requestKinds(reqs)
	for _, read := range []string{"GET manifest by digest: 1", "GET blob: 1"} {
		if !strings.Contains(got, read) {
			t.Errorf("no read-back (%s) of an image whose PUT proved nothing:\n%s", read, got)
		}
	}
}
