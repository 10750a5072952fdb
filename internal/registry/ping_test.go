package registry_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestSharedConnectionsPingOnce: calls sharing Connections ping a
// registry that asks for credentials once, whatever repositories they
// write and read, and authenticate with the challenge it answered; calls
// without them ping per repository as before.
func TestSharedConnectionsPingOnce(t *testing.T) {
	const user, pass = "oslayer", "Ping-0nce-Per-Run"
	r := regtest.Start(t, regtest.Config{User: user, Password: pass})
	px := regtest.NewProxy(t, r.Host)
	kc := authn.NewMultiKeychain(staticKeychain{&authn.Basic{Username: user, Password: pass}})
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	pings := func() int {
		n := 0
		for _, q := range px.Requests() {
			if q.Path == "/v2/" {
				n++
			}
		}
		return n
	}
	for _, shared := range []bool{true, false} {
		px.Reset()
		o := &registry.Options{Keychain: kc}
		if shared {
			o.Shared = &registry.Connections{}
		}
		for i := range 3 {
			ref, err := name.ParseReference(fmt.Sprintf("%s/ping/r%d:%t", px.Host, i, shared))
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(ref, img, o.RemoteOptions(context.Background())...); err != nil {
				t.Fatalf("shared %t: write %s: %v", shared, ref, err)
			}
			if _, err := remote.Head(ref, o.RemoteOptions(context.Background())...); err != nil {
				t.Fatalf("shared %t: head %s: %v", shared, ref, err)
			}
		}
		got := pings()
		switch {
		case shared && got != 1:
			t.Errorf("shared connections: %d pings for 3 repositories, want 1\n%s", got, px.Dump())
		case !shared && got < 3:
			t.Errorf("without shared connections: %d pings for 3 repositories, want one per call", got)
		}
	}
}

type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }
