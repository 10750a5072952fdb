package main

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/oslayer/oslayer/internal/registry"
)

// The committed layout is exactly what the generator writes.
func TestGeneratorReproducesCommittedLayout(t *testing.T) {
	out := filepath.Join(t.TempDir(), "base")
	if err := generate(out); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "base")
	read := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			b, err := os.ReadFile(p)
			m[rel] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	want, got := read(committed), read(out)
	if len(want) != len(got) {
		t.Errorf("committed layout has %d files, generator writes %d: run go run ./examples/gen -out examples/base", len(want), len(got))
	}
	for n, b := range got {
		if !bytes.Equal(want[n], b) {
			t.Errorf("%s differs from the committed layout: run go run ./examples/gen -out examples/base", n)
		}
	}
	var total int
	for _, b := range got {
		total += len(b)
	}
	if total > 16<<10 {
		t.Errorf("example base is %d bytes, keep it tiny", total)
	}
}

func TestExampleBaseOpens(t *testing.T) {
	img, res, err := (&registry.Options{}).Image(context.Background(), "oci:"+filepath.Join("..", "base"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"containers.bootc": "1", "ostree.bootable": "true", "ostree.linux": KernelRelease, "org.opencontainers.image.version": Version} {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	if cf.Config.Labels["ostree.final-diffid"] != cf.RootFS.DiffIDs[len(cf.RootFS.DiffIDs)-1].String() {
		t.Errorf("ostree.final-diffid %s is not the last diffID", cf.Config.Labels["ostree.final-diffid"])
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 3 {
		t.Fatalf("layers %d %v", len(ls), err)
	}
	// Every blob is what its digest says (reading verifies it).
	for _, l := range ls {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	if res.Digest.Hex == "" {
		t.Error("no digest")
	}
}
