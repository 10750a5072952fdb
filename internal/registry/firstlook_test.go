package registry_test

import (
	"context"
	"errors"
	"net/http"
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

// frontCounts is a server in front of the in-memory registry that counts
// the pings it forwards and can fail the first look (status).
type frontCounts struct {
	pings  atomic.Int64
	status int
}

func (f *frontCounts) handler(t *testing.T) http.Handler {
	reg := regtest.Memory(t)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: reg.Host})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			f.pings.Add(1)
		}
		if f.status != 0 && r.Method == http.MethodHead {
			w.WriteHeader(f.status)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// TestFirstLookStandsForPing: the answer to an anonymous look at a
// manifest stands for the registry's ping in calls sharing Connections,
// over the scheme that answered (plain HTTP, or HTTPS for a loopback
// registry that speaks it); an answer no registry gives to a read (500)
// does not, and the ping is sent. Once the ping is known, and without
// shared Connections, nothing is sent.
func TestFirstLookStandsForPing(t *testing.T) {
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		tls       bool
		status    int
		wantPings int64
	}{
		{"plain HTTP", false, 0, 0},
		{"HTTPS", true, 0, 0},
		{"server error", false, http.StatusInternalServerError, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &frontCounts{}
			srv := httptest.NewUnstartedServer(f.handler(t))
			if c.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			host := srv.Listener.Addr().String()
			o := &registry.Options{Transport: srv.Client().Transport}
			ref, err := name.ParseReference(host + "/look/first:x")
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(ref, img, o.RemoteOptions(context.Background())...); err != nil {
				t.Fatal(err)
			}
			req, err := registry.NewFirstLook(context.Background(), host, "look/first", "x")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := o.FirstLook(req); !errors.Is(err, registry.ErrNoFirstLook) {
				t.Errorf("without shared connections: %v, want ErrNoFirstLook", err)
			}
			o.Shared = &registry.Connections{}
			f.status = c.status
			resp, err := o.FirstLook(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			f.status = 0
			want := http.StatusOK
			if c.status != 0 {
				want = c.status
			}
			if resp.StatusCode != want || (c.tls != (resp.Request.URL.Scheme == "https")) {
				t.Errorf("first look: %d over %s", resp.StatusCode, resp.Request.URL.Scheme)
			}
			f.pings.Store(0)
			if _, err := remote.Head(ref, o.RemoteOptions(context.Background())...); err != nil {
				t.Fatal(err)
			}
			if n := f.pings.Load(); n != c.wantPings {
				t.Errorf("%d pings after the first look, want %d", n, c.wantPings)
			}
			if _, err := o.FirstLook(req); !errors.Is(err, registry.ErrNoFirstLook) {
				t.Errorf("once the ping is known: %v, want ErrNoFirstLook", err)
			}
		})
	}
}
