package publish_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
)

// inFlight is a reverse proxy that records the most requests it had under
// way at once.
type inFlight struct {
	now, most atomic.Int32
}

func (f *inFlight) start(t *testing.T, upstream string) string {
	u, _ := url.Parse("http://" + upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.now.Add(1)
		for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
		}
		defer f.now.Add(-1)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// Publishers of one run (shared Sessions, as a fleet's) send at most 64
// blob requests at once together, each image up to its own bound (32):
// four images of 60 base layers into four new repositories, at once,
// across a 20 ms round trip. On docker-registry: its answers (the mounts
// into new repositories) decide which requests are under way.
func TestRunBoundsBlobRequests(t *testing.T) {
	r := regtest.Start(t, regtest.Config{})
	var f inFlight
	lat := regtest.NewLatency(t, f.start(t, r.Host), 20*time.Millisecond)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(t, reg, lat.Host, mkLayers(t, "base", 60, 512))
	var sessions publish.Sessions
	var wg sync.WaitGroup
	f.most.Store(0)
	for i := range 4 {
		added := mkLayers(t, fmt.Sprintf("pool%d", i), 1, 500)
		b := builtAdding(t, mkImage(t, base, added...), added...)
		p := newPublisher(t, fmt.Sprintf("%s/pools/p%d:v1", lat.Host, i), reg, publish.WithSessions(&sessions))
		wg.Add(1)
		go func() {
			defer wg.Done()
			writeCommit(t, p, b)
		}()
	}
	wg.Wait()
	if m := f.most.Load(); m > 64+4 || m <= 32 {
		// 64 blob requests, and each image's own tag or manifest request
		t.Errorf("at most %d requests at once, want more than one image's 32 and at most 64 (+4)", m)
	}
}
