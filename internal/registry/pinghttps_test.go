package registry_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

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
