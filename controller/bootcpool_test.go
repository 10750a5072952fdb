package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/test/synth"
)

// bootcPool is a BootcNodePool of bootc-operator's real CRD (cluster
// scoped: named after the test's namespace) with spec.image.ref ref.
func (e *env) bootcPool(t *testing.T, ref string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := fmt.Sprintf(`apiVersion: node.bootc.dev/v1alpha1
kind: BootcNodePool
metadata: {name: %s}
spec:
  nodeSelector: {matchLabels: {pool: %s}}
  image: {ref: %q}
`, e.ns, e.ns, ref)
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	e.create(t, u)
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), u) })
	return u
}

// getBootcPool reads the test's BootcNodePool.
func (e *env) getBootcPool(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(controller.BootcNodePoolGVK)
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: e.ns}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// setBootcPoolStatus writes the pool's status as bootc-operator would.
func (e *env) setBootcPoolStatus(t *testing.T, deployed string, updateAvailable bool, upToDate metav1.ConditionStatus, reason string) {
	t.Helper()
	u := e.getBootcPool(t)
	u.Object["status"] = map[string]any{"targetDigest": deployed, "deployedDigest": deployed, "updateAvailable": updateAvailable,
		"conditions": []any{map[string]any{"type": "UpToDate", "status": string(upToDate), "reason": reason, "message": "set by the test",
			"lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z")}}}
	if err := e.c.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// mirrors waits until status.bootcNodePool says what the pool's status
// says, with Deployed as wanted.
func (e *env) mirrors(t *testing.T, deployed string, updateAvailable bool, upToDate, reason string, isDeployed bool) {
	t.Helper()
	e.wait(t, "worker", "status.bootcNodePool mirroring the pool", func(pi *v1alpha1.PoolImage) bool {
		s := pi.Status.BootcNodePool
		return s != nil && s.DeployedDigest == deployed && s.TargetDigest == deployed && s.UpdateAvailable == updateAvailable &&
			s.UpToDate == upToDate && s.UpToDateReason == reason && s.Deployed == isDeployed
	})
}

// TestBootcNodePoolHandOff: a PoolImage whose spec.publish.bootcNodePool
// names a pool that does not exist is Ready with the BootcNodePool
// condition false naming the pool, and nothing else changes; once the
// pool is created (the watch) its spec.image.ref becomes status.image's
// digested reference (no tag); status.bootcNodePool mirrors the pool's
// deployedDigest, updateAvailable and UpToDate condition as the test sets
// them, Deployed only for the published digest.
func TestBootcNodePoolHandOff(t *testing.T) {
	e := start(t)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("bootc")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Publish = &v1alpha1.Publish{BootcNodePool: e.ns}
	e.create(t, pi)
	pi = e.wait(t, "worker", "BootcNodePool condition", func(pi *v1alpha1.PoolImage) bool {
		return ready(pi) && meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionBootcNodePool) != nil
	})
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionBootcNodePool)
	if c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonBootcNodePoolNotFound || !strings.Contains(c.Message, "BootcNodePool "+e.ns+" not found") {
		t.Errorf("missing pool: condition %+v", c)
	}
	if degraded(pi) || pi.Status.BootcNodePool != nil {
		t.Errorf("missing pool: Degraded %v, status.bootcNodePool %+v: want nothing else changed", degraded(pi), pi.Status.BootcNodePool)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(controller.BootcNodePoolGVK)
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: e.ns}, u); !apierrors.IsNotFound(err) {
		t.Errorf("the missing pool: %v, want it not created", err)
	}

	e.bootcPool(t, "quay.io/example/os:latest")
	pi = e.wait(t, "worker", "BootcNodePool true", func(pi *v1alpha1.PoolImage) bool {
		return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionBootcNodePool)
	})
	digest := pi.Status.Image[strings.LastIndex(pi.Status.Image, "@")+1:]
	want := e.host + "/os/worker@" + digest
	if ref, _, _ := unstructured.NestedString(e.getBootcPool(t).Object, "spec", "image", "ref"); ref != want {
		t.Errorf("spec.image.ref %q, want %q (the digest, no tag)", ref, want)
	}

	e.setBootcPoolStatus(t, digest, false, metav1.ConditionTrue, "AllUpdated")
	e.mirrors(t, digest, false, "True", "AllUpdated", true)
	other := "sha256:" + strings.Repeat("ab", 32)
	e.setBootcPoolStatus(t, other, true, metav1.ConditionFalse, "RolloutInProgress")
	e.mirrors(t, other, true, "False", "RolloutInProgress", false)
}

