package imageref_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sources/imageref"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// pushImage pushes layers (bottom first) to the loopback registry as
// REPO:1 and returns the reference.
func pushImage(t *testing.T, reg *regtest.Registry, repo string, layers ...v1.Layer) string {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/" + repo + ":1"
	push(t, img, ref)
	return ref
}

func reader(opts ...imageref.Option) *imageref.Reader {
	return imageref.New(&registry.Options{Keychain: authn.NewMultiKeychain()}, opts...)
}

// TestReadLikeARuntime: hostile images, built here and pushed to an
// in-memory registry, whose file differs between "first entry from the
// top" and what a runtime unpacks. Each case names what the runtime leaves at the path.
func TestReadLikeARuntime(t *testing.T) {
	reg := regtest.Memory(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		layers [][]entry
		path   string
		data   string
		mode   uint32
		err    string // substring; empty: data is wanted
	}{
		{"duplicate entry: the last wins", [][]entry{{
			{name: "kubelet", body: "first", mode: 0o644},
			{name: "kubelet", body: "last", mode: 0o755},
		}}, "/kubelet", "last", 0o755, ""},
		{"duplicate entry in an upper layer", [][]entry{
			{{name: "kubelet", body: "lower"}},
			{{name: "kubelet", body: "upper-1"}, {name: "kubelet", body: "upper-2"}},
		}, "/kubelet", "upper-2", 0o644, ""},
		{"parent replaced by a symlink above", [][]entry{
			{{name: "opt/bin/", typ: tar.TypeDir, mode: 0o755}, {name: "opt/bin/kubelet", body: "hidden"}},
			{{name: "opt/bin", typ: tar.TypeSymlink, link: "/usr/bin"}},
		}, "/opt/bin/kubelet", "", 0, "parent opt/bin is a symbolic link"},
		{"grandparent replaced by a symlink above", [][]entry{
			{{name: "opt/bin/kubelet", body: "hidden"}},
			{{name: "opt", typ: tar.TypeSymlink, link: "var/opt"}},
		}, "/opt/bin/kubelet", "", 0, "parent opt is a symbolic link"},
		{"parent replaced by a file above", [][]entry{
			{{name: "opt/bin/kubelet", body: "hidden"}},
			{{name: "opt/bin", body: "a file now"}},
		}, "/opt/bin/kubelet", "", 0, "replaces its parent opt/bin by a regular file"},
		{"parent replaced by a file later in the same layer", [][]entry{{
			{name: "opt/bin/kubelet", body: "gone"},
			{name: "opt/bin", body: "a file now"},
		}}, "/opt/bin/kubelet", "", 0, "replaces its parent opt/bin"},
		{"parent a directory again above: lower content merges", [][]entry{
			{{name: "opt/bin/kubelet", body: "kept"}},
			{{name: "opt/bin/", typ: tar.TypeDir, mode: 0o700}, {name: "opt/bin/other", body: "x"}},
		}, "/opt/bin/kubelet", "kept", 0o644, ""},
		{"opaque whiteout at the root", [][]entry{
			{{name: "kubelet", body: "hidden"}},
			{{name: ".wh..wh..opq", typ: tar.TypeReg}},
		}, "/kubelet", "", 0, "removed by a whiteout in layer 1"},
		{"opaque directory keeps its own layer's files", [][]entry{
			{{name: "d/kubelet", body: "hidden"}},
			{{name: "d/.wh..wh..opq", typ: tar.TypeReg}, {name: "d/kubelet", body: "new"}},
		}, "/d/kubelet", "new", 0o644, ""},
		{"whiteout then the directory again in one layer", [][]entry{
			{{name: "d/old", body: "hidden"}},
			{{name: ".wh.d", typ: tar.TypeReg}, {name: "d/", typ: tar.TypeDir, mode: 0o755}, {name: "d/new", body: "n"}},
		}, "/d/old", "", 0, "removed by a whiteout in layer 1"},
		{"hard link to an earlier copy of a rewritten file", [][]entry{{
			{name: "t", body: "one"},
			{name: "t", body: "two", mode: 0o700},
			{name: "h", typ: tar.TypeLink, link: "t"},
			{name: "t", body: "three"},
		}}, "/h", "two", 0o700, ""},
		{"entry below a file of the same layer", [][]entry{{
			{name: "opt", body: "file"},
			{name: "opt/kubelet", body: "x"},
		}}, "/opt/kubelet", "", 0, "a runtime cannot unpack this layer"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ls []v1.Layer
			for _, es := range c.layers {
				ls = append(ls, layer(t, es...))
			}
			ref := pushImage(t, reg, fmt.Sprintf("hostile/case%d", i), ls...)
			data, mode, _, err := reader().ReadFile(ctx, ref, c.path)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %q, %v; want an error with %q", data, err, c.err)
				}
				return
			}
			if err != nil || string(data) != c.data || mode != c.mode {
				t.Fatalf("got %q %04o %v, want %q %04o", data, mode, err, c.data, c.mode)
			}
		})
	}
}

