package regtest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestStartAndProxy(t *testing.T) {
	r := Start(t, Config{User: "u", Password: "p"})
	p := NewProxy(t, r.Host)
	resp, err := http.Get("http://" + p.Host + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("want 401 from an htpasswd registry without credentials, got %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.Host+"/v2/", nil)
	req.SetBasicAuth("u", "p")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("want 200 with credentials, got %d", resp.StatusCode)
	}
	if got := len(p.Requests()); got != 2 {
		t.Fatalf("proxy saw %d requests, want 2:\n%s", got, p.Dump())
	}
}

func TestProxyCountsBytes(t *testing.T) {
	r := Start(t, Config{})
	p := NewProxy(t, r.Host)
	resp, err := http.Post("http://"+p.Host+"/v2/x/blobs/uploads/", "application/octet-stream", strings.NewReader("0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	up, down := p.Bytes()
	if up != 10 {
		t.Fatalf("uploaded bytes = %d, want 10", up)
	}
	if down < 0 {
		t.Fatalf("downloaded bytes = %d", down)
	}
	p.Reset()
	if up, down := p.Bytes(); up != 0 || down != 0 {
		t.Fatalf("after Reset: %d/%d", up, down)
	}
}

// TestMemory: the in-memory registry takes a push and gives the image back.
func TestMemory(t *testing.T) {
	reg := Memory(t)
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg.Host + "/a/b:t")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if d, err := got.Digest(); err != nil || d != want {
		t.Errorf("pulled %v (%v), pushed %v", d, err, want)
	}
}

// A request through the latency proxy takes at least a round trip, and
// the first on a connection one more (the handshake); the bytes arrive.
func TestLatencyDelays(t *testing.T) {
	const rtt = 40 * time.Millisecond
	srv := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("pong"))
	}))
	lp := NewLatency(t, srv, rtt)
	c := &http.Client{Transport: &http.Transport{}}
	for i, least := range []time.Duration{2 * rtt, rtt} {
		start := time.Now()
		resp, err := c.Get("http://" + lp.Host + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if took := time.Since(start); took < least || string(body) != "pong" {
			t.Errorf("request %d: %v, %q; want at least %v and pong", i+1, took, body, least)
		}
	}
}
