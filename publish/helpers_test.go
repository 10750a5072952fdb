package publish_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// fastRetry keeps retry tests quick.
var fastRetry = registry.Retry{Attempts: 5, Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond}

// mkLayer returns a gzip OCI layer holding one file whose content derives
// from seed (size bytes, incompressible-ish).
func mkLayer(t testing.TB, seed string, size int) v1.Layer {
	t.Helper()
	content := make([]byte, 0, size)
	h := sha256.Sum256([]byte(seed))
	for len(content) < size {
		h = sha256.Sum256(h[:])
		content = append(content, h[:]...)
	}
	content = content[:size]
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{
		{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)},
		{Name: "usr/share/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)},
	}
	for _, hd := range hdrs {
		if err := tw.WriteHeader(hd); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "usr/share/" + seed, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(size), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	return synth.TarLayer(t, b)
}

// mkImage builds an OCI image from layers (nil base: empty).
func mkImage(t testing.TB, base v1.Image, layers ...v1.Layer) v1.Image {
	t.Helper()
	if base == nil {
		base = mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
		var err error
		base, err = mutate.ConfigFile(base, &v1.ConfigFile{Architecture: "amd64", OS: "linux", RootFS: v1.RootFS{Type: "layers"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func mkLayers(t testing.TB, prefix string, n, size int) []v1.Layer {
	var ls []v1.Layer
	for i := 0; i < n; i++ {
		ls = append(ls, mkLayer(t, fmt.Sprintf("%s-%d", prefix, i), size+i*97))
	}
	return ls
}

func built(t testing.TB, img v1.Image) *assemble.Built {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return &assemble.Built{Image: img, Digest: d, Pool: "worker"}
}

// pushPlain writes img to ref with go-containerregistry (test set-up).
func pushPlain(t testing.TB, ref string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatalf("set-up push %s: %v", ref, err)
	}
}

// startProxied starts Debian's docker-registry and a recording proxy in
// front of it: for tests of what a push asks a registry, where what the
// registry answers decides what is sent next (blob checks, mounts,
// uploads, pings and tokens, tag looks), and of faults injected in front
// of it.
func startProxied(t testing.TB) (*regtest.Registry, *regtest.Proxy) {
	t.Helper()
	r := regtest.Start(t, regtest.Config{})
	return r, regtest.NewProxy(t, r.Host)
}

// memoryProxied is startProxied on the in-memory registry: for tests that
// need somewhere to push and pull, or count only what the client reads
// (blob downloads), which does not depend on the registry's answers.
func memoryProxied(t testing.TB) (*regtest.Registry, *regtest.Proxy) {
	t.Helper()
	r := regtest.Memory(t)
	return r, regtest.NewProxy(t, r.Host)
}

// isMount reports whether r asks the registry to mount a blob from another
// repository.
func isMount(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Query().Get("mount") != ""
}

// pushBase writes an image of layers to host/fcos/base:stable (test
// set-up, with opts) and returns it as reg reads it back, so its layers
// know the repository they can be mounted from.
func pushBase(t testing.TB, reg *registry.Options, host string, layers []v1.Layer, opts ...remote.Option) v1.Image {
	t.Helper()
	pushPlain(t, host+"/fcos/base:stable", mkImage(t, nil, layers...), opts...)
	base, _, err := reg.Image(ctx, host+"/fcos/base:stable", nil)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// newPublisher returns publish.New(target, reg, opts...) or fails the test.
func newPublisher(t testing.TB, target string, reg *registry.Options, opts ...publish.Option) *publish.Publisher {
	t.Helper()
	p, err := publish.New(target, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeCommit writes b through p and commits it, failing the test on
// either error.
func writeCommit(t testing.TB, p *publish.Publisher, b *assemble.Built) *assemble.Published {
	t.Helper()
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, p, b, pub)
	return pub
}

// commit commits pub of b through p, failing the test on error.
func commit(t testing.TB, p *publish.Publisher, b *assemble.Built, pub *assemble.Published) {
	t.Helper()
	if err := p.Commit(ctx, b, pub); err != nil {
		t.Fatal(err)
	}
}

// wantTag fails the test unless the tag ref names b's digest.
func wantTag(t testing.TB, ref string, b *assemble.Built, opts ...remote.Option) {
	t.Helper()
	if got := tagDigest(t, ref, opts...); got != b.Digest.String() {
		t.Fatalf("tag = %q, want %s", got, b.Digest)
	}
}

// tagDigest returns the digest ref's tag points to, or "" when it does
// not exist.
func tagDigest(t testing.TB, ref string, opts ...remote.Option) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(r, opts...)
	if err != nil {
		if strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "MANIFEST_UNKNOWN") || strings.Contains(err.Error(), "NAME_UNKNOWN") {
			return ""
		}
		t.Fatalf("HEAD %s: %v", ref, err)
	}
	return d.Digest.String()
}

func layersSize(t testing.TB, ls []v1.Layer) int64 {
	var n int64
	for _, l := range ls {
		s, err := l.Size()
		if err != nil {
			t.Fatal(err)
		}
		n += s
	}
	return n
}

func configSize(t testing.TB, img v1.Image) int64 {
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Config.Size
}

func manifestSize(t testing.TB, img v1.Image) int64 {
	b, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b))
}

// count counts requests of method whose path contains sub.
func count(reqs []regtest.Request, method, sub string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == method && strings.Contains(r.Path, sub) {
			n++
		}
	}
	return n
}

var ctx = context.Background()
