package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/registry"
	"github.com/oslayer/oslayer/registry/sign"
	"github.com/oslayer/oslayer/test/k8senv"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// env is a real kube-apiserver and etcd with the PoolImage CRD installed,
// the controller running against it, and a real registry (behind a
// counting proxy) holding the synthetic FCOS-shaped base.
type env struct {
	c     client.Client
	proxy *regtest.Proxy
	base  string
	host  string
	pub   []byte
	ns    string
}

func start(t *testing.T) *env {
	t.Helper()
	assets := k8senv.Assets(t)
	reg := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, reg.Host)
	img, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("envtest (kube-apiserver and etcd from %s): %v", assets, err)
	}
	t.Cleanup(func() { _ = te.Stop() })
	mgr, err := controller.NewManager(cfg, controller.ManagerOptions{
		Options:     controller.Options{Version: "test", IndexCacheDir: t.TempDir()},
		MetricsAddr: "0", ProbeAddr: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop")
		}
	})
	s, err := controller.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sign.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{c: c, proxy: proxy, base: proxy.Host + "/fcos/base:stable", host: proxy.Host, pub: kp.Public, ns: "default"}
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: e.ns},
		Data: map[string][]byte{sign.SecretKeyField: kp.Private, sign.SecretPasswordField: []byte("pw")}})
	return e
}

func (e *env) create(t *testing.T, o client.Object) {
	t.Helper()
	if err := e.c.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// oscSecret is the Secret gardener-node-agent reads: the OSC under
// data key osc.yaml, with one file of the given content.
func oscSecret(body string) map[string][]byte {
	files := fmt.Sprintf("  - path: /etc/oslayer/pool.conf\n    permissions: 420\n    content:\n      inline:\n        data: %q\n", body)
	return map[string][]byte{"osc.yaml": []byte(synth.OSCFiles(files))}
}

func (e *env) get(t *testing.T, name string) *v1alpha1.PoolImage {
	t.Helper()
	var pi v1alpha1.PoolImage
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &pi); err != nil {
		t.Fatal(err)
	}
	return &pi
}

