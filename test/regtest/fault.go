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
	"time"
)

// Fault is what a FaultProxy does with one request instead of forwarding
// it: answer with Status (and Header, e.g. Retry-After), or (Reset) drop
// the TCP connection with a reset before any response, or (Stall) accept
// the request and never answer until the client gives up or the test
// ends. Down additionally stops the proxy from accepting connections (they
// are refused) for that long, as a restarting registry does; the request
// itself is reset. The zero Fault forwards the request.
type Fault struct {
	Status int
	Header http.Header
	// Body, with Status, is the answer's body (default: a line of text);
	// a registry's error document, for instance.
	Body  string
	Reset bool
	Stall bool
	Down  time.Duration
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
	stop     chan struct{}
	srv      *http.Server
	l        net.Listener
	conns    map[net.Conn]bool
	rp       *httputil.ReverseProxy
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
	p := &FaultProxy{stop: make(chan struct{}), conns: map[net.Conn]bool{}, rp: httputil.NewSingleHostReverseProxy(u)}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ConnState: p.connState}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.l, p.Host = l, l.Addr().String()
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(func() {
		close(p.stop)
		p.mu.Lock()
		l := p.l
		p.l = nil
		p.mu.Unlock()
		if l != nil {
			l.Close()
		}
		_ = p.srv.Close()
	})
	return p
}

// serve answers r with the fault the test set for it, or passes it on
// upstream.
func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	f := p.fault
	p.mu.Unlock()
	var fault Fault
	if f != nil {
		fault = f(r)
	}
	switch {
	case fault.Down > 0:
		p.note(r, "down "+fault.Down.String())
		p.down(fault.Down)
		resetConn(w, r)
	case fault.Reset:
		p.note(r, "reset")
		resetConn(w, r)
	case fault.Stall:
		p.note(r, "stall")
		select {
		case <-r.Context().Done():
		case <-p.stop:
		}
	case fault.Status != 0:
		p.note(r, fmt.Sprint(fault.Status))
		writeStatus(w, r, fault)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// writeStatus answers with the fault's status, headers and body (or
// "injected failure").
func writeStatus(w http.ResponseWriter, r *http.Request, fault Fault) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	for k, v := range fault.Header {
		w.Header()[k] = v
	}
	if fault.Body != "" {
		w.WriteHeader(fault.Status)
		_, _ = io.WriteString(w, fault.Body)
		return
	}
	http.Error(w, "injected failure", fault.Status)
}

// resetConn reads what the client sent so far, then resets the
// connection.
func resetConn(w http.ResponseWriter, r *http.Request) {
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
}

// connState tracks the open connections.
func (p *FaultProxy) connState(c net.Conn, st http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch st {
	case http.StateNew:
		p.conns[c] = true
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// down closes the listener, so connections are refused, and listens again
// on the same address after d (or when the test ends).
func (p *FaultProxy) down(d time.Duration) {
	p.mu.Lock()
	l := p.l
	p.l = nil
	p.mu.Unlock()
	if l == nil {
		return // already down
	}
	l.Close()
	// A restarting registry drops the connections it had too.
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	go func() {
		select {
		case <-time.After(d):
		case <-p.stop:
			return
		}
		nl, err := net.Listen("tcp", p.Host)
		if err != nil {
			return // the port was taken meanwhile: stays down
		}
		p.mu.Lock()
		select {
		case <-p.stop:
			p.mu.Unlock()
			nl.Close()
			return
		default:
		}
		p.l = nl
		p.mu.Unlock()
		_ = p.srv.Serve(nl)
	}()
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

// Injected lists the faults injected so far ("METHOD PATH -> 503|reset|stall|down D").
func (p *FaultProxy) Injected() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.injected...)
}
