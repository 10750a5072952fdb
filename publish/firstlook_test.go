package publish_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// Without credentials for the target, the look at the tag that Start
// sends stands for the registry's ping: a registry that answers it (an
// open one) is not pinged and the look is not sent again; one that asks
// for a token (401, its challenge) is not pinged either, and the look goes
// again with the token; with credentials the registry is pinged first, as
// go-containerregistry does, since only the ping's challenge says how
// writes authenticate. Every push ends with the tag on the image.
func TestStartLooksInPlaceOfPing(t *testing.T) {
	const user, pass = "oslayer", "Look-F1rst"
	open := func(t *testing.T) (string, string, []remote.Option, *registry.Options, func() []regtest.Request) {
		_, px := memoryProxied(t)
		return px.Host, px.Host, nil, &registry.Options{}, px.Requests
	}
	token := func(t *testing.T) (string, string, []remote.Option, *registry.Options, func() []regtest.Request) {
		_, px := memoryProxied(t)
		tr := newTokenRegistry(t, px.Host)
		return tr.Host, px.Host, nil, &registry.Options{}, func() []regtest.Request {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			return append([]regtest.Request(nil), tr.reqs...)
		}
	}
	basic := func(t *testing.T) (string, string, []remote.Option, *registry.Options, func() []regtest.Request) {
		regtest.Require(t, "docker-registry")
		r := regtest.Start(t, regtest.Config{User: user, Password: pass})
		px := regtest.NewProxy(t, r.Host)
		kc := authn.NewMultiKeychain(staticKeychain{&authn.Basic{Username: user, Password: pass}})
		return px.Host, px.Host, []remote.Option{remote.WithAuthFromKeychain(kc)}, &registry.Options{Keychain: kc}, px.Requests
	}
	for _, c := range []struct {
		name  string
		start func(*testing.T) (host, direct string, opts []remote.Option, reg *registry.Options, reqs func() []regtest.Request)
		pings int
		looks int // the look Start sends (twice with a token) and Commit's
	}{
		{"open registry", open, 0, 2},
		{"token registry", token, 0, 3},
		{"credentials", basic, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			host, direct, opts, reg, reqs := c.start(t)
			reg.Shared, reg.Retry = &registry.Connections{}, fastRetry
			pushPlain(t, direct+"/fcos/base:stable", mkImage(t, nil, mkLayers(t, "base", 2, 1024)...), opts...)
			base, _, err := reg.Image(ctx, host+"/fcos/base:stable", nil)
			if err != nil {
				t.Fatal(err)
			}
			b := built(t, mkImage(t, base, mkLayers(t, "pool", 1, 1000)...))
			reg.Shared = &registry.Connections{} // the base's read pinged: a new run
			p := newPublisher(t, host+"/fcos/base:v1", reg)
			before := len(reqs())
			p.Start(ctx, host+"/fcos/base:stable")
			writeCommit(t, p, b)
			got := kinds(reqs()[before:], "v1")
			if pings, looks := got["GET /v2/"], got["HEAD manifest by tag"]; pings != c.pings || looks != c.looks {
				t.Errorf("%d pings and %d looks at the tag, want %d and %d:\n%s", pings, looks, c.pings, c.looks, showKinds(got))
			}
			wantTag(t, direct+"/fcos/base:v1", b, opts...)
		})
	}
}

// A target registry that accepts connections and never answers fails the
// look Start sends in place of the ping once, within the deadline: no
// ping follows it (each would cost the deadline again), and the error
// names the registry and the request.
func TestStartLookStalled(t *testing.T) {
	_, px := memoryProxied(t)
	fp := regtest.NewFaultProxy(t, px.Host)
	fp.SetFault(func(*http.Request) regtest.Fault { return regtest.Fault{Stall: true} })
	b := built(t, mkImage(t, nil, mkLayers(t, "l", 1, 1000)...))
	reg := &registry.Options{Retry: fastRetry, Timeout: time.Second, Shared: &registry.Connections{}}
	p := newPublisher(t, fp.Host+"/pools/worker:v1", reg)
	p.Start(ctx, "")
	_, err := p.Write(ctx, b)
	if err == nil || !strings.Contains(err.Error(), "registry "+fp.Host+" did not answer HEAD /v2/pools/worker/manifests/v1") {
		t.Fatalf("push to a silent registry: %v", err)
	}
	if got := fp.Injected(); len(got) != 1 {
		t.Errorf("stalled %d requests, want the look alone: %v", len(got), got)
	}
}

type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }
