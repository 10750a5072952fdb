package publish_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// A registry that takes the manifest PUT and never answers fails the push
// within the deadline, with an error naming the registry, the request and
// the step, and no retry (each would cost the deadline again). Before,
// the push hung for ever.
func TestRemoteStalledManifestPut(t *testing.T) {
	_, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			return regtest.Fault{Stall: true}
		}
		return regtest.Fault{}
	})
	b := built(t, mkImage(t, nil, mkLayers(t, "l", 2, 3000)...))
	const deadline = 1500 * time.Millisecond
	p := newPublisher(t, fp.Host+"/pools/worker:v1", &registry.Options{Retry: fastRetry, Timeout: deadline})
	start := time.Now()
	done := make(chan error, 1)
	go func() { _, err := p.Write(ctx, b); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("push to a stalled registry still running after 30s (deadline %s); injected %v", deadline, fp.Injected())
	}
	took := time.Since(start)
	if err == nil {
		t.Fatal("push to a registry that never answers the manifest PUT succeeded")
	}
	for _, want := range []string{"put manifest", "registry " + fp.Host, "did not answer PUT /v2/pools/worker/manifests/", "(registry.timeout)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if n := len(fp.Injected()); n != 1 {
		t.Errorf("stalled %d times, want 1 (a stall is not retried): %v", n, fp.Injected())
	}
	t.Logf("stalled manifest PUT: failed after %v: %v", took.Round(time.Millisecond), err)
}

// A registry that accepts connections and never answers anything fails
// the first request (the ping) within the deadline.
func TestRemoteStalledRegistry(t *testing.T) {
	_, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	fp.SetFault(func(*http.Request) regtest.Fault { return regtest.Fault{Stall: true} })
	b := built(t, mkImage(t, nil, mkLayers(t, "l", 1, 1000)...))
	p := newPublisher(t, fp.Host+"/pools/worker:v1", &registry.Options{Retry: fastRetry, Timeout: time.Second})
	done := make(chan error, 1)
	go func() { _, err := p.Write(ctx, b); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connect") || !strings.Contains(err.Error(), "registry "+fp.Host+" did not answer GET /v2/") {
			t.Fatalf("push to a silent registry: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("push to a silent registry still running after 30s (deadline 1s)")
	}
}

// A registry restarting (its port refuses connections for half a second)
// in the middle of the blob uploads: refused connections are retried like
// resets and the push succeeds. Before, the first refused connection failed
// the push.
func TestRemoteRegistryRestart(t *testing.T) {
	r, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	var once sync.Once
	fp.SetFault(func(r *http.Request) regtest.Fault {
		f := regtest.Fault{}
		if r.Method == http.MethodPatch || r.Method == http.MethodPut {
			once.Do(func() { f = regtest.Fault{Down: 500 * time.Millisecond} })
		}
		return f
	})
	b := built(t, mkImage(t, nil, mkLayers(t, "l", 3, 5000)...))
	// The default backoff: 0.25s, 0.5s, 1s, 2s.
	p := newPublisher(t, fp.Host+"/pools/worker:v1", &registry.Options{Jobs: 2})
	start := time.Now()
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatalf("push across a 0.5s registry restart: %v\ninjected: %v", err, fp.Injected())
	}
	commit(t, p, b, pub)
	wantTag(t, r.Host+"/pools/worker:v1", b)
	t.Logf("push across a 0.5s restart: %v, injected %v", time.Since(start).Round(time.Millisecond), fp.Injected())
}

// A 429 with Retry-After: 2 on the manifest PUT: the retry comes no
// earlier than the registry asked (the backoff alone would retry after
// milliseconds), and the push succeeds.
func TestRemoteRetryAfter(t *testing.T) {
	r, px := startProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	var (
		n     atomic.Int32
		mu    sync.Mutex
		times []time.Time
	)
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/manifests/") {
			return regtest.Fault{}
		}
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		if n.Add(1) == 1 {
			return regtest.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}}
		}
		return regtest.Fault{}
	})
	b := built(t, mkImage(t, nil, mkLayers(t, "l", 1, 2000)...))
	p := newPublisher(t, fp.Host+"/pools/worker:v1", &registry.Options{Retry: fastRetry})
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatalf("push with a 429 Retry-After: %v", err)
	}
	commit(t, p, b, pub)
	wantTag(t, r.Host+"/pools/worker:v1", b)
	mu.Lock()
	defer mu.Unlock()
	if len(times) < 2 {
		t.Fatalf("manifest PUTs: %d", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < 1900*time.Millisecond {
		t.Errorf("retried %v after a 429 with Retry-After: 2", gap)
	} else {
		t.Logf("retried %v after a 429 with Retry-After: 2", gap.Round(time.Millisecond))
	}

	// The wait is bounded: Retry-After: 3600 waits MaxRetryAfter.
	n.Store(0)
	times = nil
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") && n.Add(1) == 1 {
			return regtest.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}}
		}
		return regtest.Fault{}
	})
	b2 := built(t, mkImage(t, nil, mkLayers(t, "m", 1, 2000)...))
	p2 := newPublisher(t, fp.Host+"/pools/worker:v2", &registry.Options{Retry: registry.Retry{Attempts: 3, Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond, MaxRetryAfter: 300 * time.Millisecond}})
	start := time.Now()
	if _, err := p2.Write(ctx, b2); err != nil {
		t.Fatalf("push with a 429 Retry-After: 3600 and MaxRetryAfter 300ms: %v", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Retry-After: 3600 made the push wait %v", took)
	}
}
