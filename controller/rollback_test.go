package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// haltBootcPool writes the pool's status as bootc-operator's driveRollout
// does when it halts the rollout of target (2+ unhealthy nodes in reboot
// slots): Degraded True, reason RolloutHalted, with its counts.
func (e *env) haltBootcPool(t *testing.T, target, deployed string) {
	t.Helper()
	u := e.getBootcPool(t)
	now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	u.Object["status"] = map[string]any{"targetDigest": target, "deployedDigest": deployed, "updateAvailable": true,
		"nodeCount": int64(3), "updatedCount": int64(0), "updatingCount": int64(2), "degradedCount": int64(2),
		"conditions": []any{
			map[string]any{"type": "UpToDate", "status": "False", "reason": "RolloutInProgress", "message": "set by the test", "lastTransitionTime": now},
			map[string]any{"type": "Degraded", "status": "True", "reason": "RolloutHalted", "lastTransitionTime": now,
				"message": "Rollout halted: 2+ unhealthy nodes in reboot slots (node-a: NotReady, node-b: NotReady)"}}}
	if err := e.c.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// stagedBootcNode is a BootcNode that staged image and reports whether
// the staged entry can soft-reboot, as bootc-operator's daemon does.
func (e *env) stagedBootcNode(t *testing.T, name, image string, softRebootCapable bool) {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := fmt.Sprintf("apiVersion: node.bootc.dev/v1alpha1\nkind: BootcNode\nmetadata: {name: %s}\nspec: {desiredImage: %q, desiredImageState: Staged}\n", name, image)
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	e.create(t, u)
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), u) })
	u.Object["status"] = map[string]any{"staged": map[string]any{"image": image, "imageDigest": digestOf(image), "softRebootCapable": softRebootCapable}}
	if err := e.c.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// poolSpec is the BootcNodePool's spec.image.ref and rebootPolicy.
func (e *env) poolSpec(t *testing.T) (ref, policy string) {
	t.Helper()
	u := e.getBootcPool(t)
	ref, _, _ = unstructured.NestedString(u.Object, "spec", "image", "ref")
	policy, _, _ = unstructured.NestedString(u.Object, "spec", "disruption", "rebootPolicy")
	return ref, policy
}

