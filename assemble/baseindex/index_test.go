package baseindex

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/test/synth"
)

// te is one tar entry of a test layer.
type te struct {
	name, link, data string
	typ              byte
	mode             int64
	uid              int
}

func tarBytes(t testing.TB, es ...te) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Uid: e.uid, Gid: e.uid}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func image(t *testing.T, layers ...[]te) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	for _, es := range layers {
		var err error
		img, err = mutate.AppendLayers(img, synth.TarLayer(t, tarBytes(t, es...)))
		if err != nil {
			t.Fatal(err)
		}
	}
	return img
}

func build(t *testing.T, img v1.Image) *Index {
	t.Helper()
	var applied []int
	ix, st, err := Build(context.Background(), img, Options{Progress: func(layer, layers int, read int64) { applied = append(applied, layer) }})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	if len(applied) != len(m.Layers) || !slices.IsSorted(applied) {
		t.Errorf("progress reported layers %v of %d", applied, len(m.Layers))
	}
	var want int64
	for _, l := range m.Layers {
		want += l.Size
	}
	if st.BytesRead != want || st.Layers != len(m.Layers) {
		t.Errorf("stats %+v, want %d bytes in %d layers", st, want, len(m.Layers))
	}
	return ix
}

func paths(ix *Index) []string {
	var ps []string
	for _, e := range ix.Entries {
		ps = append(ps, e.Path)
	}
	return ps
}

const unit = "[Unit]\nDescription=x\n\n[Install]\nWantedBy=multi-user.target\n"

// Whiteouts and opaque whiteouts hide lower layers only, as the OCI image
// spec says; a later non-directory replaces a directory and its children.
func TestWhiteouts(t *testing.T) {
	const u = "usr/lib/systemd/system/"
	img := image(t,
		[]te{
			{name: "usr/", typ: tar.TypeDir, mode: 0o755},
			{name: "./" + u + "a.service", data: unit, typ: tar.TypeReg},
			{name: u + "b.service", data: unit, typ: tar.TypeReg},
			{name: u + "e.service", data: unit, typ: tar.TypeReg},
			{name: "usr/bin/tool", data: "x", typ: tar.TypeReg, mode: 0o4755},
			{name: "opt/d/", typ: tar.TypeDir},
			{name: "opt/d/f", data: "f", typ: tar.TypeReg},
		},
		[]te{
			{name: u + ".wh.a.service", typ: tar.TypeReg},
			{name: "etc/systemd/system/c.service", link: "/" + u + "b.service", typ: tar.TypeSymlink},
			// The same layer's file survives its own whiteout.
			{name: "etc/.wh.x", typ: tar.TypeReg},
			{name: "etc/x", data: "x", typ: tar.TypeReg},
			{name: "opt/d", link: "elsewhere", typ: tar.TypeSymlink},
		},
		[]te{
			{name: u + ".wh..wh..opq", typ: tar.TypeReg},
			{name: u + "d.service", data: unit, typ: tar.TypeReg},
		},
	)
	ix := build(t, img)
	want := []string{"etc", "etc/systemd", "etc/systemd/system", "etc/systemd/system/c.service", "etc/x",
		"opt", "opt/d", "usr", "usr/bin", "usr/bin/tool", "usr/lib", "usr/lib/systemd", "usr/lib/systemd/system", u + "d.service"}
	if got := paths(ix); !slices.Equal(got, want) {
		t.Errorf("paths\n%v\nwant\n%v", got, want)
	}
	if e, _ := ix.Lookup("usr/bin/tool"); e.Mode != 0o4755 || e.Type != TypeFile || e.Size != 1 || e.Indexed {
		t.Errorf("usr/bin/tool: %+v", e)
	}
	if e, _ := ix.Lookup(u + "d.service"); !e.Indexed || string(e.Content) != unit {
		t.Errorf("d.service: %+v", e)
	}
	if e, _ := ix.Lookup("opt/d"); e.Type != TypeSymlink || e.Link != "elsewhere" {
		t.Errorf("opt/d: %+v", e)
	}
}

// ostree-ext writes each file object into sysroot/ostree/repo/objects and
// the checkout paths as hardlinks to it: the index records the checkout
// with the object's metadata and, for recorded paths, its content; the
// object store itself is not part of the tree.
func TestOstreeHardlinks(t *testing.T) {
	obj := "sysroot/ostree/repo/objects/ab/cdef.file"
	big := strings.Repeat("b", recentMaxFile+1)
	img := image(t, []te{
		{name: "sysroot/ostree/repo/objects/ab/", typ: tar.TypeDir},
		{name: "sysroot/ostree/repo/objects/12/3456.file-xattrs", data: "x", typ: tar.TypeReg},
		{name: "sysroot/ostree/repo/objects/ab/cdef.file-xattrs-link", link: "sysroot/ostree/repo/objects/12/3456.file-xattrs", typ: tar.TypeLink},
		{name: obj, data: unit, typ: tar.TypeReg, mode: 0o640, uid: 7},
		{name: "usr/lib/systemd/system/", typ: tar.TypeDir},
		{name: "usr/lib/systemd/system/sshd.service", link: obj, typ: tar.TypeLink},
		{name: "usr/share/doc/sshd.service", link: obj, typ: tar.TypeLink},
		{name: "sysroot/ostree/repo/objects/ab/big.file", data: big, typ: tar.TypeReg},
		{name: "usr/lib/systemd/system/big.service", link: "sysroot/ostree/repo/objects/ab/big.file", typ: tar.TypeLink},
		{name: "etc/", typ: tar.TypeDir},
		{name: "etc/passwd", data: "root:x:0:0::/root:/bin/bash\n", typ: tar.TypeReg},
		{name: "usr/lib/passwd", link: "etc/passwd", typ: tar.TypeLink},
		// A symlink object and its checkout path.
		{name: "sysroot/ostree/repo/objects/cd/0123.file", link: "sshd.service", typ: tar.TypeSymlink},
		{name: "usr/lib/systemd/system/ssh.service", link: "sysroot/ostree/repo/objects/cd/0123.file", typ: tar.TypeLink},
		{name: "sysroot/ostree/repo/objects/ef/4567.file", data: "[Unit]\n", typ: tar.TypeReg},
	}, []te{
		// A later layer's path hardlinked to an object of a lower layer.
		{name: "usr/lib/systemd/system/late.service", link: "sysroot/ostree/repo/objects/ef/4567.file", typ: tar.TypeLink},
	})
	ix := build(t, img)
	if l, err := fs.ReadLink(ix.FS(), "usr/lib/systemd/system/ssh.service"); err != nil || l != "sshd.service" {
		t.Errorf("ssh.service alias: %q %v", l, err)
	}
	if b, err := fs.ReadFile(ix.FS(), "usr/lib/systemd/system/ssh.service"); err != nil || string(b) != unit {
		t.Errorf("ssh.service through the alias: %q %v", b, err)
	}
	if e, ok := ix.Lookup("usr/lib/systemd/system/late.service"); !ok || e.Type != TypeFile || e.Size != 7 {
		t.Errorf("late.service: %+v", e)
	}
	for _, p := range paths(ix) {
		if strings.HasPrefix(p, "sysroot/ostree/repo/objects/") {
			t.Errorf("object store entry %s in the index", p)
		}
	}
	e, ok := ix.Lookup("usr/lib/systemd/system/sshd.service")
	if !ok || e.Type != TypeFile || e.Mode != 0o640 || e.UID != 7 || !e.Indexed || string(e.Content) != unit {
		t.Errorf("sshd.service: %+v", e)
	}
	if e, _ := ix.Lookup("usr/share/doc/sshd.service"); e.Indexed || e.Size != int64(len(unit)) {
		t.Errorf("doc copy: %+v", e)
	}
	// The object's content was too big to keep for later hardlinks.
	if e, _ := ix.Lookup("usr/lib/systemd/system/big.service"); e.Indexed || e.Size != int64(len(big)) {
		t.Errorf("big.service: indexed %v size %d", e.Indexed, e.Size)
	}
	if b, err := fs.ReadFile(ix.FS(), "usr/lib/passwd"); err != nil || !strings.HasPrefix(string(b), "root:") {
		t.Errorf("usr/lib/passwd %q %v", b, err)
	}
}

