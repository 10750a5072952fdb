package builder

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/oslayer/oslayer/layers"
	"github.com/oslayer/oslayer/registry"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

type tentry struct {
	name, link, data string
	typ              byte
}

func tarLayer(t *testing.T, es ...tentry) v1.Layer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.data))
	}
	tw.Close()
	raw := b.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestBaseUnitsWhiteouts(t *testing.T) {
	const u = "usr/lib/systemd/system/"
	unit := "[Install]\nWantedBy=multi-user.target\n"
	img, err := mutate.AppendLayers(empty.Image,
		tarLayer(t,
			tentry{name: "usr/", typ: tar.TypeDir},
			tentry{name: "./" + u + "a.service", data: unit, typ: tar.TypeReg},
			tentry{name: u + "b.service", data: unit, typ: tar.TypeReg},
			tentry{name: u + "e.service", data: unit, typ: tar.TypeReg},
			tentry{name: "usr/bin/tool", data: "x", typ: tar.TypeReg},
		),
		tarLayer(t,
			tentry{name: u + ".wh.a.service", typ: tar.TypeReg},
			tentry{name: "etc/systemd/system/c.service", link: "/" + u + "b.service", typ: tar.TypeSymlink},
		),
		tarLayer(t,
			tentry{name: u + ".wh..wh..opq", typ: tar.TypeReg},
			tentry{name: u + "d.service", data: unit, typ: tar.TypeReg},
		),
	)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := BaseUnits(context.Background(), img, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, p)
		}
		return err
	})
	sort.Strings(got)
	want := []string{"etc/systemd/system/c.service", u + "d.service"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("tree %v, want %v", got, want)
	}
	if l, err := fs.ReadLink(fsys, "etc/systemd/system/c.service"); err != nil || l != "/"+u+"b.service" {
		t.Errorf("link %q %v", l, err)
	}
	if _, err := BaseUnits(context.Background(), img, 10); !errors.Is(err, ErrBaseTooLarge) {
		t.Errorf("budget: %v", err)
	}
}

func TestBaseUnitsOfExampleBase(t *testing.T) {
	img, _, err := (&registry.Options{}).Image(context.Background(), "oci:"+filepath.Join("..", "examples", "base"), nil)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := BaseUnits(context.Background(), img, DefaultBaseUnitsMax)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(fsys, "usr/lib/systemd/system/containerd.service")
	if err != nil || !bytes.Contains(b, []byte("WantedBy=multi-user.target")) {
		t.Errorf("containerd.service: %q %v", b, err)
	}
}

// Build hands the renderer the units of a local base, never of a registry base.
func TestBuildBaseUnitsOnlyForLayouts(t *testing.T) {
	ctx := context.Background()
	var seen []bool
	spy := func(ctx context.Context, req layers.Request) (*layers.Result, error) {
		seen = append(seen, req.Base != nil)
		return rendered(t), nil
	}
	ref := layoutBase(t, synthBase(t))
	reg := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, reg.Host)
	if _, err := synth.Push(ctx, synthBase(t), reg.Host+"/fcos/base:1"); err != nil {
		t.Fatal(err)
	}
	for _, req := range []Request{
		{Base: ref},
		{Base: ref, NoBaseUnits: true},
		{Base: proxy.Host + "/fcos/base:1", Registry: &registry.Options{}},
	} {
		req.Render.Pool, req.Renderer = "worker", spy
		if _, err := Build(ctx, req, &fakePub{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 3 || !seen[0] || seen[1] || seen[2] {
		t.Errorf("renderer saw a base tree: %v, want [true false false]", seen)
	}
	if n := proxy.BlobGets(); n != 1 {
		t.Errorf("%d blob GETs from the registry base, want only its config:\n%s", n, proxy.Dump())
	}
}