// TestBootcRollback, with bootc-operator's CRDs: the first image goes to
// the BootcNodePool with RebootOnly; a changed file (soft-reboot
// eligible on bootc, as oslayer diff predicts) goes with AllowSoftReboot
// and the prediction recorded; a BootcNode that staged it and reports it
// cannot soft-reboot is named (Event SoftRebootMismatch). The operator
// halts the rollout (Degraded RolloutHalted): the PoolImage mirrors the
// condition, the counts and an Event; without spec.rollback nothing is
// rolled back; with it, the previous good image (the pool's
// deployedDigest) is published again — status.published RolledBack,
// status.rollback, condition RolledBack, Event RolledBack, the pool's
// spec.image.ref back at the first image with RebootOnly — and stays
// until a newer build replaces the halted image.
func TestBootcRollback(t *testing.T) {
	e := start(t)
	e.bootcPool(t, "quay.io/example/os:latest")
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Publish = &v1alpha1.Publish{BootcNodePool: e.ns}
	e.create(t, pi)
	handed := func(what string, ok func(*v1alpha1.PoolImage) bool) *v1alpha1.PoolImage {
		return e.wait(t, "worker", what, func(pi *v1alpha1.PoolImage) bool {
			return ready(pi) && pi.Status.BootcNodePool != nil && pi.Status.Published != nil && ok(pi)
		})
	}
	first := handed("the first image handed off", func(pi *v1alpha1.PoolImage) bool { return true }).Status.Image
	if ref, policy := e.poolSpec(t); digestOf(ref) != digestOf(first) || policy != controller.RebootOnly {
		t.Errorf("the first image: pool ref %s policy %s, want %s RebootOnly", ref, policy, first)
	}
	e.setBootcPoolStatus(t, digestOf(first), false, metav1.ConditionTrue, "AllUpdated")

	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("two") })
	pi = handed("the second image handed off", func(pi *v1alpha1.PoolImage) bool {
		return pi.Status.Image != first && pi.Status.BootcNodePool.Ref != "" && digestOf(pi.Status.BootcNodePool.Ref) == digestOf(pi.Status.Image)
	})
	second := pi.Status.Image
	if st := pi.Status.BootcNodePool; !st.SoftRebootPredicted || st.RebootPolicy != controller.AllowSoftReboot || !strings.Contains(st.SoftRebootWhy, "soft reboot eligible") {
		t.Errorf("a file change: status.bootcNodePool %+v, want a soft reboot predicted", st)
	}
	if _, policy := e.poolSpec(t); policy != controller.AllowSoftReboot {
		t.Errorf("a file change: the pool's rebootPolicy %s, want AllowSoftReboot", policy)
	}
	e.stagedBootcNode(t, e.ns+"-a", second, false)
	e.setBootcPoolStatus(t, digestOf(first), true, metav1.ConditionFalse, "RolloutInProgress")
	pi = handed("the staged node's report compared", func(pi *v1alpha1.PoolImage) bool {
		return pi.Status.BootcNodePool.StagedNodes == 1 && pi.Status.BootcNodePool.SoftRebootMismatch != ""
	})
	if st := pi.Status.BootcNodePool; st.SoftRebootCapable != 0 || !strings.Contains(st.SoftRebootMismatch, e.ns+"-a") {
		t.Errorf("the staged node's report: %+v", st)
	}
	e.waitEvent(t, "worker", "SoftRebootMismatch", e.ns+"-a")

	// Halted without spec.rollback: mirrored, not rolled back.
	e.haltBootcPool(t, digestOf(second), digestOf(first))
	pi = handed("the halt mirrored", func(pi *v1alpha1.PoolImage) bool {
		c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionRollout)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "RolloutHalted"
	})
	if st := pi.Status.BootcNodePool; st.NodeCount != 3 || st.DegradedCount != 2 || st.UpdatingCount != 2 || pi.Status.Published.Image != second || pi.Status.Rollback != nil {
		t.Errorf("halted without spec.rollback: status.bootcNodePool %+v, published %+v, rollback %+v", st, pi.Status.Published, pi.Status.Rollback)
	}
	e.waitEvent(t, "worker", "RolloutHalted", "node-a: NotReady")

	// spec.rollback: the first image is published again.
	e.updateSpec(t, "worker", func(s *v1alpha1.PoolImageSpec) { s.Rollback = &v1alpha1.RollbackPolicy{Enabled: true} })
	pi = handed("rolled back", func(pi *v1alpha1.PoolImage) bool { return pi.Status.Published.Decision == v1alpha1.DecisionRolledBack })
	if rb := pi.Status.Rollback; rb == nil || rb.From != second || rb.Image != first || rb.Reason != "RolloutHalted" || pi.Status.Published.Image != first || pi.Status.Image != second {
		t.Errorf("the rollback: status.rollback %+v, published %+v", rb, pi.Status.Published)
	}
	if !meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionRolledBack) {
		t.Errorf("no RolledBack condition: %+v", pi.Status.Conditions)
	}
	e.waitEvent(t, "worker", "RolledBack", first)
	e.wait(t, "worker", "the pool back at the first image", func(*v1alpha1.PoolImage) bool {
		ref, policy := e.poolSpec(t)
		return digestOf(ref) == digestOf(first) && policy == controller.RebootOnly
	})
	if n := len(pi.Status.Builds); n != 2 {
		t.Errorf("%d builds, want 2: the rollback built nothing", n)
	}

	// A newer build ends the rollback and is published.
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("three") })
	pi = handed("the third image published", func(pi *v1alpha1.PoolImage) bool {
		return pi.Status.Image != second && pi.Status.Published.Image == pi.Status.Image
	})
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionRolledBack)
	if pi.Status.Rollback != nil || c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonSuperseded {
		t.Errorf("after a newer build: status.rollback %+v, RolledBack %+v", pi.Status.Rollback, c)
	}
}
