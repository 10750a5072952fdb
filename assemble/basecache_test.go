package assemble

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// A base given by digest is read from the registry once per cache: the
// next build with the same cache (a fresh process in CI keeps the cache
// directory) sends no request at all for it (the index is in the cache
// too), and builds the same image, whose base layers still name the base's
// repository (so the publisher mounts or knows them there). A cache file
// that does not match its digest is not used.
func TestBuildBaseManifestCached(t *testing.T) {
	ctx := context.Background()
	reg := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, reg.Host)
	img := synthBase(t)
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:1"); err != nil {
		t.Fatal(err)
	}
	bd, _ := img.Digest()
	baseRef := proxy.Host + "/fcos/base@" + bd.String()
	cache := t.TempDir()
	build := func() (*fakePub, int) {
		proxy.Reset()
		pub := &fakePub{}
		if _, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: (&spyRenderer{}).render(t), Base: baseRef,
			Registry: &registry.Options{}, Index: IndexOptions{CacheDir: cache}}, pub); err != nil {
			t.Fatal(err)
		}
		return pub, len(proxy.Requests())
	}
	first, _ := build()
	second, n := build()
	if n != 0 {
		t.Errorf("second build: %d requests, want none:\n%s", n, proxy.Dump())
	}
	if first.written.Digest != second.written.Digest {
		t.Errorf("digests differ: %s, %s", first.written.Digest, second.written.Digest)
	}
	ls, err := second.written.Image.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if ml, ok := ls[0].(*remote.MountableLayer); !ok || ml.Reference.Context().RepositoryStr() != "fcos/base" {
		t.Errorf("base layer %T does not name the base's repository", ls[0])
	}
	// A manifest file that is not what the digest names is not used.
	f := filepath.Join(cache, "bases", bd.Algorithm+"-"+bd.Hex+".manifest")
	raw, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, append(raw, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	third, n := build()
	if n == 0 || third.written.Digest != first.written.Digest {
		t.Errorf("with a corrupt cache file: %d requests (want some), digest %s (want %s)", n, third.written.Digest, first.written.Digest)
	}
}