// A layer whose bytes do not match the manifest or the config is refused,
// naming the layer.
func TestVerifiesDigests(t *testing.T) {
	good := image(t, []te{{name: "etc/passwd", data: "root:x:0:0::/root:/bin/bash\n", typ: tar.TypeReg}})
	m, _ := good.Manifest()
	cf, _ := good.ConfigFile()
	other := synth.TarLayer(t, tarBytes(t, te{name: "etc/passwd", data: "evil:x:0:0::/:/bin/sh\n", typ: tar.TypeReg}))
	for _, tc := range []struct {
		name string
		img  v1.Image
		want string
	}{
		{"digest", &swapped{Image: good, layer: other, m: m, cf: cf}, "digest mismatch"},
		{"size", &swapped{Image: good, layer: other, m: withSize(t, m, other), cf: cf}, "manifest says"},
	} {
		_, _, err := Build(context.Background(), tc.img, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "layer 0") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// withSize names l's digest with a wrong size.
func withSize(t *testing.T, m *v1.Manifest, l v1.Layer) *v1.Manifest {
	m = m.DeepCopy()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	sz, _ := l.Size()
	m.Layers[0].Digest, m.Layers[0].Size = d, sz+1
	return m
}

// swapped serves another layer's bytes under a manifest and config.
type swapped struct {
	v1.Image
	layer v1.Layer
	m     *v1.Manifest
	cf    *v1.ConfigFile
}

func (s *swapped) Manifest() (*v1.Manifest, error)     { return s.m, nil }
func (s *swapped) ConfigFile() (*v1.ConfigFile, error) { return s.cf, nil }
func (s *swapped) Layers() ([]v1.Layer, error)         { return []v1.Layer{s.layer}, nil }

// FS follows symlinks inside the tree (also in the middle of a path and
// absolute ones against its root), reports metadata for every file and
// content only for recorded ones.
func TestFS(t *testing.T) {
	img := image(t, []te{
		{name: "usr/lib/systemd/system/", typ: tar.TypeDir},
		{name: "usr/lib/systemd/system/a.service", data: unit, typ: tar.TypeReg},
		{name: "lib", link: "usr/lib", typ: tar.TypeSymlink},
		{name: "etc/systemd/system/multi-user.target.wants/", typ: tar.TypeDir},
		{name: "etc/systemd/system/multi-user.target.wants/a.service", link: "/usr/lib/systemd/system/a.service", typ: tar.TypeSymlink},
		{name: "etc/os-release", link: "../usr/lib/os-release", typ: tar.TypeSymlink},
		{name: "usr/lib/os-release", data: "ID=fedora\nVARIANT_ID=\"coreos\"\n", typ: tar.TypeReg},
		{name: "usr/bin/bash", data: "ELF", typ: tar.TypeReg, mode: 0o755},
		{name: "loop", link: "loop", typ: tar.TypeSymlink},
		{name: "usr/lib/modules/6.1.0/vmlinuz", data: "k", typ: tar.TypeReg},
	})
	ix := build(t, img)
	fsys := ix.FS()
	if b, err := fs.ReadFile(fsys, "lib/systemd/system/a.service"); err != nil || string(b) != unit {
		t.Errorf("through lib: %q %v", b, err)
	}
	if b, err := fs.ReadFile(fsys, "etc/systemd/system/multi-user.target.wants/a.service"); err != nil || string(b) != unit {
		t.Errorf("through the wants link: %q %v", b, err)
	}
	if l, err := fs.ReadLink(fsys, "etc/systemd/system/multi-user.target.wants/a.service"); err != nil || l != "/usr/lib/systemd/system/a.service" {
		t.Errorf("readlink %q %v", l, err)
	}
	if fi, err := fs.Lstat(fsys, "lib"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("lstat lib: %v %v", fi, err)
	}
	if fi, err := fs.Stat(fsys, "lib"); err != nil || !fi.IsDir() {
		t.Errorf("stat lib: %v %v", fi, err)
	}
	fi, err := fs.Stat(fsys, "usr/bin/bash")
	if err != nil || fi.Size() != 3 || fi.Mode() != 0o755 || fi.Sys().(*Entry).UID != 0 {
		t.Errorf("bash: %v %v", fi, err)
	}
	if _, err := fs.ReadFile(fsys, "usr/bin/bash"); !errors.Is(err, ErrNotIndexed) {
		t.Errorf("bash content: %v", err)
	}
	f, err := fsys.Open("usr/bin/bash")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(f); !errors.Is(err, ErrNotIndexed) {
		t.Errorf("bash read: %v", err)
	}
	if _, err := fs.Stat(fsys, "loop"); err == nil {
		t.Error("a symlink loop resolved")
	}
	if _, err := fs.Stat(fsys, "usr/bin/bash/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a path through a file: %v", err)
	}
	if got := ix.OSRelease(); got["ID"] != "fedora" || got["VARIANT_ID"] != "coreos" {
		t.Errorf("os-release %v", got)
	}
	if !slices.Equal(ix.Kernels, []string{"6.1.0"}) {
		t.Errorf("kernels %v", ix.Kernels)
	}
	// The standard fs.FS checks, on the recorded subtree (reading
	// unrecorded files fails by design).
	if err := fstest.TestFS(mustSub(t, fsys, "usr/lib/systemd"), "system/a.service"); err != nil {
		t.Error(err)
	}
}

func mustSub(t *testing.T, fsys fs.FS, dir string) fs.FS {
	t.Helper()
	s, err := fs.Sub(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Marshal is deterministic and Unmarshal refuses an index of another base,
// of another version, or whose content does not match its own digest.
func TestMarshalChecks(t *testing.T) {
	img := image(t, []te{{name: "etc/passwd", data: "root:x:0:0::/root:/bin/bash\n", typ: tar.TypeReg}})
	ix := build(t, img)
	a, err := ix.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again := build(t, img)
	b, _ := again.Marshal()
	if !bytes.Equal(a, b) || ix.Digest != again.Digest {
		t.Error("two indexes of one base differ")
	}
	back, err := Unmarshal(a, ix.Base)
	if err != nil || back.Digest != ix.Digest || !slices.Equal(paths(back), paths(ix)) {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := Unmarshal(a, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}); err == nil || !strings.Contains(err.Error(), "made from base") {
		t.Errorf("other base: %v", err)
	}
	tampered := build(t, img)
	tampered.Entries[0].Content = []byte("evil:x:0:0::/:/bin/sh\n")
	tb, _ := tampered.Marshal() // keeps the recorded digest
	if _, err := Unmarshal(tb, ix.Base); err == nil || !strings.Contains(err.Error(), "does not match its content") {
		t.Errorf("tampered: %v", err)
	}
	bad := build(t, img)
	bad.Entries[0].Path, bad.Digest = "../etc/passwd", ""
	bb, _ := bad.Marshal() // sealed again: only the entry is wrong
	if _, err := Unmarshal(bb, ix.Base); err == nil || !strings.Contains(err.Error(), "invalid entry") {
		t.Errorf("entry outside the root: %v", err)
	}
	old := build(t, img)
	old.Version = 0
	old.Digest = ""
	ob, _ := old.Marshal()
	if _, err := Unmarshal(ob, ix.Base); err == nil || !strings.Contains(err.Error(), "format version") {
		t.Errorf("old version: %v", err)
	}
}

// The disk cache: a miss is (nil, nil), a stored index loads back, and a
// damaged file is an error (the resolver rebuilds and replaces it).
func TestCache(t *testing.T) {
	img := image(t, []te{{name: "etc/group", data: "wheel:x:10:\n", typ: tar.TypeReg}})
	ix := build(t, img)
	c := Cache{Dir: filepath.Join(t.TempDir(), "c")}
	if got, err := c.Load(ix.Base); got != nil || err != nil {
		t.Fatalf("empty cache: %v %v", got, err)
	}
	if err := c.Store(ix); err != nil {
		t.Fatal(err)
	}
	got, err := c.Load(ix.Base)
	if err != nil || got.Digest != ix.Digest {
		t.Fatalf("load: %v", err)
	}
	if err := os.WriteFile(c.File(ix.Base), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(ix.Base); err == nil {
		t.Error("a damaged cache file loaded")
	}
	r := &Resolver{Cache: &c}
	res, err := r.Resolve(context.Background(), img)
	if err != nil || res.Source != SourceBuilt || len(res.Warnings) != 1 {
		t.Fatalf("resolve over a damaged cache: %+v %v", res, err)
	}
	if res, err := r.Resolve(context.Background(), img); err != nil || res.Source != SourceCache {
		t.Errorf("the rebuilt index was not cached: %+v %v", res, err)
	}
}

// A base laid out as ostree-ext writes a chunked image: every checkout path
// is a hardlink to an object, directories come in the last layer.
func TestOstreeBase(t *testing.T) {
	img, err := synth.OstreeBase(1200, 4)
	if err != nil {
		t.Fatal(err)
	}
	ix := build(t, img)
	files := 0
	for _, e := range ix.Entries {
		if strings.HasPrefix(e.Path, "sysroot/ostree/repo/objects/") {
			t.Fatalf("object store entry %s", e.Path)
		}
		if e.Type == TypeFile && (strings.HasPrefix(e.Path, "usr/share/synth/d") || strings.HasPrefix(e.Path, "usr/lib/systemd/system/synth-")) {
			files++
		}
	}
	if files != 1200 {
		t.Errorf("%d synthetic files, want 1200", files)
	}
	b, err := fs.ReadFile(ix.FS(), "usr/lib/systemd/system/synth-7.service")
	if err != nil || !strings.Contains(string(b), "WantedBy=multi-user.target") {
		t.Errorf("synth-7.service %q %v", b, err)
	}
	if e, ok := ix.Lookup("usr/share/synth/d001/f01001"); !ok || e.Type != TypeFile || e.Size < 100 || e.Indexed {
		t.Errorf("f01001: %+v", e)
	}
	if !slices.Equal(ix.Kernels, []string{synth.KernelRelease}) {
		t.Errorf("kernels %v", ix.Kernels)
	}
}

// flaky breaks the first read of its layer in the middle.
type flaky struct {
	v1.Layer
	calls int
}

func (f *flaky) Compressed() (io.ReadCloser, error) {
	f.calls++
	rc, err := f.Layer.Compressed()
	if err != nil || f.calls > 1 {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, 20), errReader{}), rc}, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// A layer whose connection breaks is read once more; a layer whose bytes
// are wrong is not.
func TestRetriesBrokenLayer(t *testing.T) {
	good := image(t, []te{{name: "etc/passwd", data: "root:x:0:0::/root:/bin/bash\n", typ: tar.TypeReg}})
	m, _ := good.Manifest()
	cf, _ := good.ConfigFile()
	ls, _ := good.Layers()
	fl := &flaky{Layer: ls[0]}
	ix, st, err := Build(context.Background(), &swapped{Image: good, layer: fl, m: m, cf: cf}, Options{})
	if err != nil || st.Retries != 1 || fl.calls != 2 {
		t.Fatalf("retries %d, reads %d: %v", st.Retries, fl.calls, err)
	}
	if b, err := fs.ReadFile(ix.FS(), "etc/passwd"); err != nil || !strings.HasPrefix(string(b), "root:") {
		t.Errorf("etc/passwd %q %v", b, err)
	}
	other := synth.TarLayer(t, tarBytes(t, te{name: "etc/passwd", data: "evil\n", typ: tar.TypeReg}))
	counted := &flaky{Layer: other, calls: 1} // never breaks
	_, st, err = Build(context.Background(), &swapped{Image: good, layer: counted, m: m, cf: cf}, Options{})
	if err == nil || st.Retries != 0 || counted.calls != 2 {
		t.Errorf("mismatch: retries %d, reads %d: %v", st.Retries, counted.calls-1, err)
	}
}

// gated counts the reads of its layers; the first read waits for open.
type gated struct {
	v1.Image
	reads *atomic.Int64
	open  chan struct{}
}

func (g *gated) Layers() ([]v1.Layer, error) {
	ls, err := g.Image.Layers()
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = &gatedLayer{Layer: l, g: g}
	}
	return out, err
}

type gatedLayer struct {
	v1.Layer
	g *gated
}

func (l *gatedLayer) Compressed() (io.ReadCloser, error) {
	<-l.g.open
	l.g.reads.Add(1)
	return l.Layer.Compressed()
}

// Concurrent resolutions of one base in a process read it once: the others
// wait and share the index.
func TestResolveShared(t *testing.T) {
	img := image(t, []te{{name: "etc/passwd", data: "root:x:0:0::/root:/bin/bash\n", typ: tar.TypeReg}},
		[]te{{name: "etc/group", data: "root:x:0:\n", typ: tar.TypeReg}})
	g := &gated{Image: img, reads: &atomic.Int64{}, open: make(chan struct{})}
	dir := t.TempDir()
	var wg sync.WaitGroup
	sources := make([]Source, 6)
	digests := make([]string, 6)
	for i := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := (&Resolver{Cache: &Cache{Dir: dir}}).Resolve(context.Background(), g)
			if err != nil {
				t.Error(err)
				return
			}
			sources[i], digests[i] = res.Source, res.Index.Digest
		}()
	}
	time.Sleep(200 * time.Millisecond)
	close(g.open)
	wg.Wait()
	slices.Sort(sources)
	if got := fmt.Sprint(sources); got != "[built shared shared shared shared shared]" || g.reads.Load() != 2 {
		t.Errorf("sources %s, %d layer reads", got, g.reads.Load())
	}
	for _, d := range digests {
		if d != digests[0] {
			t.Errorf("digests %v", digests)
		}
	}
}
