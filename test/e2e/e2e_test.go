// Package e2e runs oslayer build end to end against the real CNCF registry
// (docker-registry) on 127.0.0.1 behind a counting proxy, and checks the
// result with independent clients: skopeo, crane and umoci.
package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// defaultScale keeps the synthetic FCOS base at about 140 KB (51 layers);
// OSLAYER_E2E_SCALE overrides it (1 is the real FCOS size, 697 MB).
const defaultScale = 0.0002

var (
	baseOnce sync.Once
	baseImg  v1.Image
	baseErr  error
)

func synthBase(t *testing.T) v1.Image {
	t.Helper()
	baseOnce.Do(func() {
		scale := defaultScale
		if s := os.Getenv("OSLAYER_E2E_SCALE"); s != "" {
			if scale, baseErr = strconv.ParseFloat(s, 64); baseErr != nil {
				return
			}
		}
		baseImg, baseErr = synth.FCOSBase(scale)
	})
	if baseErr != nil {
		t.Fatal(baseErr)
	}
	return baseImg
}

func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := fixtures.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func exampleOSC(t *testing.T) string {
	return filepath.Join(repoRoot(t), "examples", "gardener", "worker-osc.yaml")
}

// big reports whether OSLAYER_E2E_SCALE asks for a bigger base.
func big() bool { return os.Getenv("OSLAYER_E2E_SCALE") != "" }