// wait polls the PoolImage until ok says so (at most a minute).
func (e *env) wait(t *testing.T, name, what string, ok func(*v1alpha1.PoolImage) bool) *v1alpha1.PoolImage {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pi := e.get(t, name)
		if ok(pi) {
			return pi
		}
		if time.Now().After(deadline) {
			t.Fatalf("PoolImage %s: no %s within a minute; status %+v", name, what, pi.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) updateSecret(t *testing.T, name string, f func(*corev1.Secret)) {
	t.Helper()
	var s corev1.Secret
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	f(&s)
	if err := e.c.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
}

func ready(pi *v1alpha1.PoolImage) bool {
	return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionReady)
}

func (e *env) verify(t *testing.T, image string) {
	t.Helper()
	pub, err := sign.ParsePublicKey("cosign.pub", e.pub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.Verify(context.Background(), image, pub, sign.WithRegistry(&registry.Options{}))
	if err != nil {
		t.Fatalf("verify %s: %v", image, err)
	}
	if v == nil {
		t.Fatalf("verify %s: no verification", image)
	}
}

// TestGardenerSecret runs the controller against a real API server: the
// node-agent's OSC Secret gives a Ready PoolImage whose image is signed
// (sign.Verify, what oslayer verify runs); a changed OSC rebuilds; a
// change of the Secret that leaves its data alone builds nothing (no
// upload reaches the registry); an invalid OSC sets Degraded naming the
// Secret and the field, keeps the last good image and is not retried.
func TestGardenerSecret(t *testing.T) {
	e := start(t)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	e.create(t, &v1alpha1.PoolImage{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: e.ns},
		Spec: v1alpha1.PoolImageSpec{
			Source:  v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}},
			Base:    e.base,
			Target:  e.host + "/os/worker:latest",
			Signing: &v1alpha1.Signing{KeySecret: v1alpha1.LocalObjectReference{Name: "cosign"}},
		},
	})
	pi := e.wait(t, "worker", "Ready", ready)
	first := pi.Status.Image
	if !strings.HasPrefix(first, e.host+"/os/worker@sha256:") || !pi.Status.Signed {
		t.Fatalf("image %q signed %v", first, pi.Status.Signed)
	}
	if pi.Status.InputsDigest == "" || pi.Status.BaseDigest == "" || pi.Status.LastBuildTime == nil || len(pi.Status.Builds) != 1 ||
		pi.Status.ObservedGeneration != pi.Generation {
		t.Errorf("status incomplete: %+v", pi.Status)
	}
	e.verify(t, first)

	// A changed OSC builds a new image.
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("two") })
	pi = e.wait(t, "worker", "rebuild", func(pi *v1alpha1.PoolImage) bool { return ready(pi) && pi.Status.Image != first })
	second := pi.Status.Image
	e.verify(t, second)
	if len(pi.Status.Builds) != 2 {
		t.Errorf("builds %+v", pi.Status.Builds)
	}

	// A label on the Secret changes nothing the build reads: the
	// controller looks (it checks the image is still there) and builds
	// nothing.
	e.proxy.Reset()
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "yes"} })
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(e.proxy.Dump(), "/manifests/") {
		if time.Now().After(deadline) {
			t.Fatal("the controller did not look at the image after the Secret changed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if n := e.proxy.Uploads(); n != 0 {
		t.Errorf("a no-op change uploaded %d blobs:\n%s", n, e.proxy.Dump())
	}
	if pi := e.get(t, "worker"); pi.Status.Image != second || len(pi.Status.Builds) != 2 {
		t.Errorf("a no-op change built: %+v", pi.Status)
	}

	// An invalid OSC: Degraded names the Secret and the field, the last
	// good image stays, and the same input is not built again.
	bad := map[string][]byte{"osc.yaml": []byte(synth.OSCFiles("  - path: etc/relative\n    content:\n      inline:\n        data: x\n"))}
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = bad })
	pi = e.wait(t, "worker", "Degraded", func(pi *v1alpha1.PoolImage) bool {
		return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	})
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	t.Logf("Degraded: %s: %s", c.Reason, c.Message)
	if c.Reason != controller.ReasonInvalid || !strings.Contains(c.Message, "Secret/default/osc-worker") ||
		!strings.Contains(c.Message, "files[0]") || !strings.Contains(c.Message, "render") {
		t.Errorf("Degraded %s: %q does not name the step, document and field", c.Reason, c.Message)
	}
	if pi.Status.Image != second {
		t.Errorf("status.image %q, want the last good %q", pi.Status.Image, second)
	}
	builds := len(pi.Status.Builds)
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "again"} })
	time.Sleep(2 * time.Second)
	if pi := e.get(t, "worker"); len(pi.Status.Builds) != builds {
		t.Errorf("the same invalid input was built again: %+v", pi.Status.Builds)
	}
	// Fixing the input recovers without intervention.
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("three") })
	pi = e.wait(t, "worker", "Ready after the fix", func(pi *v1alpha1.PoolImage) bool {
		return ready(pi) && pi.Status.Image != second && !meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	})
	e.verify(t, pi.Status.Image)
}

// TestSourceValidation: the API server rejects a PoolImage with no source
// or two (the CRD's validation, generated by controller-gen).
func TestSourceValidation(t *testing.T) {
	e := start(t)
	for name, src := range map[string]v1alpha1.Source{
		"none": {},
		"two": {Gardener: &v1alpha1.GardenerSource{SecretName: "x"},
			Documents: &v1alpha1.DocumentsSource{Objects: []v1alpha1.DocumentObject{{Kind: "ConfigMap", Name: "y"}}}},
	} {
		err := e.c.Create(context.Background(), &v1alpha1.PoolImage{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec:       v1alpha1.PoolImageSpec{Source: src, Base: e.base, Target: e.host + "/os/x:latest"},
		})
		if err == nil || !strings.Contains(err.Error(), "exactly one of gardener, documents") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestManifests applies every manifest of config/ (the kustomization's
// resources) and the samples to the real API server: the namespace for
// real, everything else server-side with dry-run.
func TestManifests(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	var files []string
	for _, k := range []string{filepath.Join("..", "config"), filepath.Join("..", "config", "samples")} {
		b, err := os.ReadFile(filepath.Join(k, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var kz struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.Unmarshal(b, &kz); err != nil {
			t.Fatal(err)
		}
		for _, r := range kz.Resources {
			files = append(files, filepath.Join(k, r))
		}
	}
	if len(files) < 8 {
		t.Fatalf("only %d manifests: %v", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			opts := []client.PatchOption{client.FieldOwner("oslayer-test"), client.ForceOwnership}
			if u.GetKind() != "Namespace" {
				opts = append(opts, client.DryRunAll)
			}
			if err := e.c.Patch(ctx, &u, client.Apply, opts...); err != nil {
				t.Errorf("%s: %s %s: %v", f, u.GetKind(), u.GetName(), err)
			}
		}
	}
}
