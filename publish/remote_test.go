package publish_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
)

// A pool image whose base layers live in another repository of the same
// registry: the base layers are mounted (none downloaded), the new blobs
// uploaded, the manifest written by digest only, and the tag moves only on
// Commit.
func TestRemoteMountsBaseWritesByDigestCommitMovesTag(t *testing.T) {
	_, px := startProxied(t)
	const nBase = 6
	baseLayers := mkLayers(t, "base", nBase, 8192)
	pushPlain(t, px.Host+"/fcos/base:stable", mkImage(t, nil, baseLayers...))

	reg := &registry.Options{Retry: fastRetry, Jobs: 3}
	base, _, err := reg.Image(ctx, px.Host+"/fcos/base:stable", nil)
	if err != nil {
		t.Fatal(err)
	}
	added := mkLayers(t, "pool", 2, 3000)
	img := mkImage(t, base, added...)
	b := built(t, img)

	var prog, logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := newPublisher(t, px.Host+"/pools/worker:v1", reg, publish.WithProgress(&prog), publish.WithLogger(logger))
	px.Reset()
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	reqs := px.Requests()
	if got := px.BlobGets(); got != 0 {
		t.Errorf("base blob downloads = %d, want 0:\n%s", got, px.Dump())
	}
	if got := px.Mounts(); got != nBase {
		t.Errorf("cross-repo mounts = %d, want %d:\n%s", got, nBase, px.Dump())
	}
	if got := px.Uploads(); got != len(added)+1 {
		t.Errorf("blob uploads = %d, want %d (new layers + config):\n%s", got, len(added)+1, px.Dump())
	}
	if got := count(reqs, http.MethodPut, "/manifests/"+b.Digest.String()); got != 1 {
		t.Errorf("manifest PUTs by digest = %d, want 1:\n%s", got, px.Dump())
	}
	if got := count(reqs, http.MethodPut, "/manifests/v1"); got != 0 {
		t.Errorf("Write PUT the tag (%d times); only Commit may", got)
	}
	wantMounted := layersSize(t, baseLayers)
	if pub.Mounted != wantMounted || pub.Skipped != wantMounted {
		t.Errorf("Mounted=%d Skipped=%d, want both %d", pub.Mounted, pub.Skipped, wantMounted)
	}
	wantUp := layersSize(t, added) + configSize(t, img) + manifestSize(t, img)
	if pub.Uploaded != wantUp {
		t.Errorf("Uploaded = %d, want %d", pub.Uploaded, wantUp)
	}
	if want := px.Host + "/pools/worker@" + b.Digest.String(); pub.Ref != want || pub.Digest == nil || pub.Digest.String() != want {
		t.Errorf("Published.Ref = %q (Digest %v), want %q", pub.Ref, pub.Digest, want)
	}
	if got := strings.Count(logs.String(), "blob mounted"); got != nBase {
		t.Errorf("logged %d mounts, want %d:\n%s", got, nBase, logs.String())
	}
	if got := strings.Count(logs.String(), "blob uploaded"); got != len(added)+1 {
		t.Errorf("logged %d uploads, want %d:\n%s", got, len(added)+1, logs.String())
	}
	if s := prog.String(); !strings.Contains(s, "100%") || strings.Contains(s, "\r") {
		t.Errorf("plain progress should reach 100%% without \\r:\n%q", s)
	}
	// The progress says what moved: the new blobs uploaded, the base's
	// mounted.
	if s := lastLine(prog.String()); !strings.Contains(s, "100%") || strings.Contains(s, " 0 B uploaded") || !strings.Contains(s, "uploaded, ") || strings.Contains(s, " 0 B already there or mounted") {
		t.Errorf("progress of a push of new blobs onto a mounted base: %q", s)
	}
	// The same image again: nothing moves, and the progress says so.
	var again bytes.Buffer
	if _, err := newPublisher(t, px.Host+"/pools/worker:v1", reg, publish.WithProgress(&again)).Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if s := lastLine(again.String()); !strings.Contains(s, "100%") || !strings.Contains(s, " 0 B uploaded") {
		t.Errorf("progress of a push of an image the registry has: %q, want 0 B uploaded", s)
	}

	// Before Commit: the manifest exists by digest, the tag does not.
	if got := tagDigest(t, px.Host+"/pools/worker@"+b.Digest.String()); got != b.Digest.String() {
		t.Fatalf("manifest by digest: %q", got)
	}
	if got := tagDigest(t, px.Host+"/pools/worker:v1"); got != "" {
		t.Fatalf("tag exists before Commit: %s", got)
	}
	commit(t, p, b, pub)
	if got := tagDigest(t, px.Host+"/pools/worker:v1"); got != b.Digest.String() {
		t.Fatalf("tag after Commit = %q, want %s", got, b.Digest)
	}

	// A new image: Write leaves the tag on the old digest, Commit moves it.
	img2 := mkImage(t, base, mkLayers(t, "pool2", 1, 1000)...)
	b2 := built(t, img2)
	pub2, err := p.Write(ctx, b2)
	if err != nil {
		t.Fatal(err)
	}
	if got := tagDigest(t, px.Host+"/pools/worker:v1"); got != b.Digest.String() {
		t.Fatalf("tag moved by Write: %q, want still %s", got, b.Digest)
	}
	// Committing a digest the publisher did not write is refused.
	if err := p.Commit(ctx, b2, pub); err == nil {
		t.Fatal("Commit with a mismatched Published succeeded")
	}
	commit(t, p, b2, pub2)
	if got := tagDigest(t, px.Host+"/pools/worker:v1"); got != b2.Digest.String() {
		t.Fatalf("tag after second Commit = %q, want %s", got, b2.Digest)
	}
}

