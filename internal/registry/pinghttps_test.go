package registry_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestSharedConnectionsTryHTTPSOnce: go-containerregistry pings a
// loopback registry over HTTPS first and falls back to plain HTTP; calls
// sharing Connections try HTTPS once per run, not once per repository
// (each try is a connection and a failed handshake).
func TestSharedConnectionsTryHTTPSOnce(t *testing.T) {
	reg := regtest.Memory(t)
	u, _ := url.Parse("http://" + reg.Host)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(u))
	srv.Listener = cl
	srv.Start()
	defer srv.Close()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	var refs []name.Reference
	for i := range 5 {
		ref, err := name.ParseReference(fmt.Sprintf("%s/ping/r%d:x", l.Addr(), i))
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img, (&registry.Options{}).RemoteOptions(context.Background())...); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	o := &registry.Options{Shared: &registry.Connections{}}
	cl.n.Store(0)
	for _, ref := range refs {
		// Another repository each time: a ping of its own.
		if _, err := remote.Head(ref, o.RemoteOptions(context.Background())...); err != nil {
			t.Fatal(err)
		}
	}
	// The plain HTTP connection the writes left open is reused; each
	// HTTPS try is a connection.
	if n := cl.n.Load(); n != 1 {
		t.Errorf("5 repositories read sharing connections opened %d connections, want 1 (HTTPS tried once)", n)
	}
}

// tlsHoldingListener holds each connection that opens with a TLS
// handshake (a client's HTTPS try at a plain HTTP server) until the
// server has answered a plain HTTP ping, or until hold has passed; it
// records which came first.
type tlsHoldingListener struct {
	net.Listener
	pinged      chan struct{}
	hold        time.Duration
	heldTooLong atomic.Bool
}

func (l *tlsHoldingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		first := make([]byte, 1)
		if _, err := io.ReadFull(c, first); err != nil {
			c.Close()
			continue
		}
		if first[0] != 0x16 { // not a TLS handshake record
			return &peekedConn{Conn: c, first: first}, nil
		}
		go func() {
			select {
			case <-l.pinged:
			case <-time.After(l.hold):
				l.heldTooLong.Store(true)
			}
			c.Close()
		}()
	}
}

// peekedConn gives back the byte Accept read.
type peekedConn struct {
	net.Conn
	first []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// TestHTTPPingGoesAhead: while go-containerregistry's HTTPS ping of a
// loopback registry is under way, the plain HTTP ping it falls back to
// is sent already, so the registry answers it before the HTTPS try has
// failed (here: the HTTPS connection is held until the HTTP ping came).
// Without it, the HTTP ping would wait for the HTTPS try to fail (or for
// go-containerregistry's 300 ms), and the listener's hold runs out.
func TestHTTPPingGoesAhead(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl := &tlsHoldingListener{Listener: l, pinged: make(chan struct{}), hold: 100 * time.Millisecond}
	var once sync.Once
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			once.Do(func() { close(hl.pinged) })
			return
		}
		http.NotFound(w, r)
	}))
	srv.Listener = hl
	srv.Start()
	defer srv.Close()
	ref, err := name.ParseReference(l.Addr().String() + "/ping/ahead:x")
	if err != nil {
		t.Fatal(err)
	}
	o := &registry.Options{Shared: &registry.Connections{}}
	_, _ = remote.Head(ref, o.RemoteOptions(context.Background())...)
	select {
	case <-hl.pinged:
	default:
		t.Fatal("the registry was never pinged over plain HTTP")
	}
	if hl.heldTooLong.Load() {
		t.Error("the plain HTTP ping came only after the HTTPS try gave up: it was not sent ahead")
	}
}
