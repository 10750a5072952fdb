package assemble

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// testScale keeps the synthetic base at about 50 KB.
const testScale = 0.00001

var (
	synthOnce sync.Once
	synthImg  v1.Image
	synthErr  error
)

func synthBase(t *testing.T) v1.Image {
	t.Helper()
	synthOnce.Do(func() { synthImg, synthErr = synth.FCOSBase(testScale) })
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return synthImg
}

// layoutBase writes img into a fresh OCI layout and returns "oci:DIR".
func layoutBase(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "base")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	return "oci:" + dir
}

// handLayer builds a rendered layer holding files (name → content).
func handLayer(t *testing.T, name string, files map[string]string) render.Layer {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, n := range sortedKeys(files) {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: render.DefaultEpoch, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(tb.Bytes())
	zw.Close()
	d := sha256.Sum256(gz.Bytes())
	u := sha256.Sum256(tb.Bytes())
	return render.Layer{
		Name: name, CreatedBy: "oslayer: " + name + " from test",
		Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(d[:])},
		DiffID: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(u[:])},
		Size:   int64(gz.Len()), Files: len(files), Gzip: gz.Bytes(),
	}
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func rendered(t *testing.T) *render.Result {
	return &render.Result{
		Layers: []render.Layer{
			handLayer(t, "payload", map[string]string{"usr/lib/oslayer/kubelet": "kubelet config\n"}),
			handLayer(t, "config", map[string]string{"etc/sysctl.d/99-k8s.conf": "net.ipv4.ip_forward = 1\n"}),
		},
		KernelArgs:   []string{"systemd.unified_cgroup_hierarchy=1", "mitigations=auto"},
		InputsDigest: "sha256:" + strings.Repeat("ab", 32),
	}
}

