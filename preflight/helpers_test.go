package preflight

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/test/synth"
)

// ent is one tar entry of a test layer.
type ent struct {
	name     string
	typ      byte
	body     string
	mode     int64
	uid, gid int
	link     string
	pax      map[string]string
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, body: body, mode: 0o644} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}

func tarBytes(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid, Linkname: e.link, PAXRecords: e.pax}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if e.pax != nil {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %s: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tarLayer is a gzip OCI layer holding ents.
func tarLayer(t testing.TB, ents ...ent) v1.Layer {
	t.Helper()
	data := tarBytes(t, ents...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// guardedLayer fails the test if its blob is ever read: base layers must
// never be downloaded.
type guardedLayer struct {
	v1.Layer
	reads *atomic.Int32
}

var errBaseRead = errors.New("base layer blob read")

func (g guardedLayer) Compressed() (io.ReadCloser, error) {
	g.reads.Add(1)
	return nil, errBaseRead
}
func (g guardedLayer) Uncompressed() (io.ReadCloser, error) {
	g.reads.Add(1)
	return nil, errBaseRead
}

var fcosLabels = map[string]string{
	"ostree.bootable":                  "1",
	"containers.bootc":                 "1",
	"ostree.linux":                     "6.18.13-200.fc43.x86_64",
	"org.opencontainers.image.version": "43.20260301.20.dev1",
}

// testBase is an ostree-shaped base of n gzip layers whose blobs cannot be read.
type testBase struct {
	img    v1.Image
	layers []v1.Layer
	reads  *atomic.Int32
}

func newBase(t testing.TB, n int, seed int64, labels map[string]string) *testBase {
	t.Helper()
	b := &testBase{reads: &atomic.Int32{}}
	var adds []mutate.Addendum
	for i := 0; i < n; i++ {
		l, err := random.Layer(64, types.OCILayer, random.WithSource(rand.NewSource(seed*1000+int64(i))))
		if err != nil {
			t.Fatal(err)
		}
		g := guardedLayer{Layer: l, reads: b.reads}
		b.layers = append(b.layers, g)
		adds = append(adds, mutate.Addendum{Layer: g, History: v1.History{CreatedBy: fmt.Sprintf("ostree chunk %d", i)}})
	}
	img := b.assemble(t, labels, adds)
	if n > 0 {
		img = synth.WithConfig(t, img, func(cf *v1.ConfigFile) {
			cf.Config.Labels[LabelFinalDiffID] = cf.RootFS.DiffIDs[n-1].String()
		})
	}
	b.img = img
	return b
}

func (b *testBase) assemble(t testing.TB, labels map[string]string, adds []mutate.Addendum) v1.Image {
	t.Helper()
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), adds...)
	if err != nil {
		t.Fatal(err)
	}
	img = synth.WithConfig(t, img, func(cf *v1.ConfigFile) {
		cf.OS, cf.Architecture = "linux", "amd64"
		cf.Config.Labels = map[string]string{}
		for k, v := range labels {
			cf.Config.Labels[k] = v
		}
	})
	return mutate.ConfigMediaType(img, types.OCIConfigJSON)
}

// derive appends layers on top of img with a history entry each.
func derive(t testing.TB, img v1.Image, layers ...v1.Layer) v1.Image {
	t.Helper()
	var adds []mutate.Addendum
	for i, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: fmt.Sprintf("added %d", i)}})
	}
	out, err := mutate.Append(img, adds...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustDigest(t testing.TB, l v1.Layer) string {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func run(t testing.TB, tg Target, opts Options) *Report {
	t.Helper()
	rep, err := Run(context.Background(), tg, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

// only runs one check.
func only(c Check, o Options) Options {
	o.Checks = []Check{c}
	return o
}

func findingsOf(rep *Report, check string) []Finding {
	var out []Finding
	for _, f := range rep.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

func assertFindings(t testing.TB, got, want []Finding) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d findings, want %d", len(got), len(want))
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w Finding
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("finding %d:\n got  %+v\n want %+v", i, g, w)
		}
	}
}
