package controller_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/pipeline/settings"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// TestMultiArchPoolImage: a PoolImage with arch [amd64, arm64] onto a
// two-platform base reaches Ready with status.image the pool's OCI index
// of one image per platform, signed; oslayer verify and the node policy
// (skopeo with the files oslayer trust writes) accept it, and oslayer
// build --arch amd64,arm64 of the same OSC onto the same base builds the
// same index (same digest).
func TestMultiArchPoolImage(t *testing.T) {
	skopeoBin := regtest.Require(t, "skopeo")
	bin := oslayerCmd(t)
	version := strings.TrimPrefix(strings.TrimSpace(regtest.Run(t, nil, bin, "--version")), "oslayer version ")
	e := newEnv(t)
	e.runManager(t, func(o *controller.ManagerOptions) { o.Options.Version = version })
	idx, err := synth.MultiArchBase(0.0002, "amd64", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.PushIndex(e.ctx, idx, e.reg.Host+"/fcos/multi:stable"); err != nil {
		t.Fatal(err)
	}
	base := e.host + "/fcos/multi:stable"
	osc := oscSecret("multi")
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: osc})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Base, pi.Spec.Arch = base, []string{"amd64", "arm64"}
	e.create(t, pi)
	pi = e.wait(t, "worker", "Ready", ready)
	image := pi.Status.Image
	if !strings.HasPrefix(image, e.host+"/os/worker@sha256:") || !pi.Status.Signed ||
		!strings.HasPrefix(pi.Status.InputsDigest, "sha256:") || !strings.HasPrefix(pi.Status.BaseDigest, "sha256:") || len(pi.Status.BaseDigest) != 71 {
		t.Fatalf("status: %+v", pi.Status)
	}
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("status.image %s is no index: %v", image, err)
	}
	im, err := got.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("index %s: %+v", image, im.Manifests)
	}
	e.nodeAccepts(t, skopeoBin, image)
	for _, m := range im.Manifests {
		e.nodeAccepts(t, skopeoBin, e.host+"/os/worker@"+m.Digest.String())
	}

	// The CLI builds the same index from the same input: the node-agent
	// Secret's manifest, as the controller reads it.
	dir := t.TempDir()
	oscPath, digestFile := filepath.Join(dir, "secret.yaml"), filepath.Join(dir, "digest")
	var secret corev1.Secret
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "osc-worker"}, &secret); err != nil {
		t.Fatal(err)
	}
	manifest, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": string(secret.Type),
		"metadata": map[string]any{"name": secret.Name, "namespace": secret.Namespace}, "data": secret.Data})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(oscPath, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	regtest.Run(t, []string{"HOME=" + dir}, bin, "build", "--base", base, "--pool", "worker", "--osc", oscPath,
		"--arch", "amd64,arm64", "--push", e.host+"/os/cli:latest", "--base-index-cache", dir, "--digest-file", digestFile)
	cli, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.host + "/os/cli@" + image[strings.LastIndex(image, "@")+1:]; strings.TrimSpace(string(cli)) != want {
		t.Errorf("oslayer build --arch amd64,arm64: %s, want %s (the PoolImage's index)", cli, want)
	}
}

// TestArchValidation: the API server refuses all with another
// architecture, an architecture it does not know and one given twice.
func TestArchValidation(t *testing.T) {
	e := newEnv(t)
	for name, c := range map[string]struct {
		arch []string
		want string
	}{
		"all-and-amd64": {[]string{"all", "amd64"}, "all stands alone"},
		"unknown":       {[]string{"mips"}, "Unsupported value"},
		"twice":         {[]string{"amd64", "amd64"}, "Duplicate value"},
	} {
		pi := e.poolImage(name, v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "x"}})
		pi.Spec.Arch = c.arch
		if err := e.c.Create(e.ctx, pi); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("arch %v: %v, want %q", c.arch, err, c.want)
		}
	}
}

// TestSpecRefused: layer limits the build specification refuses
// (warnLayers not below maxLayers) make the PoolImage Degraded with a
// message naming the field; nothing is pushed.
func TestSpecRefused(t *testing.T) {
	e := start(t)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("limits")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Preflight = &settings.Preflight{WarnLayers: 60, MaxLayers: 50}
	e.proxy.Reset()
	e.create(t, pi)
	pi = e.wait(t, "worker", "Degraded", degraded)
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	if c.Reason != controller.ReasonInvalid || !strings.Contains(c.Message, "spec.preflight.warnLayers: 60 must be below maxLayers 50") {
		t.Errorf("Degraded %s: %s", c.Reason, c.Message)
	}
	if n := e.proxy.Uploads(); n != 0 || pi.Status.Image != "" {
		t.Errorf("a refused spec pushed %d blobs, status.image %q", n, pi.Status.Image)
	}
}