// compressedLayer returns a layer whose blob is blob (already gzipped).
func compressedLayer(t *testing.T, blob []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(blob)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// zeroTar is a gzipped tar of one regular file name holding size zero
// bytes, written as a stream (never in memory uncompressed).
func zeroTar(t *testing.T, name string, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: size}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(tw, zeros{}, size); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// sparseTar is a tar with one PAX GNU sparse (format 0.1) entry: size
// logical bytes of which only data is stored. Go's tar writer cannot write
// sparse entries, so the PAX header block is patched in by hand.
func sparseTar(t *testing.T, name string, size int64, data []byte) []byte {
	t.Helper()
	rec := func(k, v string) string {
		s := " " + k + "=" + v + "\n"
		n := len(s) + 1
		for len(strconv.Itoa(n))+len(s) != n {
			n++
		}
		return strconv.Itoa(n) + s
	}
	pax := rec("GNU.sparse.size", fmt.Sprint(size)) + rec("GNU.sparse.numblocks", "1") +
		rec("GNU.sparse.map", fmt.Sprintf("0,%d", len(data)))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "PaxHeaders/" + name, Typeflag: tar.TypeReg, Size: int64(len(pax)), Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(pax)); err != nil {
		t.Fatal(err)
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data)), Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// Make the first header an extended header ('x') and fix its checksum.
	b[156] = 'x'
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b[:512] {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	// Prove the fixture: Go's reader sees a sparse file of size bytes.
	h, err := tar.NewReader(bytes.NewReader(b)).Next()
	if err != nil || h.Size != size || h.Name != name {
		t.Fatalf("sparse fixture: %+v %v", h, err)
	}
	return b
}

// TestHostileContentRefused: sparse entries, decompression bombs (also when
// the file wanted is elsewhere in the layer), the budget for all imageRef
// content of a reader, and the time bound. Each is refused with
// ErrRefused, and fast.
func TestHostileContentRefused(t *testing.T) {
	reg := regtest.Memory(t)
	ctx := context.Background()
	sparse := pushImage(t, reg, "hostile/sparse", synth.TarLayer(t, sparseTar(t, "kubelet", 900<<20, []byte("ELF"))))
	zeroBlob := zeroTar(t, "kubelet", 200<<20)
	t.Logf("200 MiB of zeros: a %d byte layer", len(zeroBlob))
	bomb := pushImage(t, reg, "hostile/bomb", compressedLayer(t, zeroBlob))
	bombElsewhere := pushImage(t, reg, "hostile/bomb-elsewhere",
		compressedLayer(t, zeroTar(t, "zeros", 200<<20)), layer(t, entry{name: "opt/kubelet", body: "fine"}))
	big := strings.Repeat("k", 600<<10)
	twoFiles := pushImage(t, reg, "hostile/two", layer(t, entry{name: "a", body: big}, entry{name: "b", body: big}))

	check := func(name string, r *imageref.Reader, ref, p, want string) {
		t.Helper()
		start := time.Now()
		data, _, _, err := r.ReadFile(ctx, ref, p)
		t.Logf("%s: %v in %.3fs", name, err, time.Since(start).Seconds())
		if !errors.Is(err, imageref.ErrRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ref) {
			t.Errorf("%s: got %d bytes, %v; want a refusal naming the image with %q", name, len(data), err, want)
		}
	}
	check("sparse entry", reader(), sparse, "/kubelet", "sparse tar entry")
	check("gzip bomb", reader(), bomb, "/kubelet", "decompression bomb")
	check("gzip bomb beside the file", reader(), bombElsewhere, "/kubelet", "decompression bomb")

	r := reader(imageref.WithBudget(1 << 20))
	if data, _, _, err := r.ReadFile(ctx, twoFiles, "/a"); err != nil || len(data) != len(big) {
		t.Fatalf("first file within the budget: %d %v", len(data), err)
	}
	// The same file again is cached and not charged twice.
	if _, _, _, err := r.ReadFile(ctx, twoFiles, "a"); err != nil || r.Used() != int64(len(big)) {
		t.Fatalf("cached read: used %d, %v", r.Used(), err)
	}
	check("budget", r, twoFiles, "/b", "budget for imageRef content")
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// The clock starts with the first read, not when the reader is made
	// (a build makes it before indexing its base).
	late := reader(imageref.WithTimeout(300 * time.Millisecond))
	time.Sleep(400 * time.Millisecond)
	if _, _, _, err := late.ReadFile(ctx, twoFiles, "/a"); err != nil {
		t.Errorf("first read after the timeout's length: %v", err)
	}
	stalled := regtest.Stalled(t) + "/x/hyperkube:v1"
	check("time bound", reader(imageref.WithTimeout(500*time.Millisecond)), stalled, "/kubelet", "took longer than the bound of 500ms")
}

// TestReadZstdLayer reads a file from a zstd-compressed layer, and refuses
// a zstd layer of zeros as a decompression bomb.
func TestReadZstdLayer(t *testing.T) {
	reg := regtest.Memory(t)
	tarOf := func(name string, body []byte) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	zstdLayer := func(tarBytes []byte) v1.Layer {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil },
			tarball.WithCompression(compression.ZStd), tarball.WithMediaType(types.OCILayerZStd))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		magic := make([]byte, 4)
		_, err = io.ReadFull(rc, magic)
		rc.Close()
		if err != nil || !bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
			t.Fatalf("not a zstd blob: %x %v", magic, err)
		}
		return l
	}
	ok := pushImage(t, reg, "zstd/ok", zstdLayer(tarOf("kubelet", []byte("zstd kubelet"))))
	if data, mode, _, err := reader().ReadFile(context.Background(), ok, "/kubelet"); err != nil || string(data) != "zstd kubelet" || mode != 0o755 {
		t.Fatalf("zstd layer: %q %04o %v", data, mode, err)
	}
	bomb := pushImage(t, reg, "zstd/bomb", zstdLayer(tarOf("kubelet", make([]byte, 100<<20))))
	if _, _, _, err := reader().ReadFile(context.Background(), bomb, "/kubelet"); !errors.Is(err, imageref.ErrRefused) || !strings.Contains(err.Error(), "decompression bomb") {
		t.Fatalf("zstd bomb: %v", err)
	}
}