// Pushing the same image again sends nothing: the manifest exists by
// digest, so no blob is checked, mounted or uploaded.
func TestRemoteRepushUploadsNothing(t *testing.T) {
	_, px := startProxied(t)
	baseLayers := mkLayers(t, "base", 4, 4096)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(t, reg, px.Host, baseLayers)
	added := mkLayers(t, "pool", 2, 2000)
	img := mkImage(t, base, added...)
	b := built(t, img)
	p := newPublisher(t, px.Host+"/pools/worker:v1", reg)
	writeCommit(t, p, b)

	// Rebuild: a fresh publisher, the same image.
	p2 := newPublisher(t, px.Host+"/pools/worker:v1", reg)
	px.Reset()
	pub2, err := p2.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	reqs := px.Requests()
	if pub2.Uploaded != 0 {
		t.Errorf("Uploaded = %d, want 0", pub2.Uploaded)
	}
	wantSkipped := layersSize(t, baseLayers) + layersSize(t, added) + configSize(t, img)
	if pub2.Skipped != wantSkipped || pub2.Mounted != 0 {
		t.Errorf("Skipped=%d Mounted=%d, want %d and 0", pub2.Skipped, pub2.Mounted, wantSkipped)
	}
	for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodPost} {
		if got := count(reqs, m, "/v2/"); got != 0 {
			t.Errorf("%d %s requests on a rebuild, want 0:\n%s", got, m, px.Dump())
		}
	}
	if px.BlobGets() != 0 {
		t.Errorf("blob downloads on a rebuild:\n%s", px.Dump())
	}
	if up, _ := px.Bytes(); up != 0 {
		t.Errorf("%d request body bytes on a rebuild, want 0", up)
	}
	// The tag already names the digest: moving it is a no-op that sends nothing.
	px.Reset()
	commit(t, p2, b, pub2)
	if got := count(px.Requests(), http.MethodPut, "/v2/"); got != 0 {
		t.Errorf("%d PUT requests committing an unchanged tag, want 0:\n%s", got, px.Dump())
	}
	if up, _ := px.Bytes(); up != 0 {
		t.Errorf("%d request body bytes committing an unchanged tag, want 0", up)
	}
}

// A base on another registry cannot be mounted: its layers are streamed
// from the base registry to the target, once each. The base's registry
// only serves reads (in memory: what the client downloads does not depend
// on its answers); the target is docker-registry, whose answers decide
// the uploads counted.
func TestRemoteBaseOnOtherRegistryIsStreamed(t *testing.T) {
	_, p1 := memoryProxied(t)
	_, p2 := startProxied(t)
	baseLayers := mkLayers(t, "base", 3, 4096)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(t, reg, p1.Host, baseLayers)
	img := mkImage(t, base, mkLayers(t, "pool", 1, 1000)...)
	b := built(t, img)
	p1.Reset()
	p := newPublisher(t, p2.Host+"/pools/worker:v1", reg)
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := p1.BlobGets(); got != len(baseLayers) {
		t.Errorf("base blob downloads = %d, want %d:\n%s", got, len(baseLayers), p1.Dump())
	}
	if got := p2.Mounts(); got != 0 {
		t.Errorf("mounts across registries = %d, want 0", got)
	}
	if got := p2.Uploads(); got != len(baseLayers)+2 {
		t.Errorf("uploads = %d, want %d:\n%s", got, len(baseLayers)+2, p2.Dump())
	}
	if pub.Mounted != 0 || pub.Skipped != 0 {
		t.Errorf("Mounted=%d Skipped=%d, want 0", pub.Mounted, pub.Skipped)
	}
}

