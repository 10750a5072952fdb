package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// bootc-operator's rollout, mirrored into the PoolImage: the pool's
// counts and its Degraded condition (bootc-dev/bootc-operator @ 1ba04398,
// api/v1alpha1/bootcnodepool_types.go: reasons RolloutHalted — "2 or more
// nodes in reboot slots are unhealthy", set by driveRollout in
// internal/controller/rollout.go, which then assigns no more reboot
// slots — and NodeDegraded, NodeConflict, InvalidSpec,
// TagResolutionError, Healthy). The operator emits no Events of its own
// for them, so the controller emits one on the PoolImage when the reason
// becomes RolloutHalted or NodeDegraded.

// Reasons of the RolledBack condition.
const (
	ReasonRolloutHalted = "RolloutHalted"
	ReasonNoGoodImage   = "NoGoodImage"
	ReasonSuperseded    = "Superseded"
)

// bootcPoolDegraded is the type of the BootcNodePool's error condition.
const bootcPoolDegraded = "Degraded"

// mirrorRollout reads the pool's counts and Degraded condition into st.
func mirrorRollout(pool *unstructured.Unstructured, st *v1alpha1.BootcNodePoolStatus) error {
	for _, f := range []struct {
		to   *int32
		name string
	}{{&st.NodeCount, "nodeCount"}, {&st.UpdatedCount, "updatedCount"}, {&st.UpdatingCount, "updatingCount"}, {&st.DegradedCount, "degradedCount"}} {
		n, _, err := unstructured.NestedInt64(pool.Object, "status", f.name)
		if err != nil {
			return fmt.Errorf("BootcNodePool %s: %w", pool.GetName(), err)
		}
		*f.to = int32(n)
	}
	conds, _, err := unstructured.NestedSlice(pool.Object, "status", "conditions")
	if err != nil {
		return fmt.Errorf("BootcNodePool %s: %w", pool.GetName(), err)
	}
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		switch cm["type"] {
		case bootcPoolUpToDate:
			st.UpToDate, _ = cm["status"].(string)
			st.UpToDateReason, _ = cm["reason"].(string)
		case bootcPoolDegraded:
			st.Degraded, _ = cm["status"].(string)
			st.DegradedReason, _ = cm["reason"].(string)
			st.DegradedMessage, _ = cm["message"].(string)
		}
	}
	return nil
}

// rolloutCondition sets the condition RolloutDegraded from the pool's
// Degraded condition and emits a Warning Event when the pool became
// RolloutHalted or NodeDegraded (old is the previous mirror).
func (r *Reconciler) rolloutCondition(pi *v1alpha1.PoolImage, old, st *v1alpha1.BootcNodePoolStatus) {
	if st.Degraded == "" {
		meta.RemoveStatusCondition(&pi.Status.Conditions, v1alpha1.ConditionRollout)
		return
	}
	msg := fmt.Sprintf("BootcNodePool %s: %s (nodes %d, updated %d, updating %d, degraded %d)", st.Name,
		orDash(st.DegradedMessage), st.NodeCount, st.UpdatedCount, st.UpdatingCount, st.DegradedCount)
	setCond(pi, v1alpha1.ConditionRollout, metav1.ConditionStatus(st.Degraded), orDash(st.DegradedReason), msg)
	bad := st.Degraded == string(metav1.ConditionTrue) && (st.DegradedReason == ReasonRolloutHalted || st.DegradedReason == "NodeDegraded")
	if bad && (old == nil || old.Degraded != st.Degraded || old.DegradedReason != st.DegradedReason) {
		r.event(pi, corev1.EventTypeWarning, st.DegradedReason, "rollout", "%s", msg)
	}
}

// halted reports whether the pool halted the rollout of the published
// image.
func halted(pi *v1alpha1.PoolImage, st *v1alpha1.BootcNodePoolStatus) bool {
	return st.Degraded == string(metav1.ConditionTrue) && st.DegradedReason == ReasonRolloutHalted &&
		st.TargetDigest != "" && st.TargetDigest == digestOf(publishedImage(pi))
}

