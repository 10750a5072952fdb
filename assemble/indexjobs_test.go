package assemble_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// TestIndexReadsLayersAtTheRequestBound: the base's layers are read for
// its index as many at once as an image's blob requests go
// (registry.Options.Requests), not go-containerregistry's default of 4
// reads at once, which across a WAN made a 400-layer base 100 round
// trips. A proxy holds each blob read 20 ms and counts the reads under way.
func TestIndexReadsLayersAtTheRequestBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := regtest.Memory(t)
	img, err := synth.ChunkahBase(64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:next"); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://" + reg.Host)
	rp := httputil.NewSingleHostReverseProxy(u)
	var now, most atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			n := now.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			defer now.Add(-1)
		}
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	ro := &registry.Options{Requests: 16}
	base, err := assemble.ResolveBaseCached(ctx, strings.TrimPrefix(front.URL, "http://")+"/fcos/base:next", ro, "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := assemble.IndexBase(ctx, base, assemble.IndexOptions{Registry: ro}); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m < 12 || m > 16 {
		t.Errorf("at most %d layer reads at once, want up to the bound of 16", m)
	}
}
