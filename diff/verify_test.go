package diff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/regtest"
)

// metadataTar is an uncompressed metadata layer whose ownership manifest
// names one file; swapping "a" for "b" keeps its size.
func metadataTar(t *testing.T, file string) []byte {
	t.Helper()
	man, err := json.Marshal(render.Manifest{Version: 1, Items: []render.ManifestItem{{Path: file, Type: "file", Mode: "0644", SHA256: strings.Repeat("0", 64), Layer: render.LayerConfig}}})
	if err != nil {
		t.Fatal(err)
	}
	return fuzzTar(t, string(man))
}

// poolImage is a minimal oslayer pool image: labels, one metadata layer.
func poolImage(t *testing.T) (v1.Image, []byte) {
	t.Helper()
	data := metadataTar(t, "/etc/a")
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(data, types.OCIUncompressedLayer),
		History: v1.History{Comment: assemble.HistoryCommentPrefix + render.LayerMetadata}})
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Labels = map[string]string{assemble.LabelPool: "worker", assemble.LabelKernelArgs: "[]"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return mutate.MediaType(img, types.OCIManifestSchema1), data
}

// swap overwrites the blob file at path with same-size other content.
func swap(t *testing.T, path string, data []byte) {
	t.Helper()
	swapped := bytes.Replace(data, []byte(`"/etc/a"`), []byte(`"/etc/b"`), 1)
	if len(swapped) != len(data) || bytes.Equal(swapped, data) {
		t.Fatal("no same-size swap")
	}
	if err := os.WriteFile(path, swapped, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantMismatch(t *testing.T, s *Side, err error) {
	t.Helper()
	if !errors.Is(err, registry.ErrDigestMismatch) {
		var items []render.ManifestItem
		if s != nil {
			items = s.Items
		}
		t.Fatalf("a swapped blob: err %v, items %+v; want %v", err, items, registry.ErrDigestMismatch)
	}
}

// writeLayout writes img to a new OCI layout as "latest".
func writeLayout(t *testing.T, img v1.Image) (dir, ref string) {
	t.Helper()
	dir = t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "latest"})); err != nil {
		t.Fatal(err)
	}
	ref = "oci:" + dir + ":latest"
	if _, err := LoadImage(context.Background(), &registry.Options{}, ref, nil); err != nil {
		t.Fatalf("intact: %v", err)
	}
	return dir, ref
}

// TestSwappedBlobRefusedLayout: a metadata blob, or the config blob, of an
// OCI layout swapped for same-size other content under its digest is
// refused.
func TestSwappedBlobRefusedLayout(t *testing.T) {
	img, data := poolImage(t)
	dir, ref := writeLayout(t, img)
	ls, _ := img.Layers()
	d, _ := ls[0].Digest()
	swap(t, filepath.Join(dir, "blobs", "sha256", d.Hex), data)
	s, err := LoadImage(context.Background(), &registry.Options{}, ref, nil)
	wantMismatch(t, s, err)

	dir, ref = writeLayout(t, img)
	cd, _ := img.ConfigName()
	cfg, _ := img.RawConfigFile()
	if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", cd.Hex), bytes.Replace(cfg, []byte(`"worker"`), []byte(`"xorker"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = LoadImage(context.Background(), &registry.Options{}, ref, nil)
	wantMismatch(t, s, err)
}

// TestSwappedBlobRefusedRegistry: Debian's docker-registry serving a
// swapped same-size blob over plain HTTP (its storage edited on disk).
func TestSwappedBlobRefusedRegistry(t *testing.T) {
	storage := t.TempDir()
	reg := regtest.Start(t, regtest.Config{Filesystem: true, StorageDir: storage})
	img, data := poolImage(t)
	ref := reg.Host + "/pools/worker:latest"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadImage(context.Background(), &registry.Options{}, ref, nil); err != nil {
		t.Fatalf("intact: %v", err)
	}
	ls, _ := img.Layers()
	d, _ := ls[0].Digest()
	blobs, _ := filepath.Glob(filepath.Join(storage, "*", "docker", "registry", "v2", "blobs", "sha256", d.Hex[:2], d.Hex, "data"))
	if len(blobs) != 1 {
		t.Fatalf("blob %s not found under %s", d, storage)
	}
	swap(t, blobs[0], data)
	s, err := LoadImage(context.Background(), &registry.Options{}, ref, nil)
	wantMismatch(t, s, err)
}
