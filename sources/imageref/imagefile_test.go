package imageref_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sources/imageref"
	"github.com/oslayer/oslayer/test/regtest"
)

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func layer(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: e.typ, Linkname: e.link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testImage has a lower layer with the original files and an upper layer
// that overrides, deletes (whiteout) and hides (opaque dir) some of them.
func testImage(t *testing.T) v1.Image {
	lower := layer(t,
		entry{name: "kubelet", body: "kubelet v1", mode: 0o644},
		entry{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "bin/otelcol", body: "otelcol", mode: 0o750},
		entry{name: "./gone", body: "deleted above"},
		entry{name: "opq/b", body: "hidden by opaque"},
		entry{name: "dir/a", body: "a"},
		entry{name: "gonedir/x", body: "x"},
	)
	upper := layer(t,
		entry{name: "kubelet", body: "kubelet v2", mode: 0o755},
		entry{name: ".wh.gone", typ: tar.TypeReg},
		entry{name: ".wh.gonedir", typ: tar.TypeReg},
		entry{name: "opq/.wh..wh..opq", typ: tar.TypeReg},
		entry{name: "opq/c", body: "c"},
		entry{name: "link", typ: tar.TypeSymlink, link: "/kubelet"},
		entry{name: "hl-target", body: "hard", mode: 0o700},
		entry{name: "hl", typ: tar.TypeLink, link: "hl-target"},
	)
	img, err := mutate.AppendLayers(empty.Image, lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func push(t *testing.T, img v1.Image, ref string) v1.Hash {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuth(authn.Anonymous)); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The proxy counts what the reader asks for (blobs, requests), which
// does not depend on the registry's answers: the in-memory registry.
func TestReadFileFromRegistry(t *testing.T) {
	reg := regtest.Memory(t)
	proxy := regtest.NewProxy(t, reg.Host)
	ref := reg.Host + "/gardener-project/releases/hyperkube:v1.34.3"
	dig := push(t, testImage(t), ref)
	// The fixtures name europe-docker.pkg.dev: mirror it to the loopback
	// registry (through the counting proxy).
	opts := &registry.Options{
		Mirrors:  []registry.Mirror{{From: "europe-docker.pkg.dev", To: proxy.Host}},
		Keychain: authn.NewMultiKeychain(),
	}
	r := imageref.New(opts)
	ctx := context.Background()
	given := "europe-docker.pkg.dev/gardener-project/releases/hyperkube:v1.34.3"
	wantPinned := proxy.Host + "/gardener-project/releases/hyperkube@" + dig.String()

	cases := []struct {
		path, data string
		mode       uint32
		err        string
	}{
		{"/kubelet", "kubelet v2", 0o755, ""},                     // upper layer wins
		{"kubelet", "kubelet v2", 0o755, ""},                      // relative form
		{"/bin/otelcol", "otelcol", 0o750, ""},                    // only in the lower layer
		{"/dir/a", "a", 0o644, ""},                                // lower layer, untouched dir
		{"/opq/c", "c", 0o644, ""},                                // in the opaque dir's own layer
		{"/hl", "hard", 0o700, ""},                                // hard link in the same layer
		{"/gone", "", 0, "removed by a whiteout in layer 1"},      // .wh.gone
		{"/gonedir/x", "", 0, "removed by a whiteout in layer 1"}, // parent whited out
		{"/opq/b", "", 0, "removed by a whiteout in layer 1"},     // opaque dir above
		{"/missing", "", 0, "file not found in image"},
		{"/link", "", 0, `is a symbolic link to "/kubelet"`},
		{"/bin", "", 0, "bin is a directory"},
	}
	for _, c := range cases {
		data, mode, pinned, err := r.ReadFile(ctx, given, c.path)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), given) {
				t.Errorf("%s: error %v, want %q naming the image", c.path, err, c.err)
			}
			if strings.Contains(c.err, "not found") || strings.Contains(c.err, "whiteout") {
				if !errors.Is(err, imageref.ErrNotFound) {
					t.Errorf("%s: not ErrNotFound: %v", c.path, err)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.path, err)
			continue
		}
		if string(data) != c.data || mode != c.mode || pinned != wantPinned {
			t.Errorf("%s: got %q %04o %s, want %q %04o %s", c.path, data, mode, pinned, c.data, c.mode, wantPinned)
		}
	}
	// Every request went through the mirror (proxy); the original host was
	// never contacted (it is not reachable from tests anyway).
	if len(proxy.Requests()) == 0 {
		t.Fatal("no request reached the mirror")
	}

	// Cached: reading again, concurrently, fetches no blob.
	proxy.Reset()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if data, _, _, err := r.ReadFile(ctx, given, "/bin/otelcol"); err != nil || string(data) != "otelcol" {
				t.Errorf("cached read: %q %v", data, err)
			}
		}()
	}
	wg.Wait()
	if n := proxy.BlobGets(); n != 0 {
		t.Errorf("cached reads fetched %d blobs:\n%s", n, proxy.Dump())
	}
	if n := len(proxy.Requests()); n != 0 {
		t.Errorf("cached reads made %d requests:\n%s", n, proxy.Dump())
	}

	// Another reference to the same digest shares the file cache: only the
	// manifest is resolved, no layer is read.
	proxy.Reset()
	byDigest := "europe-docker.pkg.dev/gardener-project/releases/hyperkube@" + dig.String()
	if data, _, pinned, err := r.ReadFile(ctx, byDigest, "/kubelet"); err != nil || string(data) != "kubelet v2" || pinned != wantPinned {
		t.Errorf("by digest: %q %s %v", data, pinned, err)
	}
	if n := proxy.BlobGets(); n != 0 {
		t.Errorf("same digest, other reference: %d blob fetches:\n%s", n, proxy.Dump())
	}

	// A fresh reader has no cache.
	proxy.Reset()
	if _, _, _, err := imageref.New(opts).ReadFile(ctx, given, "/kubelet"); err != nil {
		t.Fatal(err)
	}
	if proxy.BlobGets() == 0 {
		t.Error("a fresh reader fetched no blob")
	}
}

