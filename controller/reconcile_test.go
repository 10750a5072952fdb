package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// TestReconcile drives the reconciler directly (an in-memory API client,
// a real registry): the OSC Secret builds a signed image; a changed OSC
// builds a new one; a change that leaves the inputs alone uploads nothing;
// an invalid OSC is Degraded naming the Secret and the field, keeps the
// last good image, and is not built again until it changes.
func TestReconcile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, proxy := baseRegistry(ctx, t, regtest.Config{})
	kp, err := sign.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := controller.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.PoolImage{}).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: ns},
			Data: map[string][]byte{sign.SecretKeyField: kp.Private, sign.SecretPasswordField: []byte("pw")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: ns}, Data: oscSecret("one")},
		&v1alpha1.PoolImage{
			ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns, Generation: 1},
			Spec: v1alpha1.PoolImageSpec{
				Source:  v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}},
				Base:    proxy.Host + "/fcos/base:stable",
				Target:  proxy.Host + "/os/worker:latest",
				Signing: &v1alpha1.Signing{KeySecret: v1alpha1.LocalObjectReference{Name: "cosign"}},
			},
		}).Build()
	r := &controller.Reconciler{Client: c, Options: controller.Options{Version: "test", IndexCacheDir: t.TempDir()}}
	e := &env{c: c, proxy: proxy, host: proxy.Host, pub: kp.Public, ns: ns}
	reconcile := func() (ctrl.Result, error) {
		return r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "worker"}})
	}

	if _, err := reconcile(); err != nil {
		t.Fatal(err)
	}
	pi := e.get(t, "worker")
	first := pi.Status.Image
	if !ready(pi) || !pi.Status.Signed || !strings.HasPrefix(first, proxy.Host+"/os/worker@sha256:") {
		t.Fatalf("after the first build: %+v", pi.Status)
	}
	if pi.Status.InputsDigest == "" || pi.Status.BaseDigest == "" || pi.Status.LastBuildTime == nil || len(pi.Status.Builds) != 1 {
		t.Errorf("status incomplete: %+v", pi.Status)
	}
	e.verify(t, first)

	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("two") })
	if _, err := reconcile(); err != nil {
		t.Fatal(err)
	}
	pi = e.get(t, "worker")
	second := pi.Status.Image
	if second == first || !ready(pi) || len(pi.Status.Builds) != 2 {
		t.Fatalf("after a changed OSC: %+v", pi.Status)
	}
	e.verify(t, second)

	proxy.Reset()
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "yes"} })
	if _, err := reconcile(); err != nil {
		t.Fatal(err)
	}
	if n := proxy.Uploads(); n != 0 {
		t.Errorf("unchanged inputs uploaded %d blobs:\n%s", n, proxy.Dump())
	}
	if pi := e.get(t, "worker"); pi.Status.Image != second || len(pi.Status.Builds) != 2 {
		t.Errorf("unchanged inputs built: %+v", pi.Status)
	}

	bad := map[string][]byte{"osc.yaml": []byte(synth.OSCFiles("  - path: etc/relative\n    content:\n      inline:\n        data: x\n"))}
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = bad })
	if _, err := reconcile(); err != nil {
		t.Fatalf("an invalid input is not retried, want no error: %v", err)
	}
	pi = e.get(t, "worker")
	cd := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	if cd == nil || cd.Status != metav1.ConditionTrue || cd.Reason != controller.ReasonInvalid {
		t.Fatalf("not Degraded: %+v", pi.Status.Conditions)
	}
	t.Logf("Degraded: %s", cd.Message)
	if !strings.Contains(cd.Message, "render") || !strings.Contains(cd.Message, "Secret/"+ns+"/osc-worker") || !strings.Contains(cd.Message, "files[0]") {
		t.Errorf("Degraded %q does not name the step, document and field", cd.Message)
	}
	if pi.Status.Image != second {
		t.Errorf("status.image %q, want the last good %q", pi.Status.Image, second)
	}
	builds := len(pi.Status.Builds)
	proxy.Reset()
	if _, err := reconcile(); err != nil {
		t.Fatal(err)
	}
	if pi := e.get(t, "worker"); len(pi.Status.Builds) != builds || len(proxy.Requests()) != 0 {
		t.Errorf("the same invalid input was built again: %+v; registry: %s", pi.Status.Builds, proxy.Dump())
	}

	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("three") })
	if _, err := reconcile(); err != nil {
		t.Fatal(err)
	}
	pi = e.get(t, "worker")
	if !ready(pi) || pi.Status.Image == second || meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionDegraded) {
		t.Fatalf("after fixing the input: %+v", pi.Status)
	}
	e.verify(t, pi.Status.Image)
}
