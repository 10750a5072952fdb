package publish_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
)

func readIndex(t *testing.T, dir string) v1.IndexManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

func tagged(idx v1.IndexManifest, tag string) []v1.Descriptor {
	var out []v1.Descriptor
	for _, m := range idx.Manifests {
		if m.Annotations[publish.RefNameAnnotation] == tag {
			out = append(out, m)
		}
	}
	return out
}

func blobFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func umociUnpack(t *testing.T, image, bundle string) {
	t.Helper()
	umoci := regtest.Require(t, "umoci")
	out, err := exec.Command(umoci, "unpack", "--rootless", "--image", image, bundle).CombinedOutput()
	if err != nil {
		t.Fatalf("umoci unpack %s: %v\n%s", image, err, out)
	}
}

func TestLayoutWriteCommitReplaceTag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	layers := mkLayers(t, "lay", 3, 2048)
	img := mkImage(t, nil, layers...)
	b := built(t, img)
	p := newPublisher(t, "oci:"+dir+":worker", nil)
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := layersSize(t, layers) + configSize(t, img) + manifestSize(t, img)
	if pub.Uploaded != wantBytes || pub.Skipped != 0 {
		t.Errorf("Uploaded=%d Skipped=%d, want %d and 0", pub.Uploaded, pub.Skipped, wantBytes)
	}
	if want := "oci:" + dir + "@" + b.Digest.String(); pub.Ref != want || pub.Digest != nil {
		t.Errorf("Ref = %q, want %q (Digest nil)", pub.Ref, want)
	}
	if got := len(readIndex(t, dir).Manifests); got != 0 {
		t.Fatalf("index.json has %d entries before Commit", got)
	}
	if got := len(blobFiles(t, dir)); got != len(layers)+2 {
		t.Fatalf("%d blobs, want %d", got, len(layers)+2)
	}
	commit(t, p, b, pub)
	idx := readIndex(t, dir)
	if e := tagged(idx, "worker"); len(idx.Manifests) != 1 || len(e) != 1 || e[0].Digest != b.Digest {
		t.Fatalf("index.json after Commit: %+v", idx)
	}

	// Write is idempotent: nothing is written again.
	pub2, err := p.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if pub2.Uploaded != 0 || pub2.Skipped != wantBytes {
		t.Errorf("rewrite: Uploaded=%d Skipped=%d, want 0 and %d", pub2.Uploaded, pub2.Skipped, wantBytes)
	}
	commit(t, p, b, pub2)
	if got := len(readIndex(t, dir).Manifests); got != 1 {
		t.Fatalf("re-commit of the same digest: %d entries", got)
	}

	// A new digest replaces the tag's entry; another tag adds one.
	img2 := mkImage(t, nil, append(layers[:2:2], mkLayer(t, "new", 999))...)
	b2 := built(t, img2)
	pub3, err := p.Write(ctx, b2)
	if err != nil {
		t.Fatal(err)
	}
	if e := tagged(readIndex(t, dir), "worker"); len(e) != 1 || e[0].Digest != b.Digest {
		t.Fatalf("Write moved the tag: %+v", e)
	}
	commit(t, p, b2, pub3)
	idx = readIndex(t, dir)
	if e := tagged(idx, "worker"); len(idx.Manifests) != 1 || len(e) != 1 || e[0].Digest != b2.Digest {
		t.Fatalf("index.json after a new Commit: %+v", idx)
	}
	other := newPublisher(t, "oci:"+dir+":other", nil)
	writeCommit(t, other, b)
	idx = readIndex(t, dir)
	if len(idx.Manifests) != 2 || len(tagged(idx, "worker")) != 1 || len(tagged(idx, "other")) != 1 {
		t.Fatalf("two tags: %+v", idx)
	}

	// The layout reads back (go-containerregistry and umoci).
	reg := &registry.Options{}
	got, res, err := reg.Image(ctx, "oci:"+dir+":worker", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != b2.Digest {
		t.Fatalf("read back %s, want %s", res.Digest, b2.Digest)
	}
	if _, err := got.Layers(); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "bundle")
	umociUnpack(t, dir+":worker", bundle)
	for _, f := range []string{"usr/share/lay-0", "usr/share/lay-1", "usr/share/new"} {
		if _, err := os.Stat(filepath.Join(bundle, "rootfs", f)); err != nil {
			t.Errorf("unpacked image lacks %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(bundle, "rootfs", "usr/share/lay-2")); err == nil {
		t.Error("unpacked the old image's layer")
	}
	// No temp files are left behind.
	for _, n := range blobFiles(t, dir) {
		if strings.HasPrefix(n, ".tmp") {
			t.Errorf("temp file left: %s", n)
		}
	}
}

func TestLayoutRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, "oci:"+dir+":x", nil)
	_, err := p.Write(ctx, built(t, mkImage(t, nil, mkLayer(t, "a", 100))))
	if err == nil || !strings.Contains(err.Error(), "not an OCI layout") {
		t.Fatalf("write into a foreign directory: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("foreign directory changed: %d entries", len(ents))
	}
}