// rollBack applies spec.rollback to a halted rollout: it publishes the
// previous good image (rollbackTarget) in status.published, records
// status.rollback and says so in the condition RolledBack and an Event.
// It reports whether it rolled back.
func (r *Reconciler) rollBack(pi *v1alpha1.PoolImage, st *v1alpha1.BootcNodePoolStatus) bool {
	rb := pi.Spec.Rollback
	if rb == nil || !rb.Enabled || pi.Spec.Pin != "" || pi.Status.Rollback != nil || !halted(pi, st) {
		return false
	}
	from := publishedImage(pi)
	to := rollbackTarget(pi.Status.Builds, from, st.DeployedDigest)
	if to == nil {
		msg := fmt.Sprintf("the rollout of %s halted (%s) and spec.rollback found no earlier Succeeded build in status.builds to publish", from, st.DegradedMessage)
		if c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionRolledBack); c == nil || c.Reason != ReasonNoGoodImage {
			r.event(pi, corev1.EventTypeWarning, "RollbackFailed", "rollback", "%s", msg)
		}
		setCond(pi, v1alpha1.ConditionRolledBack, metav1.ConditionFalse, ReasonNoGoodImage, msg)
		return false
	}
	now := metav1.Now()
	msg := fmt.Sprintf("spec.rollback: the rollout of %s halted (BootcNodePool %s: %s); published %s again, the image the nodes ran before, until a newer build or spec.pin",
		from, st.Name, st.DegradedMessage, to.Image)
	pi.Status.Rollback = &v1alpha1.RollbackStatus{From: from, Image: to.Image, Reason: st.DegradedReason, Message: st.DegradedMessage, Time: now}
	pi.Status.Published = &v1alpha1.PublishedImage{Image: to.Image, InputsDigest: to.InputsDigest, BaseDigest: to.BaseDigest,
		Decision: v1alpha1.DecisionRolledBack, Message: msg, Time: &now}
	setCond(pi, v1alpha1.ConditionRolledBack, metav1.ConditionTrue, ReasonRolloutHalted, msg)
	r.logger().Warn("rolled back a halted rollout", "poolimage", pi.Namespace+"/"+pi.Name, "from", from, "to", to.Image)
	r.event(pi, corev1.EventTypeWarning, "RolledBack", "rollback", "%s", msg)
	return true
}

// rollbackTarget is the image a halted rollout of from returns to: the
// Succeeded build whose digest the pool last deployed to every node (the
// nodes' rollback deployment), else the newest Succeeded build older than
// from; nil when there is none.
func rollbackTarget(builds []v1alpha1.BuildRecord, from, deployed string) *v1alpha1.BuildRecord {
	good := func(b v1alpha1.BuildRecord) bool {
		return b.Result == "Succeeded" && b.Image != "" && digestOf(b.Image) != digestOf(from)
	}
	for i, b := range builds {
		if good(b) && deployed != "" && digestOf(b.Image) == deployed {
			return &builds[i]
		}
	}
	older := false
	for i, b := range builds {
		older = older || digestOf(b.Image) == digestOf(from)
		if older && good(b) {
			return &builds[i]
		}
	}
	return nil
}

// endRollback ends the hold of spec.rollback once a newer build than the
// halted image is there, or spec.pin is set: the decision then publishes
// as usual.
func endRollback(pi *v1alpha1.PoolImage) {
	rb := pi.Status.Rollback
	if rb == nil || (pi.Status.Image == rb.From && pi.Spec.Pin == "") {
		return
	}
	why := "a newer build " + pi.Status.Image + " replaces the halted image " + rb.From
	if pi.Spec.Pin != "" {
		why = "spec.pin " + pi.Spec.Pin + " decides the published image"
	}
	pi.Status.Rollback = nil
	setCond(pi, v1alpha1.ConditionRolledBack, metav1.ConditionFalse, ReasonSuperseded, "the rollback ended: "+why)
}
