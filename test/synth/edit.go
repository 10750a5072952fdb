package synth

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WithConfig returns img with a copy of its config changed by edit.
func WithConfig(t testing.TB, img v1.Image, edit func(*v1.ConfigFile)) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	edit(cf)
	out, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TarLayer returns an OCI gzip layer of the uncompressed tar bytes.
func TarLayer(t testing.TB, tarBytes []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// FileIndex returns an OCI index with one image per architecture (in the
// order given), each of one layer holding the file name (mode 0755) with
// the content bodies gives for that architecture: a multi-platform image
// that Gardener imageRef files read per platform.
func FileIndex(t testing.TB, name string, bodies map[string]string, arches ...string) v1.ImageIndex {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, arch := range arches {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		body := bodies[arch]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: TarLayer(t, buf.Bytes())})
		if err != nil {
			t.Fatal(err)
		}
		img = WithConfig(t, img, func(cf *v1.ConfigFile) { cf.OS, cf.Architecture = "linux", arch })
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
}

// LayerContents returns the uncompressed content of each layer of img, in
// order (for tests that look for what must be in no layer).
func LayerContents(t testing.TB, img v1.Image) [][]byte {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// WalkLayers calls visit with the header and the content of every entry of
// every layer of img, in order (lower layers first).
func WalkLayers(t testing.TB, img v1.Image, visit func(h *tar.Header, content []byte)) {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				rc.Close()
				t.Fatal(err)
			}
			visit(h, b)
		}
		rc.Close()
	}
}