// An OCI-layout base: its blobs are copied file to file into the target.
func TestLayoutFromLayoutBase(t *testing.T) {
	tmp := t.TempDir()
	baseDir, outDir := filepath.Join(tmp, "base"), filepath.Join(tmp, "out")
	baseLayers := mkLayers(t, "base", 3, 4096)
	baseImg := mkImage(t, nil, baseLayers...)
	bp := newPublisher(t, "oci:"+baseDir+":stable", nil)
	bb := built(t, baseImg)
	writeCommit(t, bp, bb)
	reg := &registry.Options{}
	base, _, err := reg.Image(ctx, "oci:"+baseDir+":stable", nil)
	if err != nil {
		t.Fatal(err)
	}
	added := mkLayer(t, "pool", 1234)
	img := mkImage(t, base, added)
	b := built(t, img)
	p := newPublisher(t, "oci:"+outDir+":pool", nil)
	writeCommit(t, p, b)
	for _, l := range baseLayers {
		d, _ := l.Digest()
		want, _ := os.ReadFile(filepath.Join(baseDir, "blobs", "sha256", d.Hex))
		got, err := os.ReadFile(filepath.Join(outDir, "blobs", "sha256", d.Hex))
		if err != nil || string(got) != string(want) {
			t.Fatalf("base blob %s not copied: %v", d, err)
		}
	}
	bundle := filepath.Join(tmp, "bundle")
	umociUnpack(t, outDir+":pool", bundle)
	for _, f := range []string{"usr/share/base-0", "usr/share/base-2", "usr/share/pool"} {
		if _, err := os.Stat(filepath.Join(bundle, "rootfs", f)); err != nil {
			t.Errorf("unpacked image lacks %s", f)
		}
	}
}

// A registry base written to a layout: its layers must be downloaded,
// each once.
func TestLayoutFromRegistryBase(t *testing.T) {
	_, px := memoryProxied(t)
	baseLayers := mkLayers(t, "base", 3, 4096)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(t, reg, px.Host, baseLayers)
	img := mkImage(t, base, mkLayer(t, "pool", 500))
	b := built(t, img)
	dir := filepath.Join(t.TempDir(), "out")
	p := newPublisher(t, "oci:"+dir, reg)
	px.Reset()
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := px.BlobGets(); got != len(baseLayers) {
		t.Errorf("base blob downloads = %d, want %d", got, len(baseLayers))
	}
	commit(t, p, b, pub)
	if e := tagged(readIndex(t, dir), publish.DefaultTag); len(e) != 1 || e[0].Digest != b.Digest {
		t.Fatalf("default tag entry: %+v", e)
	}
	umociUnpack(t, dir+":"+publish.DefaultTag, filepath.Join(t.TempDir(), "bundle"))
}

// Concurrent commits of different tags to one layout keep every entry,
// and fields of index.json that oslayer does not manage survive.
func TestLayoutConcurrentCommits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "oci-layout"), `{"imageLayoutVersion":"1.0.0"}`, 0o644)
	write(t, filepath.Join(dir, "index.json"), `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[],"annotations":{"org.example.keep":"yes"}}`, 0o644)
	const n = 12
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			img := mkImage(t, nil, mkLayer(t, fmt.Sprintf("c%d", i), 300+i))
			b := built(t, img)
			p, err := publish.New(fmt.Sprintf("oci:%s:pool-%d", dir, i), nil)
			if err != nil {
				errs <- err
				return
			}
			pub, err := p.Write(ctx, b)
			if err == nil {
				err = p.Commit(ctx, b, pub)
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	idx := readIndex(t, dir)
	if len(idx.Manifests) != n {
		t.Fatalf("index.json has %d entries after %d concurrent commits", len(idx.Manifests), n)
	}
	for i := 0; i < n; i++ {
		if len(tagged(idx, fmt.Sprintf("pool-%d", i))) != 1 {
			t.Errorf("tag pool-%d missing", i)
		}
	}
	if idx.Annotations["org.example.keep"] != "yes" {
		t.Errorf("index.json lost its annotations: %v", idx.Annotations)
	}
}

