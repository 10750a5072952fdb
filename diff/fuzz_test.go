package diff

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/render"
)

// fuzzImage is an image of the fuzzer's making: the kernel-arguments
// label, roles named by the history (comma-separated) and one layer per
// role, each of the given bytes (a tar, gzip-compressed or not, or
// anything else).
func fuzzImage(t *testing.T, kargs, roles string, layer []byte) v1.Image {
	var adds []mutate.Addendum
	for _, r := range strings.Split(roles, ",") {
		adds = append(adds, mutate.Addendum{Layer: static.NewLayer(layer, types.OCILayer),
			History: v1.History{Comment: assemble.HistoryCommentPrefix + r}})
	}
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		t.Skip(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Skip(err)
	}
	cf = cf.DeepCopy()
	cf.Config.Labels = map[string]string{assemble.LabelPool: "worker", assemble.LabelKernelArgs: kargs}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Skip(err)
	}
	return img
}

// FuzzImageSide feeds diff's image reading (labels, history roles, the
// metadata layer's ownership manifest, ReadFile on every path it names,
// and a comparison) images of arbitrary layers and labels. It must never
// panic; a side it accepts names only the paths its manifest does.
func FuzzImageSide(f *testing.F) {
	f.Add(`[]`, render.LayerMetadata, []byte{})
	f.Add(`["nosmt"]`, render.LayerConfig+","+render.LayerMetadata, fuzzTar(f, `{"version":1,"items":[{"path":"/etc/a","type":"file","mode":"0644","layer":"config","storedAt":"/usr/lib/oslayer/manifest.json"}]}`))
	f.Add(`[]`, render.LayerMetadata, fuzzTar(f, `{"version":1,"items":[{"path":"/etc/containers/registries.conf","type":"file","layer":"metadata","source":{"kind":"MachineConfig","field":"spec.config.storage.files[0]"}}]}`))
	f.Fuzz(func(t *testing.T, kargs, roles string, layer []byte) {
		if len(roles) > 64 || len(layer) > 1<<16 {
			return
		}
		s, err := imageSide("fuzz", fuzzImage(t, kargs, roles, layer), "sha256:0")
		if err != nil {
			if s != nil {
				t.Fatal("side and error")
			}
			return
		}
		for _, it := range s.Items {
			_, _ = s.ReadFile(it.Path)
		}
		r, err := Compare(s, s, Options{})
		if err == nil && len(r.Paths) != 0 {
			t.Fatalf("a side against itself: %d paths changed", len(r.Paths))
		}
	})
}

// fuzzTar is a metadata layer holding the ownership manifest man.
func fuzzTar(tb testing.TB, man string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(render.ManifestPath, "/"), Mode: 0o644, Size: int64(len(man)), Typeflag: tar.TypeReg}); err != nil {
		tb.Fatal(err)
	}
	tw.Write([]byte(man))
	tw.Close()
	return buf.Bytes()
}