// TestBootcNodePoolIndex: with a multi-platform status.image (an OCI
// index) the pool's spec.image.ref is the index, and a deployedDigest of
// one of its platform images counts as deployed (a node boots its
// platform's image); a digest the index does not list does not.
func TestBootcNodePoolIndex(t *testing.T) {
	e := start(t)
	idx, err := synth.MultiArchBase(0.0002, "amd64", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.PushIndex(e.ctx, idx, e.reg.Host+"/fcos/multi:stable"); err != nil {
		t.Fatal(err)
	}
	e.bootcPool(t, "quay.io/example/os:latest")
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("multi")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Base, pi.Spec.Arch = e.host+"/fcos/multi:stable", []string{"amd64", "arm64"}
	pi.Spec.Publish = &v1alpha1.Publish{BootcNodePool: e.ns}
	e.create(t, pi)
	pi = e.wait(t, "worker", "BootcNodePool true", func(pi *v1alpha1.PoolImage) bool {
		return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionBootcNodePool)
	})
	ref, err := name.ParseReference(pi.Status.Image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	index, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("status.image %s is no index: %v", pi.Status.Image, err)
	}
	m, err := index.IndexManifest()
	if err != nil || len(m.Manifests) != 2 {
		t.Fatalf("index: %v, %v", m, err)
	}
	if got, _, _ := unstructured.NestedString(e.getBootcPool(t).Object, "spec", "image", "ref"); got != ref.Context().Name()+"@"+ref.Identifier() {
		t.Errorf("spec.image.ref %q, want the index %s", got, pi.Status.Image)
	}
	arm := m.Manifests[1].Digest.String()
	e.setBootcPoolStatus(t, arm, false, metav1.ConditionTrue, "AllUpdated")
	e.mirrors(t, arm, false, "True", "AllUpdated", true)
	unlisted := "sha256:" + strings.Repeat("cd", 32)
	e.setBootcPoolStatus(t, unlisted, false, metav1.ConditionTrue, "AllUpdated")
	e.mirrors(t, unlisted, false, "True", "AllUpdated", false)
}

// TestBootcAPIAppearsLater runs the controller on an API server of its own
// that serves no node.bootc.dev API at first (bootc-operator not yet
// installed), as its ServiceAccount: a PoolImage naming a BootcNodePool
// builds and reports the pool not found. Then bootc-operator's CRDs are
// installed and the pool created: the same manager logs one line, starts
// the watch and hands the pool the image, without a restart.
func TestBootcAPIAppearsLater(t *testing.T) {
	cfg := onlyOurAPI(t)
	e := newEnvOn(t, cfg)
	e.runManagerAs(t, e.asServiceAccount(t), func(o *controller.ManagerOptions) { o.APIInterval = 200 * time.Millisecond })
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("late")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Publish = &v1alpha1.Publish{BootcNodePool: e.ns}
	e.create(t, pi)
	e.wait(t, "worker", "the pool not found", func(pi *v1alpha1.PoolImage) bool {
		c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionBootcNodePool)
		return ready(pi) && c != nil && c.Reason == controller.ReasonBootcNodePoolNotFound
	})

	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "test", "fixtures", "testdata", "bootc-operator")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatal(err)
	}
	e.bootcPool(t, "quay.io/example/os:latest")
	pi = e.wait(t, "worker", "BootcNodePool true", func(pi *v1alpha1.PoolImage) bool {
		return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionBootcNodePool)
	})
	want := pi.Status.Published.Image
	if ref, _, _ := unstructured.NestedString(e.getBootcPool(t).Object, "spec", "image", "ref"); ref != want || !strings.Contains(ref, "@sha256:") {
		t.Errorf("spec.image.ref %q, want %q", ref, want)
	}
	const appeared = "the cluster serves the BootcNodePool API now"
	if n := strings.Count(e.logs.String(), appeared); n != 1 {
		t.Errorf("%d log lines %q, want 1", n, appeared)
	}
}
