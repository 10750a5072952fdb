// Package ostreecommit turns an OCI image into an ostree commit the way
// ostree-ext imports a container image, for tests that deploy oslayer's
// images with Debian's ostree.
package ostreecommit

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/oslayer/oslayer/test/regtest"
)

// Commit turns the image into an ostree commit on branch, as ostree-ext
// imports a container image: every layer in order into one tree, OCI
// whiteouts applied, then /etc moved to /usr/etc.
func Commit(t testing.TB, ostree, repo, layoutDir, branch string) {
	t.Helper()
	p, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("layout %s: %v (%d images)", layoutDir, err, len(m.Manifests))
	}
	img, err := p.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	stage := filepath.Join(t.TempDir(), "tree")
	if err := os.Mkdir(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		if err := ApplyLayer(stage, rc); err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		rc.Close()
	}
	if err := os.Rename(filepath.Join(stage, "etc"), filepath.Join(stage, "usr/etc")); err != nil {
		t.Fatal(err)
	}
	regtest.Run(t, nil, ostree, "--repo="+repo, "commit", "--branch="+branch, "--tree=dir="+stage,
		"--no-xattrs", "--timestamp=2025-09-01T00:00:00Z")
}

// ApplyLayer extracts one uncompressed layer onto dir, honouring OCI
// whiteouts (".wh.NAME" removes NAME, ".wh..wh..opq" empties the directory).
func ApplyLayer(dir string, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean("/" + h.Name)
		if name == "/" {
			continue
		}
		dst := filepath.Join(dir, name)
		base := path.Base(name)
		if base == ".wh..wh..opq" {
			ents, _ := os.ReadDir(filepath.Dir(dst))
			for _, e := range ents {
				if err := os.RemoveAll(filepath.Join(filepath.Dir(dst), e.Name())); err != nil {
					return err
				}
			}
			continue
		}
		if victim, ok := strings.CutPrefix(base, ".wh."); ok {
			if err := os.RemoveAll(filepath.Join(filepath.Dir(dst), victim)); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if fi, err := os.Lstat(dst); err == nil && !(fi.IsDir() && h.Typeflag == tar.TypeDir) {
			if err := os.RemoveAll(dst); err != nil {
				return err
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, dst); err != nil {
				return err
			}
			if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
				return err
			}
			continue
		case tar.TypeLink:
			if err := os.Link(filepath.Join(dir, path.Clean("/"+h.Linkname)), dst); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unsupported entry type %c", name, h.Typeflag)
		}
		if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := os.Chmod(dst, h.FileInfo().Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
			return err
		}
	}
}
