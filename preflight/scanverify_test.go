package preflight

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
)

// TestScanRefusesSwappedBlob: an added layer of an OCI layout swapped for
// same-size other content under its digest is refused before its entries
// are recorded (go-containerregistry reads layout blobs unchecked).
func TestScanRefusesSwappedBlob(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("[Unit]\nDescription=a\n")
	tw.WriteHeader(&tar.Header{Name: "etc/systemd/system/a.service", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	data := buf.Bytes()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(data, types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	limg, err := p.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := limg.Manifest()
	cf, _ := limg.ConfigFile()
	scan := func() error {
		_, err := Scan(context.Background(), &Target{Image: limg, Manifest: m, Config: cf, FirstAdded: 0}, ScanLimits{})
		return err
	}
	if err := scan(); err != nil {
		t.Fatalf("intact: %v", err)
	}
	swapped := bytes.Replace(data, []byte("Description=a"), []byte("Description=b"), 1)
	if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", m.Layers[0].Digest.Hex), swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := scan(); !errors.Is(err, registry.ErrDigestMismatch) {
		t.Fatalf("a swapped blob: %v, want %v", err, registry.ErrDigestMismatch)
	}
}