func TestReadFileErrors(t *testing.T) {
	reg := regtest.Memory(t)
	ref := reg.Host + "/x/y:1"
	push(t, testImage(t), ref)
	ctx := context.Background()
	r := imageref.New(&registry.Options{Keychain: authn.NewMultiKeychain()}, imageref.WithMaxSize(5))
	if _, _, _, err := r.ReadFile(ctx, ref, "/kubelet"); err == nil || !strings.Contains(err.Error(), "kubelet is 10 bytes, over the limit of 5 bytes") {
		t.Errorf("size limit: %v", err)
	}
	if _, _, _, err := r.ReadFile(ctx, reg.Host+"/x/absent:1", "/kubelet"); err == nil || !strings.Contains(err.Error(), "x/absent:1") {
		t.Errorf("missing image: %v", err)
	}
	if _, _, _, err := r.ReadFile(ctx, ref, "/"); err == nil || !strings.Contains(err.Error(), "names the root") {
		t.Errorf("root: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, _, err := imageref.New(&registry.Options{Keychain: authn.NewMultiKeychain()}).ReadFile(cctx, ref, "/kubelet"); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestReadFileFromLayout reads from an OCI image layout ("oci:DIR:TAG").
func TestReadFileFromLayout(t *testing.T) {
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	img := testImage(t)
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "v1"})); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	data, mode, pinned, err := imageref.New(nil).ReadFile(context.Background(), "oci:"+dir+":v1", "/bin/otelcol")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "otelcol" || mode != 0o750 || pinned != "oci:"+dir+"@"+d.String() {
		t.Errorf("got %q %04o %s", data, mode, pinned)
	}
}