func TestAssembleLayoutBase(t *testing.T) {
	ctx := context.Background()
	baseImg := synthBase(t)
	ref := layoutBase(t, baseImg)
	r := rendered(t)
	b, err := Assemble(ctx, AssembleRequest{Base: ref, Pool: "worker", Rendered: r, Version: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	bm, _ := baseImg.Manifest()
	bcf, _ := baseImg.ConfigFile()
	m, err := b.Image.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("media types %s / %s, want OCI", m.MediaType, m.Config.MediaType)
	}
	if len(m.Layers) != len(bm.Layers)+2 {
		t.Fatalf("%d layers, want %d", len(m.Layers), len(bm.Layers)+2)
	}
	for i, d := range bm.Layers {
		if m.Layers[i].Digest != d.Digest || m.Layers[i].Size != d.Size || m.Layers[i].MediaType != d.MediaType {
			t.Errorf("base layer %d changed: %+v, was %+v", i, m.Layers[i], d)
		}
	}
	for i, l := range r.Layers {
		got := m.Layers[len(bm.Layers)+i]
		if got.Digest != l.Digest || got.Size != l.Size || got.MediaType != types.OCILayer {
			t.Errorf("added layer %d: %+v, want digest %s size %d gzip", i, got, l.Digest, l.Size)
		}
		if b.Added[i].Digest != l.Digest || b.Added[i].Source != l.CreatedBy {
			t.Errorf("Added[%d] = %+v", i, b.Added[i])
		}
	}
	cf, _ := b.Image.ConfigFile()
	for k, v := range bcf.Config.Labels {
		if cf.Config.Labels[k] != v {
			t.Errorf("base label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	want := map[string]string{
		LabelPool: "worker", LabelInputsDigest: r.InputsDigest, LabelVersion: "v0.1.0",
		LabelKernelArgs: `["systemd.unified_cgroup_hierarchy=1","mitigations=auto"]`,
		LabelBaseDigest: b.Base.Digest.String(),
	}
	for k, v := range want {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	for k, v := range cf.Config.Labels {
		if strings.Contains(v, ref) {
			t.Errorf("label %s = %q names the base's location %s", k, v, ref)
		}
	}
	bd, _ := baseImg.Digest()
	if b.Base.Digest != bd {
		t.Errorf("base digest %s, want %s", b.Base.Digest, bd)
	}
	if cf.Architecture != "amd64" || cf.OS != "linux" || strings.Join(cf.Config.Cmd, " ") != "/sbin/init" {
		t.Errorf("base config not kept: %s/%s cmd %v", cf.OS, cf.Architecture, cf.Config.Cmd)
	}
	if len(cf.History) != len(bcf.History)+2 {
		t.Fatalf("%d history entries, want %d", len(cf.History), len(bcf.History)+2)
	}
	for i, l := range r.Layers {
		h := cf.History[len(bcf.History)+i]
		if h.CreatedBy != l.CreatedBy || !h.Created.Time.Equal(render.DefaultEpoch) || h.EmptyLayer {
			t.Errorf("history %d = %+v", i, h)
		}
	}
	if !cf.Created.Time.Equal(render.DefaultEpoch) {
		t.Errorf("created %v, want %v", cf.Created, render.DefaultEpoch)
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) || cf.RootFS.DiffIDs[len(m.Layers)-1] != r.Layers[1].DiffID {
		t.Errorf("diff_ids %v", cf.RootFS.DiffIDs)
	}
	if m.Annotations[AnnotationBaseDigest] != bd.String() {
		t.Errorf("annotations %v", m.Annotations)
	}
	// The image is valid: every layer's digest and diffID match its bytes.
	ls, _ := b.Image.Layers()
	for i, l := range ls {
		d, _ := l.Digest()
		if d != m.Layers[i].Digest {
			t.Errorf("layer %d digest %s, manifest %s", i, d, m.Layers[i].Digest)
		}
	}
	raw, _ := b.Image.RawManifest()
	if sha256Hash(raw) != b.Digest {
		t.Errorf("digest %s does not match the manifest bytes", b.Digest)
	}
}

func TestAssembleDeterministic(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	base, err := ResolveBase(ctx, ref, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	digest := func(mod func(*AssembleRequest)) v1.Hash {
		t.Helper()
		req := AssembleRequest{BaseImage: base, Pool: "worker", Rendered: rendered(t), Version: "v1"}
		if mod != nil {
			mod(&req)
		}
		b, err := Assemble(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return b.Digest
	}
	d0 := digest(nil)
	if d1 := digest(nil); d1 != d0 {
		t.Fatalf("same inputs, digests %s and %s", d0, d1)
	}
	// Resolving the base again changes nothing either.
	if d1 := digest(func(r *AssembleRequest) { r.BaseImage = nil; r.Base = ref }); d1 != d0 {
		t.Fatalf("re-resolved base: digest %s, want %s", d1, d0)
	}
	changes := map[string]func(*AssembleRequest){
		"pool":  func(r *AssembleRequest) { r.Pool = "infra" },
		"epoch": func(r *AssembleRequest) { r.Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) },
		"kargs": func(r *AssembleRequest) { r.Rendered.KernelArgs = []string{"quiet"} },
		"content": func(r *AssembleRequest) {
			r.Rendered.Layers[0] = handLayer(t, "payload", map[string]string{"usr/x": "y"})
		},
		"version": func(r *AssembleRequest) { r.Version = "v2" },
		"source":  func(r *AssembleRequest) { r.Rendered.Layers[1].CreatedBy = "other" },
	}
	for name, mod := range changes {
		if d := digest(mod); d == d0 {
			t.Errorf("changing %s kept digest %s", name, d)
		}
	}
}

func TestAssembleRegistryBaseReadsNoBlob(t *testing.T) {
	ctx := context.Background()
	reg := regtest.Memory(t) // the proxy counts what the client reads
	proxy := regtest.NewProxy(t, reg.Host)
	img := synthBase(t)
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	cfgName, _ := img.ConfigName()
	proxy.Reset()
	ref := proxy.Host + "/fcos/base:stable"
	var digests []v1.Hash
	for range 2 {
		b, err := Assemble(ctx, AssembleRequest{Base: ref, Pool: "worker", Rendered: rendered(t), Registry: &registry.Options{}})
		if err != nil {
			t.Fatal(err)
		}
		// Layers(), Manifest, Config of the result must not read blobs either.
		if _, err := b.Image.Layers(); err != nil {
			t.Fatal(err)
		}
		for _, l := range b.Added {
			if l.Size == 0 {
				t.Errorf("added layer %+v", l)
			}
		}
		if b.Base.Pinned || len(b.Warnings) == 0 || !strings.Contains(b.Warnings[0], "not pinned") {
			t.Errorf("unpinned base: pinned=%v warnings %q", b.Base.Pinned, b.Warnings)
		}
		digests = append(digests, b.Digest)
	}
	if digests[0] != digests[1] {
		t.Errorf("digests differ: %v", digests)
	}
	for _, r := range blobGetsBut(proxy.Requests(), cfgName) {
		t.Errorf("base blob downloaded: %s %s\n%s", r.Method, r.Path, proxy.Dump())
	}
	if proxy.BlobGets() > 2 {
		t.Errorf("%d blob GETs, want at most the config twice:\n%s", proxy.BlobGets(), proxy.Dump())
	}
	if _, down := proxy.Bytes(); down > 64<<10 {
		t.Errorf("%d bytes downloaded for two assemblies", down)
	}
}

func TestAssembleDockerBaseConverted(t *testing.T) {
	ctx := context.Background()
	oci := synthBase(t)
	om, _ := oci.Manifest()
	// Re-describe the layers as Docker layers (same blobs).
	ls, _ := oci.Layers()
	cf, _ := oci.ConfigFile()
	cf.RootFS.DiffIDs = nil
	cf.History = nil
	d2, _ := mutate.ConfigFile(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.DockerManifestSchema2), types.DockerConfigJSON), cf)
	for _, l := range ls {
		var err error
		if d2, err = mutate.Append(d2, mutate.Addendum{Layer: l, MediaType: types.DockerLayer}); err != nil {
			t.Fatal(err)
		}
	}
	dm, _ := d2.Manifest()
	if dm.MediaType != types.DockerManifestSchema2 || dm.Layers[0].MediaType != types.DockerLayer {
		t.Fatalf("test base is not Docker: %s %s", dm.MediaType, dm.Layers[0].MediaType)
	}
	ref := layoutBase(t, d2)
	b, err := Assemble(ctx, AssembleRequest{Base: ref, Pool: "worker", Rendered: rendered(t)})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := b.Image.Manifest()
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("not converted: %s %s", m.MediaType, m.Config.MediaType)
	}
	bls, _ := b.Image.Layers()
	for i := range om.Layers {
		if m.Layers[i].Digest != om.Layers[i].Digest || m.Layers[i].MediaType != types.OCILayer {
			t.Errorf("layer %d: %+v", i, m.Layers[i])
		}
		if mt, _ := bls[i].MediaType(); mt != types.OCILayer {
			t.Errorf("layer %d media type %s", i, mt)
		}
	}
}

func TestAssembleRefuses(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	r := rendered(t)
	r.Packages = []string{"extension usbguard", "kernelType:realtime"}
	_, err := Assemble(ctx, AssembleRequest{Base: ref, Pool: "worker", Rendered: r})
	if err == nil || !strings.Contains(err.Error(), "need the package stage") || !strings.Contains(err.Error(), "usbguard") {
		t.Errorf("packages: %v", err)
	}
	r = rendered(t)
	r.Layers[0].Digest = r.Layers[1].Digest
	if _, err := Assemble(ctx, AssembleRequest{Base: ref, Pool: "worker", Rendered: r}); err == nil || !strings.Contains(err.Error(), `layer "payload": digest`) {
		t.Errorf("bad digest: %v", err)
	}
	if _, err := Assemble(ctx, AssembleRequest{Base: ref, Rendered: rendered(t)}); err == nil || !strings.Contains(err.Error(), "pool") {
		t.Errorf("no pool: %v", err)
	}
	if _, err := Assemble(ctx, AssembleRequest{Base: ref, Pool: "w", Rendered: rendered(t), Arch: "arm64"}); err == nil || !strings.Contains(err.Error(), `"arm64"`) {
		t.Errorf("arch: %v", err)
	}
}

func TestResolveBaseHostile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	for _, ref := range []string{
		"",
		"oci:",
		"oci:" + filepath.Join(dir, "missing"),
		"oci:" + dir + ":bad tag",
		"UPPER/Case",
		"quay.io/x/y:tag with space",
		"127.0.0.1:1/x@sha256:1234",
		"../../etc/passwd",
		"127.0.0.1:1/not/there:latest",
	} {
		_, err := ResolveBase(ctx, ref, &registry.Options{}, "")
		if err == nil {
			t.Errorf("%q: no error", ref)
			continue
		}
		if ref != "" && !strings.Contains(err.Error(), ref) {
			t.Errorf("%q: error does not name the reference: %v", ref, err)
		}
	}
}

// The JSON of Built's pieces is stable (used in results).
func TestAddedLayerJSON(t *testing.T) {
	b, _ := json.Marshal(AddedLayer{Size: 3, Source: "x"})
	if !strings.Contains(string(b), `"source":"x"`) {
		t.Error(string(b))
	}
}
