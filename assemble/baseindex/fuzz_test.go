package baseindex

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Any layer bytes: readTar and apply return an error or a tree whose FS
// answers without panicking.
func FuzzReadTar(f *testing.F) {
	f.Add(tarBytes(f, te{name: "usr/lib/systemd/system/a.service", data: unit, typ: tar.TypeReg},
		te{name: "lib", link: "usr/lib", typ: tar.TypeSymlink},
		te{name: "usr/lib/systemd/system/b.service", link: "usr/lib/systemd/system/a.service", typ: tar.TypeLink},
		te{name: "usr/.wh..wh..opq", typ: tar.TypeReg},
		te{name: "etc/.wh.passwd", typ: tar.TypeReg}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := readTar(bytes.NewReader(data))
		if err != nil {
			return
		}
		tr := newTree()
		if err := tr.apply(cs); err != nil {
			return
		}
		ix := &Index{Version: FormatVersion}
		ix.Entries, ix.Kernels = tr.finish()
		fsys := ix.FS()
		_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				_, _ = fs.ReadFile(fsys, p)
				_, _ = fs.Stat(fsys, p)
			}
			return nil
		})
	})
}

// Any bytes as a cached index or artifact: Unmarshal refuses or returns an
// index that marshals back to an index Unmarshal accepts.
func FuzzUnmarshal(f *testing.F) {
	ix := &Index{Version: FormatVersion, Base: v1.Hash{Algorithm: "sha256", Hex: "00"},
		Entries: []Entry{{Path: "etc", Type: TypeDir, Mode: 0o755}, {Path: "etc/passwd", Type: TypeFile, Mode: 0o644, Indexed: true, Content: []byte("root:x:0:0::/root:/bin/bash\n")}}}
	good, err := ix.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Unmarshal(data, v1.Hash{})
		if err != nil {
			return
		}
		again, err := got.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Unmarshal(again, got.Base); err != nil {
			t.Fatalf("an accepted index does not round-trip: %v", err)
		}
		_, _ = fs.ReadFile(got.FS(), "etc/passwd")
	})
}
