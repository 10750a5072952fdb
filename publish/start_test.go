package publish_test

import (
	"testing"
	"time"

	"github.com/oslayer/oslayer/internal/registry"
)

// Start connects and looks at the tag while the image is still being
// built; the Write that follows begins with both: it sends no ping and
// no look at the tag of its own, so the build's requests are the same
// and the first two went before the image existed.
func TestStartBeforeWrite(t *testing.T) {
	_, px := startProxied(t)
	reg := &registry.Options{Retry: fastRetry, Jobs: 4}
	base := pushBase(t, reg, px.Host, mkLayers(t, "base", 3, 2048))
	b := built(t, mkImage(t, base, mkLayers(t, "pool", 1, 3000)...))
	p := newPublisher(t, px.Host+"/fcos/base:v1", reg)
	px.Reset()
	p.Start(ctx, px.Host+"/fcos/base:stable")
	for deadline := time.Now().Add(10 * time.Second); len(px.Requests()) < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := showKinds(kinds(px.Requests(), "v1")); got != "GET /v2/: 1\nHEAD manifest by tag: 1" {
		t.Fatalf("Start sent:\n%s\nwant a ping and a look at the tag", got)
	}
	writeCommit(t, p, b)
	got := kinds(px.Requests(), "v1")
	if got["GET /v2/"] != 1 || got["HEAD manifest by tag"] != 2 {
		t.Errorf("the write did not take what Start began:\n%s", showKinds(got))
	}
	wantTag(t, px.Host+"/fcos/base:v1", b)
}
