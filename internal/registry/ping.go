package registry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// pings remembers how registries answered the ping that opens every
// authenticated connection (an anonymous GET /v2/): 200, or 401 with the
// authentication challenge. go-containerregistry pings once per repository
// and per puller or pusher; calls sharing Connections ask each registry
// once per run and are answered from here after that. Failures and other
// answers are not remembered: the next ping goes to the registry, with one
// exception. go-containerregistry pings a registry it may reach over plain
// HTTP (loopback, private, --insecure-registry) over HTTPS first and falls
// back to HTTP when that fails; once the HTTP ping of a host was answered
// after its HTTPS ping failed, that failure is remembered too, so later
// calls do not try HTTPS again (across a WAN a new connection and its
// failed handshake cost each call two round trips).
type pings struct {
	mu sync.Mutex
	m  map[string]*pingAnswer
}

// pingAnswer is one registry's remembered answer; mu serialises the pings
// of a registry that has none yet, so concurrent callers send one.
type pingAnswer struct {
	mu     sync.Mutex
	known  bool
	status int
	header http.Header
	body   []byte
	// failed is the last failure of an HTTPS ping; refused is set once
	// the host's HTTP ping was answered after it (then failed answers).
	failed  error
	refused bool
}

func (p *pings) answer(key string) *pingAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*pingAnswer{}
	}
	a := p.m[key]
	if a == nil {
		a = &pingAnswer{}
		p.m[key] = a
	}
	return a
}

// refuseHTTPS remembers the failed HTTPS ping of host, if any: its HTTP
// ping was just answered.
func (p *pings) refuseHTTPS(host string) {
	a := p.answer("https://" + host)
	// The HTTPS ping's racer may still hold a.mu: do not wait for it.
	if !a.mu.TryLock() {
		return
	}
	defer a.mu.Unlock()
	if a.failed != nil && !a.known {
		a.refused = true
	}
}

// isPing reports whether req is a registry ping: GET /v2/ without
// credentials.
func isPing(req *http.Request) bool {
	return req.Method == http.MethodGet && req.URL.Path == "/v2/" && req.URL.RawQuery == "" &&
		req.Header.Get("Authorization") == ""
}

// maxPingBody bounds the body of a remembered answer.
const maxPingBody = 64 << 10

// pingTransport answers pings from p and sends every other request to
// inner. insecure reports the hosts listed as reached over plain HTTP.
type pingTransport struct {
	inner    http.RoundTripper
	p        *pings
	insecure func(host string) bool
}

func (t *pingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isPing(req) {
		return t.inner.RoundTrip(req)
	}
	a := t.p.answer(req.URL.Scheme + "://" + req.URL.Host)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.known {
		if req.URL.Scheme == "http" {
			// The fallback, answered by a ping sent ahead.
			t.p.refuseHTTPS(req.URL.Host)
		}
		return a.response(req), nil
	}
	if a.refused {
		return nil, a.failed
	}
	if req.URL.Scheme == "https" && t.mayFallBack(req.URL.Host) {
		t.pingHTTPAhead(req)
	}
	return t.ping(a, req)
}

// ping sends req, a ping a has no answer to, and remembers the answer.
func (t *pingTransport) ping(a *pingAnswer, req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	if err != nil && req.URL.Scheme == "https" {
		a.failed = err
	}
	if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized) {
		return resp, err
	}
	if req.URL.Scheme == "http" {
		t.p.refuseHTTPS(req.URL.Host)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPingBody))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	a.known, a.status, a.header, a.body = true, resp.StatusCode, resp.Header.Clone(), body
	return a.response(req), nil
}

// response is the remembered answer to req.
func (a *pingAnswer) response(req *http.Request) *http.Response {
	return &http.Response{
		Status:        http.StatusText(a.status),
		StatusCode:    a.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        a.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(a.body)),
		ContentLength: int64(len(a.body)),
		Request:       req,
	}
}

// mayFallBack reports whether go-containerregistry falls back to plain
// HTTP for host when its HTTPS ping fails: a host listed as insecure, or
// one its own heuristics (loopback, private addresses) reach over HTTP.
func (t *pingTransport) mayFallBack(host string) bool {
	return fallsBack(host, t.insecure)
}

// fallsBack reports whether go-containerregistry reaches host over plain
// HTTP when HTTPS fails: a host insecure lists, or one its own heuristics
// (loopback, private addresses) reach over HTTP.
func fallsBack(host string, insecure func(string) bool) bool {
	if insecure != nil && insecure(host) {
		return true
	}
	reg, err := name.NewRegistry(host)
	return err == nil && reg.Scheme() == "http"
}

// pingAheadTimeout bounds a ping sent ahead.
const pingAheadTimeout = 30 * time.Second

// pingHTTPAhead sends the plain HTTP ping go-containerregistry falls back
// to while its HTTPS ping (req) is under way, so that a registry served
// over plain HTTP answers the fallback at once: across a WAN the failed
// HTTPS try (a connection and a refused handshake) and the fallback's own
// connection and ping are four round trips in a row; ahead, they overlap.
// The answer is remembered like any ping's; it is given only to the
// fallback ping, which go-containerregistry sends only when HTTPS failed.
// Nothing is sent when the HTTP ping is answered already or under way.
func (t *pingTransport) pingHTTPAhead(req *http.Request) {
	a := t.p.answer("http://" + req.URL.Host)
	if !a.mu.TryLock() {
		return
	}
	if a.known {
		a.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), pingAheadTimeout)
	u := *req.URL
	u.Scheme = "http"
	ahead, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		a.mu.Unlock()
		return
	}
	go func() {
		defer a.mu.Unlock()
		defer cancel()
		if resp, err := t.ping(a, ahead); err == nil {
			resp.Body.Close()
		}
	}()
}
