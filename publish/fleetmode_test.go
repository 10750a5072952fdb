package publish_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
)

// The options a fleet sets: publishers of several images into one
// repository share one session (one ping), every blob goes in one PUT
// (a 503 on one is retried as a whole), the sole writer looks at the tag
// first and not again, and an unchanged image then costs one HEAD.
func TestFleetModeOptions(t *testing.T) {
	r, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	reg := &registry.Options{Retry: fastRetry, Jobs: 2}
	baseLayers := mkLayers(t, "base", 5, 2048)
	base := pushBase(t, reg, fp.Host, baseLayers)
	var puts atomic.Int32
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") && puts.Add(1) == 1 {
			return regtest.Fault{Status: http.StatusServiceUnavailable}
		}
		return regtest.Fault{}
	})
	var sessions publish.Sessions
	var known publish.KnownBlobs
	opts := []publish.Option{publish.WithSessions(&sessions), publish.WithKnownBlobs(&known), publish.WithSoleWriter(), publish.WithSingleRequestUploads()}
	imgs := []string{"a", "b", "c"}
	px.Reset()
	for _, name := range imgs {
		img := mkImage(t, base, mkLayers(t, "pool-"+name, 2, 3000)...)
		b := built(t, img)
		p := newPublisher(t, fp.Host+"/pools/one:"+name, reg, opts...)
		pub := writeCommit(t, p, b)
		if want := layersSize(t, addedLayers(t, img)) + configSize(t, img) + manifestSize(t, img); pub.Uploaded != want {
			t.Errorf("%s: uploaded %d, want %d (its layers, config and manifest; a failed attempt is not counted)", name, pub.Uploaded, want)
		}
		wantTag(t, r.Host+"/pools/one:"+name, b)
	}
	reqs := px.Requests()
	pings := 0
	for _, q := range reqs {
		if q.Path == "/v2/" {
			pings++
		}
	}
	if pings != 1 {
		t.Errorf("%d pings for 3 images into one repository, want 1:\n%s", pings, px.Dump())
	}
	if n := count(reqs, http.MethodPatch, "/blobs/uploads/"); n != 0 {
		t.Errorf("%d PATCH requests, want none", n)
	}
	if len(fp.Injected()) != 1 {
		t.Errorf("injected %v, want one failed blob PUT (retried)", fp.Injected())
	}
	for _, name := range imgs {
		if n := count(reqs, http.MethodHead, "/manifests/"+name); n != 1 {
			t.Errorf("tag %s looked at %d times, want once", name, n)
		}
	}
	// The base layers were mounted without a HEAD each: the repository
	// had no tag.
	for _, l := range baseLayers {
		d, _ := l.Digest()
		if n := count(reqs, http.MethodHead, "/pools/one/blobs/"+d.String()); n != 0 {
			t.Errorf("base layer %s checked %d times before its mount into a repository without tags", d, n)
		}
	}

	// Unchanged: one HEAD of the tag per image, nothing written.
	px.Reset()
	for _, name := range imgs {
		img := mkImage(t, base, mkLayers(t, "pool-"+name, 2, 3000)...)
		b := built(t, img)
		p := newPublisher(t, fp.Host+"/pools/one:"+name, reg, opts...)
		if pub := writeCommit(t, p, b); pub.Uploaded != 0 {
			t.Errorf("unchanged %s uploaded %d bytes", name, pub.Uploaded)
		}
	}
	if got := px.Requests(); len(got) != len(imgs) {
		t.Errorf("unchanged: %d requests for %d images, want one HEAD each:\n%s", len(got), len(imgs), px.Dump())
	}
}

