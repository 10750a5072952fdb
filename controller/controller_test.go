package controller_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/test/synth"
)

// TestGardenerSecret runs the controller against a real API server: the
// node-agent's OSC Secret gives a Ready PoolImage whose image is signed
// (sign.Verify, what oslayer verify runs); a changed OSC rebuilds; a
// change of the Secret that leaves its data alone builds nothing (no
// upload reaches the registry); an invalid OSC sets Degraded naming the
// Secret and the field, keeps the last good image and is not retried.
func TestGardenerSecret(t *testing.T) {
	e := newEnv(t)
	metrics := freeAddr(t)
	e.runManager(t, func(o *controller.ManagerOptions) { o.MetricsAddr = metrics })
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	e.create(t, e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}}))
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

	// The OSC rewritten with the same files (a comment added): its bytes,
	// and so the inputs digest the image records, changed; the layers are
	// the same ones and no layer blob is uploaded again.
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) {
		s.Data = map[string][]byte{"osc.yaml": append([]byte("# rewritten by a tool\n"), oscSecret("two")["osc.yaml"]...)}
	})
	pi = e.wait(t, "worker", "the rewritten OSC built", func(pi *v1alpha1.PoolImage) bool { return len(pi.Status.Builds) == 3 && ready(pi) })
	if a, b := layerDigests(t, second), layerDigests(t, pi.Status.Image); a != b {
		t.Errorf("the same files rewritten changed the layers:\n%s\n%s", a, b)
	}
	second = pi.Status.Image

	// An invalid OSC: Degraded names the Secret and the field, the last
	// good image stays, and the same input is not built again.
	bad := map[string][]byte{"osc.yaml": []byte(synth.OSCFiles("  - path: etc/relative\n    content:\n      inline:\n        data: x\n"))}
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = bad })
	pi = e.wait(t, "worker", "Degraded", degraded)
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	t.Logf("Degraded: %s: %s", c.Reason, c.Message)
	if c.Reason != controller.ReasonInvalid || !strings.Contains(c.Message, "Secret/"+e.ns+"/osc-worker") ||
		!strings.Contains(c.Message, "files[0]") || !strings.Contains(c.Message, "render") {
		t.Errorf("Degraded %s: %q does not name the step, document and field", c.Reason, c.Message)
	}
	if pi.Status.Image != second {
		t.Errorf("status.image %q, want the last good %q", pi.Status.Image, second)
	}
	// No retry storm: over 3 s with two unrelated changes of the Secret,
	// two reconciles, no build, no registry request.
	builds := len(pi.Status.Builds)
	e.proxy.Reset()
	reconciles := func() float64 {
		v, _ := metric(scrape(t, metrics), "controller_runtime_reconcile_total", map[string]string{"controller": "poolimage"})
		return v
	}
	before := reconciles()
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "again"} })
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "twice"} })
	deadline = time.Now().Add(30 * time.Second)
	for reconciles() == before && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	if n := reconciles() - before; n < 1 || n > 2 {
		t.Errorf("%v reconciles of the invalid input in the 3 s after the changes, want 1 or 2 (one per change, coalesced)", n)
	}
	if pi := e.get(t, "worker"); len(pi.Status.Builds) != builds || len(e.proxy.Requests()) != 0 {
		t.Errorf("the same invalid input was built again: %+v; registry: %s", pi.Status.Builds, e.proxy.Dump())
	}
	// Fixing the input recovers without intervention.
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("three") })
	pi = e.wait(t, "worker", "Ready after the fix", func(pi *v1alpha1.PoolImage) bool {
		return ready(pi) && pi.Status.Image != second && !meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	})
	e.verify(t, pi.Status.Image)
}

// TestSourceValidation: the API server rejects a PoolImage with no source
// or two, a Gardener source with both a name and a selector or neither,
// and spec.publish without a target or with an osImageURL MachineConfig
// for a source that is not an OpenShift pool (the CRD's validation,
// generated by controller-gen).
func TestSourceValidation(t *testing.T) {
	e := start(t)
	sel := &metav1.LabelSelector{MatchLabels: nodeAgentLabels("worker")}
	mcp := &v1alpha1.OpenShiftSource{MachineConfigPool: "worker"}
	gardener := &v1alpha1.GardenerSource{SecretName: "x"}
	const one = "exactly one of gardener, openshift, documents"
	for name, c := range map[string]struct {
		src     v1alpha1.Source
		publish *v1alpha1.Publish
		want    string
	}{
		"none": {want: one},
		"two": {src: v1alpha1.Source{Gardener: gardener,
			Documents: &v1alpha1.DocumentsSource{Objects: []v1alpha1.DocumentObject{{Kind: "ConfigMap", Name: "y"}}}}, want: one},
		"openshift-and-gardener": {src: v1alpha1.Source{Gardener: gardener, OpenShift: mcp}, want: one},
		"name-and-selector": {src: v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "x", Selector: sel}},
			want: "exactly one of secretName, selector"},
		"no-secret":       {src: v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{}}, want: "exactly one of secretName, selector"},
		"publish-nothing": {src: v1alpha1.Source{OpenShift: mcp}, publish: &v1alpha1.Publish{}, want: "publish: give machineConfig, configMap, bootcNodePool or several"},
		"machineconfig-gardener": {src: v1alpha1.Source{Gardener: gardener}, publish: &v1alpha1.Publish{MachineConfig: &v1alpha1.PublishMachineConfig{}},
			want: "publish.machineConfig needs source.openshift"},
	} {
		err := e.c.Create(context.Background(), &v1alpha1.PoolImage{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec:       v1alpha1.PoolImageSpec{Source: c.src, Base: e.base, Target: e.host + "/os/x:latest", Publish: c.publish},
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestManifests applies every manifest of config/ (the kustomization's
// resources, every YAML file under config/ listed by one) to the real API
// server with server-side apply: for real where the object can exist
// without a node (namespace, CRD, ServiceAccount, RBAC), dry-run for the
// Deployment and the samples (no kubelet to run the one, no controller
// wanted for the others).
func TestManifests(t *testing.T) {
	e := newEnv(t)
	config := manifests(t, filepath.Join("..", "config"))
	samples := manifests(t, filepath.Join("..", "config", "samples"))
	if len(config) < 8 || len(samples) < 2 {
		t.Fatalf("only %d manifests and %d samples", len(config), len(samples))
	}
	e.apply(t, config, func(u *unstructured.Unstructured) bool { return u.GetKind() == "Deployment" })
	e.apply(t, samples, func(*unstructured.Unstructured) bool { return true })

	// The Deployment runs as the ServiceAccount the RBAC binds.
	for _, u := range config {
		if u.GetKind() != "Deployment" {
			continue
		}
		sa, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
		var acct corev1.ServiceAccount
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: u.GetNamespace(), Name: sa}, &acct); err != nil {
			t.Errorf("Deployment %s runs as ServiceAccount %q: %v", u.GetName(), sa, err)
		}
	}
}

// remoteImage reads an image from the test's registry.
func remoteImage(t *testing.T, image string) v1.Image {
	t.Helper()
	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerDigests lists the layers of a registry image.
func layerDigests(t *testing.T, image string) string {
	t.Helper()
	m, err := remoteImage(t, image).Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var ds []string
	for _, l := range m.Layers {
		ds = append(ds, l.Digest.String())
	}
	return strings.Join(ds, " ")
}