func ctxT(t *testing.T) context.Context {
	d := 2 * time.Minute
	if big() {
		d = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// env is a registry with the synthetic base pushed to fcos/base:stable,
// reached through a counting proxy.
type env struct {
	reg   *regtest.Registry
	proxy *regtest.Proxy
	base  string // proxy.Host + "/fcos/base:stable"
}

func newEnv(t *testing.T) *env {
	t.Helper()
	reg := regtest.Start(t, regtest.Config{Filesystem: big()})
	proxy := regtest.NewProxy(t, reg.Host)
	start := time.Now()
	defer func() { t.Logf("synthetic base pushed in %v", time.Since(start).Round(time.Millisecond)) }()
	if _, err := synth.Push(ctxT(t), synthBase(t), reg.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	return &env{reg: reg, proxy: proxy, base: proxy.Host + "/fcos/base:stable"}
}

func buildPool(t *testing.T, base, target string, stages ...assemble.Stage) *assemble.Result {
	t.Helper()
	res, err := tryBuild(t, base, target, stages...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func tryBuild(t *testing.T, base, target string, stages ...assemble.Stage) (*assemble.Result, error) {
	t.Helper()
	return buildVersion(t, base, target, "e2e", stages...)
}

// buildVersion builds the example OSC onto base as oslayer version
// (recorded in a label: another version, another image digest) and pushes
// it to target.
func buildVersion(t *testing.T, base, target, version string, stages ...assemble.Stage) (*assemble.Result, error) {
	t.Helper()
	reg := &registry.Options{}
	pub, err := publish.New(target, reg)
	if err != nil {
		return nil, err
	}
	// The index of a registry base is shared through the target
	// repository's artifact (no disk cache here).
	var iopts assemble.IndexOptions
	if !registry.IsLayout(target) {
		tag, err := publish.ParseTarget(target)
		if err != nil {
			return nil, err
		}
		iopts.Repository = tag.Context().Name()
	}
	return assemble.Build(ctxT(t), assemble.Request{
		Render:   render.Request{OSCs: []string{exampleOSC(t)}, Pool: "worker"},
		Base:     base,
		Registry: reg,
		Version:  version,
		Index:    iopts,
	}, pub, stages...)
}

// renderExample renders the example OSC the way build does onto the
// synthetic base.
func renderExample(t *testing.T) *render.Result {
	t.Helper()
	return renderFor(t, render.Request{OSCs: []string{exampleOSC(t)}, Pool: "worker"}, synthBase(t))
}

// renderFor renders rreq the way build does: the base's index feeds the
// renderer.
func renderFor(t *testing.T, rreq render.Request, base v1.Image) *render.Result {
	t.Helper()
	if base != nil {
		ix, _, err := baseindex.Build(ctxT(t), base, baseindex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rreq.Base = ix.FS()
	}
	r, err := render.Render(ctxT(t), rreq)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctxT(t), name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// baseLayerGets counts downloads of the synthetic base's layer blobs.
func baseLayerGets(t *testing.T, p *regtest.Proxy) int {
	t.Helper()
	m, err := synthBase(t).Manifest()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range p.Requests() {
		for _, l := range m.Layers {
			if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/blobs/"+l.Digest.String()) {
				n++
			}
		}
	}
	return n
}

func writes(p *regtest.Proxy) []string {
	var w []string
	for _, r := range p.Requests() {
		if r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodPatch || r.Method == http.MethodDelete {
			w = append(w, r.Method+" "+r.Path)
		}
	}
	return w
}

type skopeoInspect struct {
	Digest string            `json:"Digest"`
	Labels map[string]string `json:"Labels"`
	Layers []string          `json:"Layers"`
}

func inspect(t *testing.T, ref string) skopeoInspect {
	t.Helper()
	args := []string{"inspect"}
	if strings.HasPrefix(ref, "docker://") {
		args = append(args, "--tls-verify=false")
	}
	var si skopeoInspect
	if err := json.Unmarshal([]byte(run(t, "skopeo", append(args, ref)...)), &si); err != nil {
		t.Fatal(err)
	}
	return si
}

// checkImage checks labels and layers of a built image with skopeo.
func checkImage(t *testing.T, ref string, res *assemble.Result, base v1.Image) {
	t.Helper()
	si := inspect(t, ref)
	if si.Digest != res.Digest.String() {
		t.Errorf("skopeo sees digest %s, build said %s", si.Digest, res.Digest)
	}
	bcf, _ := base.ConfigFile()
	for k, v := range bcf.Config.Labels {
		if si.Labels[k] != v {
			t.Errorf("base label %s = %q, want %q", k, si.Labels[k], v)
		}
	}
	bd, _ := base.Digest()
	for k, v := range map[string]string{
		assemble.LabelPool: "worker", assemble.LabelBaseDigest: bd.String(), assemble.LabelVersion: "e2e",
		assemble.LabelInputsDigest: res.InputsDigest,
	} {
		if si.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, si.Labels[k], v)
		}
	}
	bm, _ := base.Manifest()
	if len(si.Layers) != len(bm.Layers)+len(res.Layers) {
		t.Fatalf("%d layers, want %d base + %d added", len(si.Layers), len(bm.Layers), len(res.Layers))
	}
	for i, d := range bm.Layers {
		if si.Layers[i] != d.Digest.String() {
			t.Errorf("layer %d is %s, want base layer %s", i, si.Layers[i], d.Digest)
		}
	}
	for i, l := range res.Layers {
		if si.Layers[len(bm.Layers)+i] != l.Digest.String() {
			t.Errorf("added layer %d is %s, want %s", i, si.Layers[len(bm.Layers)+i], l.Digest)
		}
	}
}

// checkUnpacked unpacks an OCI layout image with umoci and checks that every
// entry of every rendered layer is in the root file system as rendered.
func checkUnpacked(t *testing.T, layoutDir, tag string, r *render.Result) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "bundle")
	run(t, "umoci", "unpack", "--rootless", "--image", layoutDir+":"+tag, dst)
	rootfs := filepath.Join(dst, "rootfs")
	n := 0
	for _, l := range r.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(l.Gzip))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
			p := filepath.Join(rootfs, h.Name)
			fi, err := os.Lstat(p)
			if err != nil {
				t.Errorf("%s (layer %s): %v", h.Name, l.Name, err)
				continue
			}
			switch h.Typeflag {
			case tar.TypeReg:
				want, _ := io.ReadAll(tr)
				got, err := os.ReadFile(p)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: content differs (%v)", h.Name, err)
				}
				if fi.Mode().Perm() != os.FileMode(h.Mode).Perm() || !fi.Mode().IsRegular() {
					t.Errorf("%s: mode %v, rendered %o", h.Name, fi.Mode(), h.Mode)
				}
			case tar.TypeSymlink:
				got, err := os.Readlink(p)
				if err != nil || got != h.Linkname {
					t.Errorf("%s: link %q (%v), rendered %q", h.Name, got, err, h.Linkname)
				}
			case tar.TypeDir:
				if !fi.IsDir() {
					t.Errorf("%s: not a directory", h.Name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("rendered layers hold no entries")
	}
	return rootfs
}

func TestBuildOntoRegistryBase(t *testing.T) {
	regtest.Require(t, "skopeo")
	regtest.Require(t, "umoci")
	e := newEnv(t)
	base := synthBase(t)
	bm, _ := base.Manifest()
	target := e.proxy.Host + "/pools/worker:latest"

	e.proxy.Reset()
	res := buildPool(t, e.base, target)
	// The first build on the base reads each base layer once, for its index.
	if n := baseLayerGets(t, e.proxy); n != len(bm.Layers) {
		t.Errorf("%d base layers downloaded, want each of %d once:\n%s", n, len(bm.Layers), e.proxy.Dump())
	}
	if res.BaseIndex == nil || res.BaseIndex.Source != "built" || res.BaseIndex.Published == "" {
		t.Errorf("base index %+v", res.BaseIndex)
	}
	if m := e.proxy.Mounts(); m != len(bm.Layers) {
		t.Errorf("%d cross-repository mounts, want %d (every base layer)", m, len(bm.Layers))
	}
	var added int64
	for _, l := range res.Layers {
		added += l.Size
	}
	if res.BytesUploaded < added || res.BytesUploaded > added+64<<10 {
		t.Errorf("uploaded %d bytes; the added layers are %d", res.BytesUploaded, added)
	}
	if !res.Tagged || res.Image != e.proxy.Host+"/pools/worker@"+res.Digest.String() {
		t.Errorf("result image %q tagged=%v", res.Image, res.Tagged)
	}
	t.Logf("first build: %d uploads, %d mounts, %d B uploaded, phases %+v", e.proxy.Uploads(), e.proxy.Mounts(), res.BytesUploaded, res.Phases)

	// Rebuild: same digest, nothing uploaded, no base blob read (the
	// index comes from the artifact next to the image).
	e.proxy.Reset()
	again := buildPool(t, e.base, target)
	if again.BaseIndex == nil || again.BaseIndex.Source != "registry" {
		t.Errorf("rebuild's base index %+v", again.BaseIndex)
	}
	t.Logf("rebuild: %d uploads, %d B uploaded, phases %+v", e.proxy.Uploads(), again.BytesUploaded, again.Phases)
	if again.Digest != res.Digest {
		t.Errorf("rebuild digest %s, first %s", again.Digest, res.Digest)
	}
	if e.proxy.Uploads() != 0 || again.BytesUploaded != 0 || baseLayerGets(t, e.proxy) != 0 {
		t.Errorf("rebuild: %d uploads, %d bytes, %d base layer GETs:\n%s", e.proxy.Uploads(), again.BytesUploaded, baseLayerGets(t, e.proxy), e.proxy.Dump())
	}

	// Independent clients (straight to the registry, not through the proxy).
	ref := e.reg.Host + "/pools/worker:latest"
	checkImage(t, "docker://"+ref, res, base)
	if _, err := exec.LookPath("crane"); err == nil || os.Getenv("OSLAYER_REQUIRE_TOOLS") == "1" {
		regtest.Require(t, "crane")
		run(t, "crane", "validate", "--remote", e.reg.Host+"/pools/worker@"+res.Digest.String(), "--insecure")
	}
	dir := filepath.Join(t.TempDir(), "copy")
	run(t, "skopeo", "copy", "--src-tls-verify=false", "docker://"+ref, "oci:"+dir+":worker")
	rootfs := checkUnpacked(t, dir, "worker", renderExample(t))
	// The base is still there underneath.
	if _, err := os.Stat(filepath.Join(rootfs, "usr/lib/modules", synth.KernelRelease, "vmlinuz")); err != nil {
		t.Errorf("base kernel missing: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(rootfs, "ostree")); err != nil || l != "sysroot/ostree" {
		t.Errorf("/ostree link %q %v", l, err)
	}
}

func TestBuildToLayout(t *testing.T) {
	regtest.Require(t, "skopeo")
	regtest.Require(t, "umoci")
	e := newEnv(t)
	out := filepath.Join(t.TempDir(), "out")
	res := buildPool(t, e.base, "oci:"+out)
	if res.Image != "oci:"+out+"@"+res.Digest.String() {
		t.Errorf("image %q", res.Image)
	}
	checkImage(t, "oci:"+out+":latest", res, synthBase(t))
	checkUnpacked(t, out, "latest", renderExample(t))

	// The same build into the registry gives the same digest.
	reg := buildPool(t, e.base, e.proxy.Host+"/pools/worker:latest")
	if reg.Digest != res.Digest {
		t.Errorf("registry build %s, layout build %s", reg.Digest, res.Digest)
	}
}

func TestBuildFromLayoutBase(t *testing.T) {
	regtest.Require(t, "skopeo")
	regtest.Require(t, "umoci")
	examples := filepath.Join(repoRoot(t), "examples", "base")
	base, _, err := (&registry.Options{}).Image(ctxT(t), "oci:"+examples, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	res := buildPool(t, "oci:"+examples, "oci:"+out)
	checkImage(t, "oci:"+out+":latest", res, base)
	rootfs := checkUnpacked(t, out, "latest", renderFor(t, render.Request{OSCs: []string{exampleOSC(t)}, Pool: "worker"}, base))
	if _, err := os.Stat(filepath.Join(rootfs, "usr/lib/systemd/system/containerd.service")); err != nil {
		t.Errorf("base unit missing: %v", err)
	}
	// Enablement followed the base's own [Install] sections: containerd has
	// WantedBy=multi-user.target, systemd-sysctl.service none (static).
	wants := filepath.Join(rootfs, "etc/systemd/system/multi-user.target.wants")
	if l, err := os.Readlink(filepath.Join(wants, "containerd.service")); err != nil || l != "/usr/lib/systemd/system/containerd.service" {
		t.Errorf("containerd.service link %q %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(wants, "systemd-sysctl.service")); !os.IsNotExist(err) {
		t.Errorf("static systemd-sysctl.service was linked: %v", err)
	}
	// And from the layout base into a registry.
	reg := regtest.Start(t, regtest.Config{})
	r2 := buildPool(t, "oci:"+examples, reg.Host+"/pools/worker:latest")
	if r2.Digest != res.Digest {
		t.Errorf("registry target digest %s, layout target %s", r2.Digest, res.Digest)
	}
	checkImage(t, "docker://"+reg.Host+"/pools/worker:latest", r2, base)
}

// The same base as an OCI layout and in a registry: both are indexed from
// their layers, the indexes are the same, and so is the image digest.
func TestRegistryAndLayoutBaseSameDigest(t *testing.T) {
	examples := "oci:" + filepath.Join(repoRoot(t), "examples", "base")
	base, _, err := (&registry.Options{}).Image(ctxT(t), examples, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := regtest.Start(t, regtest.Config{})
	bd, err := synth.Push(ctxT(t), base, reg.Host+"/fcos/example:1")
	if err != nil {
		t.Fatal(err)
	}
	fromLayout := buildPool(t, examples, "oci:"+filepath.Join(t.TempDir(), "out"))
	fromReg := buildPool(t, bd.String(), reg.Host+"/pools/worker:latest")
	for _, r := range []*assemble.Result{fromLayout, fromReg} {
		if r.BaseIndex == nil || r.BaseIndex.Source != "built" {
			t.Fatalf("base %s: index %+v", r.Base.Ref, r.BaseIndex)
		}
	}
	if fromReg.BaseIndex.Digest != fromLayout.BaseIndex.Digest {
		t.Errorf("index from the registry %s, from the layout %s", fromReg.BaseIndex.Digest, fromLayout.BaseIndex.Digest)
	}
	if fromReg.Digest != fromLayout.Digest {
		t.Errorf("image on the registry base %s, on the layout base %s", fromReg.Digest, fromLayout.Digest)
	}
	// The index enabled containerd.service as the base's [Install] says.
	if u := unitReport(fromReg, "containerd.service"); u == nil || u.InstallFrom != "base" {
		t.Errorf("containerd.service: %+v", u)
	}
}

// The README's form: an OCI layout target with a tag, which index.json
// records as org.opencontainers.image.ref.name.
func TestLayoutTargetWithTag(t *testing.T) {
	regtest.Require(t, "skopeo")
	examples := filepath.Join(repoRoot(t), "examples", "base")
	out := filepath.Join(t.TempDir(), "out")
	res := buildPool(t, "oci:"+examples, "oci:"+out+":worker")
	if si := inspect(t, "oci:"+out+":worker"); si.Digest != res.Digest.String() {
		t.Errorf("tag worker is %s, want %s", si.Digest, res.Digest)
	}
}

func TestHostileReferencesPushNothing(t *testing.T) {
	e := newEnv(t)
	good := e.proxy.Host + "/pools/worker:latest"
	for _, tc := range []struct{ base, target, want string }{
		{e.proxy.Host + "/fcos/missing:stable", good, "fcos/missing:stable"},
		{e.proxy.Host + "/fcos/base@sha256:" + strings.Repeat("0", 64), good, "fcos/base@sha256:000"},
		{"oci:" + filepath.Join(t.TempDir(), "nothing"), good, "nothing"},
		{"oci:" + filepath.Join(repoRoot(t), "examples", "base") + ":no-such-tag", good, "no-such-tag"},
		{"Quay.IO/../../etc/passwd", good, "Quay.IO/../../etc/passwd"},
		{e.proxy.Host + "/fcos/base:bad tag", good, "bad tag"},
		{"-base", good, "-base"},
		{e.base, e.proxy.Host + "/pools/../worker:latest", "push target"},
		{e.base, "http://" + e.proxy.Host + "/pools/worker", "push target"},
		{e.base, e.proxy.Host + "/pools/worker@sha256:" + strings.Repeat("1", 64), "push target"},
		{e.base, e.proxy.Host + "/Pools/Worker:latest", "push target"},
	} {
		e.proxy.Reset()
		_, err := tryBuild(t, tc.base, tc.target)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("base %q target %q: error %v, want it to mention %q", tc.base, tc.target, err, tc.want)
		}
		if w := writes(e.proxy); len(w) > 0 {
			t.Errorf("base %q target %q: wrote %v", tc.base, tc.target, w)
		}
	}
}

// A Docker schema 2 base is re-described with OCI media types; its layer
// blobs stay the same and are still mounted, never downloaded.
func TestBuildOntoDockerBase(t *testing.T) {
	regtest.Require(t, "skopeo")
	e := newEnv(t)
	docker, err := synth.Docker(synthBase(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Push(ctxT(t), docker, e.reg.Host+"/fcos/docker:stable"); err != nil {
		t.Fatal(err)
	}
	e.proxy.Reset()
	res := buildPool(t, e.proxy.Host+"/fcos/docker:stable", e.proxy.Host+"/pools/docker:latest")
	// Read once for the base index, never for the push.
	sm, _ := synthBase(t).Manifest()
	if n, dm := baseLayerGets(t, e.proxy), len(sm.Layers); n != dm {
		t.Errorf("%d base layer downloads, want each of %d once (the index):\n%s", n, dm, e.proxy.Dump())
	}
	dm, _ := docker.Manifest()
	if m := e.proxy.Mounts(); m != len(dm.Layers) {
		t.Errorf("%d mounts, want %d", m, len(dm.Layers))
	}
	raw := run(t, "skopeo", "inspect", "--raw", "--tls-verify=false", "docker://"+e.reg.Host+"/pools/docker:latest")
	var m v1.Manifest
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
		t.Errorf("manifest %s config %s, want OCI", m.MediaType, m.Config.MediaType)
	}
	for i, d := range dm.Layers {
		if m.Layers[i].Digest != d.Digest || m.Layers[i].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Errorf("layer %d: %+v, base %s", i, m.Layers[i], d.Digest)
		}
	}
	if len(m.Layers) != len(dm.Layers)+len(res.Layers) {
		t.Errorf("%d layers", len(m.Layers))
	}
	if _, err := exec.LookPath("crane"); err == nil || os.Getenv("OSLAYER_REQUIRE_TOOLS") == "1" {
		regtest.Require(t, "crane")
		run(t, "crane", "validate", "--remote", e.reg.Host+"/pools/docker@"+res.Digest.String(), "--insecure")
	}
}

// The OpenShift example: worker MachineConfigs (the master one is not
// selected) with kernel arguments, onto the example base.
func TestBuildOpenShiftExample(t *testing.T) {
	regtest.Require(t, "skopeo")
	regtest.Require(t, "umoci")
	root := repoRoot(t)
	examples := "oci:" + filepath.Join(root, "examples", "base")
	rreq := render.Request{MachineConfigs: []string{filepath.Join(root, "examples", "openshift")}, Pool: "worker"}
	out := filepath.Join(t.TempDir(), "out")
	pub, err := publish.New("oci:"+out+":worker", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := assemble.Build(ctxT(t), assemble.Request{Render: rreq, Base: examples, Version: "e2e"}, pub)
	if err != nil {
		t.Fatal(err)
	}
	si := inspect(t, "oci:"+out+":worker")
	if got := si.Labels[assemble.LabelKernelArgs]; got != `["systemd.unified_cgroup_hierarchy=1","mitigations=auto,nosmt"]` {
		t.Errorf("kernel arguments label %q", got)
	}
	if len(res.Inputs) != 2 {
		t.Errorf("inputs %+v, want the two worker MachineConfigs", res.Inputs)
	}
	baseImg, _, err := (&registry.Options{}).Image(ctxT(t), examples, nil)
	if err != nil {
		t.Fatal(err)
	}
	rootfs := checkUnpacked(t, out, "worker", renderFor(t, rreq, baseImg))
	if _, err := os.Stat(filepath.Join(rootfs, "etc/motd")); !os.IsNotExist(err) {
		t.Errorf("the master MachineConfig was applied: %v", err)
	}
}

// unitReport returns the report of unit name in r, or nil.
func unitReport(r *assemble.Result, name string) *render.UnitReport {
	if r.Report == nil {
		return nil
	}
	for i := range r.Report.Units {
		if r.Report.Units[i].Name == name {
			return &r.Report.Units[i]
		}
	}
	return nil
}