// The sole writer of an image put by tag (a fleet's single-platform pool)
// looks at its tag only: a new image costs no HEAD of its digest, a changed
// one neither, and the tag ends on the image.
func TestSoleWriterByTagLooksAtTagOnly(t *testing.T) {
	r, px := startProxied(t)
	reg := &registry.Options{Retry: fastRetry, Jobs: 2}
	base := pushBase(t, reg, px.Host, mkLayers(t, "base", 2, 2048))
	opts := []publish.Option{publish.WithSoleWriter(), publish.WithManifestByTag(), publish.WithSingleRequestUploads()}
	for _, content := range []string{"new", "changed"} {
		img := mkImage(t, base, mkLayers(t, "pool-"+content, 2, 3000)...)
		b := built(t, img)
		px.Reset()
		writeCommit(t, newPublisher(t, px.Host+"/pools/sole:worker", reg, opts...), b)
		wantTag(t, r.Host+"/pools/sole:worker", b)
		reqs := px.Requests()
		if n := count(reqs, http.MethodHead, "/manifests/sha256:"); n != 0 {
			t.Errorf("%s image: %d HEADs of its digest, want none (the tag was looked at):\n%s", content, n, px.Dump())
		}
		if n := count(reqs, http.MethodHead, "/manifests/worker"); n != 1 {
			t.Errorf("%s image: tag looked at %d times, want once:\n%s", content, n, px.Dump())
		}
		if n := count(reqs, http.MethodPut, "/manifests/"); n != 1 {
			t.Errorf("%s image: %d manifest PUTs, want one (by tag):\n%s", content, n, px.Dump())
		}
	}
}

// addedLayers returns the layers img adds to the base (its last two).
func addedLayers(t *testing.T, img v1.Image) []v1.Layer {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return ls[len(ls)-2:]
}

// WithManifestByTag: Write uploads the blobs only (the image is not there
// by digest or tag until Commit), Commit puts the manifest once, by tag,
// and checks the digest the registry answers; an image there already is
// tagged as before.
func TestManifestByTag(t *testing.T) {
	r, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(t, reg, fp.Host, mkLayers(t, "base", 2, 2048))
	opts := []publish.Option{publish.WithSoleWriter(), publish.WithSingleRequestUploads(), publish.WithManifestByTag()}
	b := built(t, mkImage(t, base, mkLayers(t, "pool", 2, 3000)...))
	p := newPublisher(t, fp.Host+"/pools/bytag:worker", reg, opts...)
	px.Reset()
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(px.Requests(), http.MethodPut, "/manifests/"); n != 0 {
		t.Errorf("Write put %d manifests, want none", n)
	}
	if got := tagDigest(t, r.Host+"/pools/bytag@"+b.Digest.String()); got != "" {
		t.Errorf("the image is there by digest before Commit")
	}
	if got := tagDigest(t, r.Host+"/pools/bytag:worker"); got != "" {
		t.Errorf("the tag names %s before Commit", got)
	}
	px.Reset()
	commit(t, p, b, pub)
	reqs := px.Requests()
	if len(reqs) != 1 || count(reqs, http.MethodPut, "/manifests/worker") != 1 {
		t.Errorf("Commit sent %d requests, want one manifest PUT by tag:\n%s", len(reqs), px.Dump())
	}
	wantTag(t, r.Host+"/pools/bytag:worker", b)
	wantTag(t, r.Host+"/pools/bytag@"+b.Digest.String(), b)

	// Another tag on the same image: it is there by digest, the tag moves.
	p2 := newPublisher(t, fp.Host+"/pools/bytag:infra", reg, opts...)
	writeCommit(t, p2, b)
	wantTag(t, r.Host+"/pools/bytag:infra", b)

	// A registry that answers another digest for the manifest fails the
	// Commit.
	b3 := built(t, mkImage(t, base, mkLayers(t, "other", 1, 1000)...))
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/manifests/other") {
			return regtest.Fault{Status: http.StatusCreated, Header: http.Header{"Docker-Content-Digest": {"sha256:" + strings.Repeat("0", 64)}}}
		}
		return regtest.Fault{}
	})
	p3 := newPublisher(t, fp.Host+"/pools/bytag:other", reg, opts...)
	pub3, err := p3.Write(ctx, b3)
	if err != nil {
		t.Fatal(err)
	}
	if err := p3.Commit(ctx, b3, pub3); err == nil || !strings.Contains(err.Error(), "answered digest sha256:000") {
		t.Errorf("Commit with another digest answered: %v", err)
	}
}
