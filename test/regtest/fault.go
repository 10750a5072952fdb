package regtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Fault is what a FaultProxy does with one request instead of forwarding
// it: answer with Status, or (Reset) drop the TCP connection with a reset
// before any response. The zero Fault forwards the request.
type Fault struct {
	Status int
	Reset  bool
}

// FaultProxy is a reverse proxy on 127.0.0.1 that injects failures,
// including connection resets, which a Proxy's Fail cannot. Chain it in
// front of a Proxy to count what gets through.
type FaultProxy struct {
	// Host is "127.0.0.1:PORT" of the fault proxy: point clients here.
	Host string

	mu       sync.Mutex
	fault    func(r *http.Request) Fault
	injected []string
}

// NewFaultProxy starts a fault-injecting proxy to upstream ("HOST:PORT").
// The Host header is passed through, so registries build upload locations
// that point back at the fault proxy.
func NewFaultProxy(t testing.TB, upstream string) *FaultProxy {
	t.Helper()
	u, err := url.Parse("http://" + upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &FaultProxy{}
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		f := p.fault
		p.mu.Unlock()
		var fault Fault
		if f != nil {
			fault = f(r)
		}
		switch {
		case fault.Reset:
			p.note(r, "reset")
			// Read what the client sent so far, then reset the connection.
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			hj, ok := w.(http.Hijacker)
			if !ok {
				http.Error(w, "cannot hijack", http.StatusInternalServerError)
				return
			}
			conn, _, err := hj.Hijack()
			if err != nil {
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with RST, not FIN
			}
			conn.Close()
		case fault.Status != 0:
			p.note(r, fmt.Sprint(fault.Status))
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			http.Error(w, "injected failure", fault.Status)
		default:
			rp.ServeHTTP(w, r)
		}
	})
	p.Host = serveLoopback(t, srv)
	return p
}

// SetFault installs (or with nil removes) the fault function. It is called
// for every request, from the server's goroutines.
func (p *FaultProxy) SetFault(f func(r *http.Request) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

func (p *FaultProxy) note(r *http.Request, what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.injected = append(p.injected, fmt.Sprintf("%s %s -> %s", r.Method, r.URL.Path, what))
}

// Injected lists the faults injected so far ("METHOD PATH -> 503|reset").
func (p *FaultProxy) Injected() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.injected...)
}
