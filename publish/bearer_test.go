package publish_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// tokenRegistry is a registry with token authentication (as quay.io,
// ghcr.io and the CNCF registry with a token server have): it answers 401
// with a Bearer challenge unless the request carries a token granting the
// access it needs (pull for reads, push for writes, pull on the "from"
// repository of a mount), issues tokens for the scopes asked for at
// /token, and forwards what is allowed to upstream.
type tokenRegistry struct {
	Host string

	mu     sync.Mutex
	grants map[string]map[string]bool // token -> "repo:action"
	tokens int
	reqs   []regtest.Request
}

func newTokenRegistry(t *testing.T, upstream string) *tokenRegistry {
	t.Helper()
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: upstream})
	tr := &tokenRegistry{grants: map[string]map[string]bool{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			tr.mu.Lock()
			tr.tokens++
			tok := fmt.Sprintf("token-%d", tr.tokens)
			g := map[string]bool{}
			for _, s := range r.URL.Query()["scope"] {
				for _, one := range strings.Fields(s) {
					if parts := strings.Split(one, ":"); len(parts) == 3 && parts[0] == "repository" {
						for _, a := range strings.Split(parts[2], ",") {
							g[parts[1]+":"+a] = true
						}
					}
				}
			}
			tr.grants[tok] = g
			tr.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
			return
		}
		need, scope := tokenNeeds(r)
		tr.mu.Lock()
		g := tr.grants[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		ok := g != nil
		for _, n := range need {
			ok = ok && g[n]
		}
		status := 0
		if !ok {
			status = http.StatusUnauthorized
		}
		tr.reqs = append(tr.reqs, regtest.Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: status})
		tr.mu.Unlock()
		if !ok {
			ch := fmt.Sprintf(`Bearer realm="http://%s/token",service="oslayer-test"`, r.Host)
			if scope != "" {
				ch += fmt.Sprintf(`,scope=%q`, scope)
			}
			w.Header().Set("WWW-Authenticate", ch)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	tr.Host = l.Addr().String()
	return tr
}

// tokenNeeds returns the grants r needs and the challenge scope naming them.
func tokenNeeds(r *http.Request) ([]string, string) {
	p := strings.TrimPrefix(r.URL.Path, "/v2/")
	repo := ""
	for _, sep := range []string{"/blobs/", "/manifests/", "/tags/"} {
		if i := strings.LastIndex(p, sep); i > 0 {
			repo = p[:i]
			break
		}
	}
	if repo == "" {
		return nil, ""
	}
	action := "push"
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		action = "pull"
	}
	need := []string{repo + ":" + action}
	scopes := []string{"repository:" + repo + ":" + action}
	if from := r.URL.Query().Get("from"); from != "" && r.Method == http.MethodPost {
		need = append(need, from+":pull")
		scopes = append(scopes, "repository:"+from+":pull")
	}
	return need, strings.Join(scopes, " ")
}

func (tr *tokenRegistry) reset() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.tokens, tr.reqs = 0, nil
}

// counts returns the token requests, the pings and the other refused
// requests since the last reset.
func (tr *tokenRegistry) counts() (tokens, pings, refused int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, r := range tr.reqs {
		switch {
		case r.Path == "/v2/":
			pings++
		case r.Status == http.StatusUnauthorized:
			refused++
		}
	}
	return tr.tokens, pings, refused
}

// Against a token registry the push pings once and asks for one token
// that covers pushing to the target and pulling from the base repository
// (named by the build's base reference), so the mounts need no second
// token. Without that hint, the first mount is challenged and the token
// refreshed once with the scope the registry asked for.
func TestRemoteTokenRegistryOneToken(t *testing.T) {
	_, px := startProxied(t)
	tr := newTokenRegistry(t, px.Host)
	const nBase = 5
	baseLayers := mkLayers(t, "base", nBase, 2048)
	pushPlain(t, px.Host+"/fcos/base:stable", mkImage(t, nil, baseLayers...))
	baseRef := tr.Host + "/fcos/base:stable"
	for _, tc := range []struct {
		name                            string
		hint                            bool
		wantTokens, wantPings, wantDeny int
	}{
		{"base-reference", true, 1, 1, 0},
		{"no-base-reference", false, 2, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &registry.Options{Retry: fastRetry, Jobs: 1}
			base, _, err := reg.Image(ctx, baseRef, nil)
			if err != nil {
				t.Fatal(err)
			}
			img := mkImage(t, base, mkLayers(t, "pool-"+tc.name, 1, 1000)...)
			b := built(t, img)
			if tc.hint {
				b.Base.Ref = baseRef
			}
			p := newPublisher(t, tr.Host+"/pools/"+tc.name+":v1", reg)
			tr.reset()
			px.Reset()
			pub := writeCommit(t, p, b)
			tokens, pings, refused := tr.counts()
			if tokens != tc.wantTokens || pings != tc.wantPings || refused != tc.wantDeny {
				t.Errorf("tokens/pings/refused = %d/%d/%d, want %d/%d/%d:\n%s", tokens, pings, refused,
					tc.wantTokens, tc.wantPings, tc.wantDeny, px.Dump())
			}
			if got := px.Mounts(); got != nBase {
				t.Errorf("mounts = %d, want %d:\n%s", got, nBase, px.Dump())
			}
			if got := px.BlobGets(); got != 0 {
				t.Errorf("base blob downloads = %d, want 0:\n%s", got, px.Dump())
			}
			if want := layersSize(t, baseLayers); pub.Mounted != want {
				t.Errorf("Mounted = %d, want %d", pub.Mounted, want)
			}
			wantTag(t, px.Host+"/pools/"+tc.name+":v1", b)
		})
	}
}