// A blob already in the layout is reused only when its content has its
// digest: a corrupted one of the right size (and a truncated one) is
// written again, and the image then reads back intact with umoci. Before,
// a blob of the right size was skipped and the corrupt image was
// reported tagged.
func TestLayoutReplacesCorruptBlob(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	layers := mkLayers(t, "lay", 3, 4096)
	img := mkImage(t, nil, layers...)
	b := built(t, img)
	var logs strings.Builder
	var mu sync.Mutex
	p := newPublisher(t, "oci:"+dir+":worker", nil, publish.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	writeCommit(t, p, b)
	d0, _ := layers[0].Digest()
	d1, _ := layers[1].Digest()
	flip := filepath.Join(dir, "blobs", "sha256", d0.Hex)
	data, err := os.ReadFile(flip)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff // same size, other content
	if err := os.WriteFile(flip, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "blobs", "sha256", d1.Hex), 10); err != nil {
		t.Fatal(err)
	}
	pub, err := p.Write(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, p, b, pub)
	if want := layersSize(t, layers[:2]); pub.Uploaded != want {
		t.Errorf("rewrite of a layout with two damaged blobs: Uploaded=%d, want %d (the two layers)", pub.Uploaded, want)
	}
	for _, name := range blobFiles(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", name))
		if err != nil {
			t.Fatal(err)
		}
		if h, _, _ := v1.SHA256(bytes.NewReader(b)); h.Hex != name {
			t.Errorf("blob %s holds sha256:%s after the rewrite", name, h.Hex)
		}
	}
	umociUnpack(t, dir+":worker", filepath.Join(t.TempDir(), "bundle"))
	// The warnings' messages (what a person reads: oslayer prints a
	// warning's message only) name each damaged blob and its file.
	mu.Lock()
	defer mu.Unlock()
	var msgs []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") {
			msgs = append(msgs, line[strings.Index(line, "msg="):])
		}
	}
	for _, d := range []v1.Hash{d0, d1} {
		path := filepath.Join(dir, "blobs", "sha256", d.Hex)
		found := false
		for _, m := range msgs {
			m = m[:strings.Index(m+" digest=", " digest=")]
			found = found || (strings.Contains(m, d.String()) && strings.Contains(m, path))
		}
		if !found {
			t.Errorf("no warning message names blob %s and %s:\n%s", d, path, logs.String())
		}
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Temp files live in DIR/.oslayer-tmp/run-*/ while a run writes; a run
// directory no live process holds (a killed run's) is removed by the next
// write, and a finished run leaves nothing behind.
func TestLayoutSweepsTempOfKilledRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	b := built(t, mkImage(t, nil, mkLayers(t, "lay", 2, 2048)...))
	p := newPublisher(t, "oci:"+dir+":worker", nil)
	writeCommit(t, p, b)
	stale := filepath.Join(dir, publish.TempDirName, "run-killed")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "blob-0123456789ab-1"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// Temp files an older version left among the blobs: removed once
	// untouched for a while, kept while they might still be written.
	oldTmp := filepath.Join(dir, "blobs", "sha256", ".tmp-0123456789ab-2")
	freshTmp := filepath.Join(dir, "blobs", "sha256", ".tmp-0123456789ab-3")
	for _, f := range []string{oldTmp, freshTmp} {
		if err := os.WriteFile(f, make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(oldTmp, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	writeCommit(t, p, b)
	if _, err := os.Stat(oldTmp); err == nil {
		t.Errorf("an hour-old temp file among the blobs was kept")
	}
	if _, err := os.Stat(freshTmp); err != nil {
		t.Errorf("a fresh temp file among the blobs was removed: %v", err)
	}
	os.Remove(freshTmp)
	ents, err := os.ReadDir(filepath.Join(dir, publish.TempDirName))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("temp dir after a rewrite holds %v", ents)
	}
	for _, n := range blobFiles(t, dir) {
		if strings.Contains(n, "tmp") {
			t.Errorf("temp file %s among the blobs", n)
		}
	}
}