// 503, 429 and a connection reset on blob uploads (the PUT with the
// blob), and a 503 on the manifest PUT, are retried; the push succeeds and
// the image is intact.
func TestRemoteRetriesTransientFailures(t *testing.T) {
	r, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	var patches, manifests atomic.Int32
	fp.SetFault(func(r *http.Request) regtest.Fault {
		switch {
		case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/"):
			switch patches.Add(1) {
			case 1:
				return regtest.Fault{Status: http.StatusServiceUnavailable}
			case 2:
				return regtest.Fault{Status: http.StatusTooManyRequests}
			case 3:
				return regtest.Fault{Reset: true}
			}
		case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/"):
			if manifests.Add(1) == 1 {
				return regtest.Fault{Status: http.StatusServiceUnavailable}
			}
		}
		return regtest.Fault{}
	})
	layers := mkLayers(t, "l", 3, 5000)
	img := mkImage(t, nil, layers...)
	b := built(t, img)
	reg := &registry.Options{Retry: fastRetry, Jobs: 2}
	p := newPublisher(t, fp.Host+"/pools/worker:v1", reg)
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatalf("push with transient failures: %v\ninjected: %v", err, fp.Injected())
	}
	inj := fp.Injected()
	if len(inj) != 4 {
		t.Errorf("injected %d faults, want 4: %v", len(inj), inj)
	}
	if got := px.Uploads(); got != len(layers)+1 {
		t.Errorf("completed uploads = %d, want %d:\n%s", got, len(layers)+1, px.Dump())
	}
	wantUp := layersSize(t, layers) + configSize(t, img) + manifestSize(t, img)
	if pub.Uploaded != wantUp {
		t.Errorf("Uploaded = %d, want %d (failed attempts are not counted)", pub.Uploaded, wantUp)
	}
	commit(t, p, b, pub)
	wantTag(t, r.Host+"/pools/worker:v1", b)
}

// A permanent 500 fails the push after the bounded retries, names the
// step, and leaves neither the manifest nor the tag behind.
func TestRemotePermanentFailure(t *testing.T) {
	r, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") {
			return regtest.Fault{Status: http.StatusInternalServerError}
		}
		return regtest.Fault{}
	})
	layers := mkLayers(t, "l", 2, 3000)
	img := mkImage(t, nil, layers...)
	b := built(t, img)
	reg := &registry.Options{Retry: fastRetry, Jobs: 1}
	p := newPublisher(t, fp.Host+"/pools/worker:v1", reg)
	_, err := p.Write(ctx, b)
	if err == nil {
		t.Fatal("push through a registry that always fails succeeded")
	}
	for _, want := range []string{"write image by digest", "500", "PUT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	inj := len(fp.Injected())
	if inj < fastRetry.Attempts || inj > fastRetry.Attempts*(len(layers)+1) {
		t.Errorf("%d attempts failed, want between %d and %d (bounded retries)", inj, fastRetry.Attempts, fastRetry.Attempts*(len(layers)+1))
	}
	if got := count(px.Requests(), http.MethodPut, "/manifests/"); got != 0 {
		t.Errorf("manifest PUT after a failed upload:\n%s", px.Dump())
	}
	if got := tagDigest(t, r.Host+"/pools/worker:v1"); got != "" {
		t.Errorf("tag exists after a failed push: %s", got)
	}
	if got := tagDigest(t, r.Host+"/pools/worker@"+b.Digest.String()); got != "" {
		t.Errorf("manifest exists after a failed push: %s", got)
	}
}

// On a terminal the progress is one line redrawn with \r.
func TestRemoteProgressTerminal(t *testing.T) {
	r := regtest.Memory(t)
	img := mkImage(t, nil, mkLayers(t, "l", 2, 20000)...)
	b := built(t, img)
	var out bytes.Buffer
	p := newPublisher(t, r.Host+"/pools/worker:v1", &registry.Options{Retry: fastRetry}, publish.WithProgress(&out), publish.WithTerminal(true))
	if _, err := p.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "\r") || !strings.Contains(s, "100%") || !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("terminal progress: want \\r updates reaching 100%% and one final newline, got %q", s)
	}
	if !strings.Contains(s, ": done") {
		t.Errorf("terminal progress does not end with done: %q", s)
	}
}

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
