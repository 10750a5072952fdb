package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// Reasons of the Pinned condition.
const (
	ReasonPinned    = "Pinned"
	ReasonNotPinned = "NotPinned"
)

// choose records in status.published the image spec.publish hands on
// (Decide), analysing the change from the published image to the newest
// build first when it was not (status.change), and sets Pinned and a
// refused spec.pin's Degraded. The status is written when it changed.
func (r *Reconciler) choose(ctx context.Context, pi *v1alpha1.PoolImage) error {
	before := pi.Status.DeepCopy()
	r.decide(ctx, pi)
	if equality.Semantic.DeepEqual(before, &pi.Status) {
		return nil
	}
	return r.Client.Status().Update(ctx, pi)
}

// decide is choose without the write: a caller that writes the status
// anyway calls it first, so that one write carries the decision (a
// second write would show a reconcile reading the cache in between a
// status without it).
func (r *Reconciler) decide(ctx context.Context, pi *v1alpha1.PoolImage) {
	st := &pi.Status
	built := Candidate{Image: st.Image, InputsDigest: st.InputsDigest, BaseDigest: st.BaseDigest}
	if p := st.Published; p != nil && p.Image != "" && built.Image != "" && p.Image != built.Image &&
		(st.Change == nil || st.Change.From != p.Image || st.Change.To != built.Image) {
		st.Change = r.analyse(ctx, pi, p.Image, built.Image)
	}
	endRollback(pi) // bootcrollout.go
	d := Decide(PublishInput{Built: built, Published: st.Published, Pin: pi.Spec.Pin, History: st.Builds,
		LiveApply: liveApply(pi), Change: st.Change, Rollback: st.Rollback})
	r.applyDecision(pi, d)
}

// liveApply reports whether the image goes to an OpenShift pool as its
// osImageURL.
func liveApply(pi *v1alpha1.PoolImage) bool {
	p := pi.Spec.Publish
	return p != nil && p.MachineConfig != nil && pi.Spec.Source.OpenShift != nil
}

// applyDecision writes the decision into the status and emits an Event
// when it is new.
func (r *Reconciler) applyDecision(pi *v1alpha1.PoolImage, d Decision) {
	st := &pi.Status
	old := st.Published
	if d.Image != "" && (old == nil || old.Image != d.Image || old.Decision != d.Decision || old.Message != d.Message) {
		p := &v1alpha1.PublishedImage{Image: d.Image, InputsDigest: d.InputsDigest, BaseDigest: d.BaseDigest,
			Decision: d.Decision, Message: d.Message}
		if old != nil && old.Image == d.Image {
			p.Time = old.Time
		} else {
			now := metav1.Now()
			p.Time = &now
		}
		st.Published = p
		switch d.Decision {
		case v1alpha1.DecisionLiveApplied, v1alpha1.DecisionNoNodeChange:
			r.event(pi, corev1.EventTypeNormal, "PublishHeld", "publish", "spec.publish keeps %s: %s", d.Image, d.Message)
		case v1alpha1.DecisionPinned:
			r.event(pi, corev1.EventTypeNormal, "Pinned", "publish", "%s", d.Message)
		}
	}
	r.pinConditions(pi, d)
}

// pinConditions sets Pinned, and Degraded for a refused spec.pin (cleared
// once spec.pin is good or gone).
func (r *Reconciler) pinConditions(pi *v1alpha1.PoolImage, d Decision) {
	conds := pi.Status.Conditions
	switch {
	case d.PinError != "":
		c := meta.FindStatusCondition(conds, v1alpha1.ConditionDegraded)
		if p := meta.FindStatusCondition(conds, v1alpha1.ConditionPinned); p == nil || p.Reason != v1alpha1.ReasonPinInvalid || p.Message != d.PinError {
			r.event(pi, corev1.EventTypeWarning, v1alpha1.ReasonPinInvalid, "publish", "%s", d.PinError)
		}
		setCond(pi, v1alpha1.ConditionPinned, metav1.ConditionFalse, v1alpha1.ReasonPinInvalid, d.PinError)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason == v1alpha1.ReasonPinInvalid {
			// A failed build's Degraded stays (it keeps its input from
			// being built again); Pinned says why the pin is refused.
			setCond(pi, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonPinInvalid, d.PinError)
		}
		return
	case d.Decision == v1alpha1.DecisionPinned:
		setCond(pi, v1alpha1.ConditionPinned, metav1.ConditionTrue, ReasonPinned, d.Message)
	case meta.FindStatusCondition(conds, v1alpha1.ConditionPinned) != nil:
		setCond(pi, v1alpha1.ConditionPinned, metav1.ConditionFalse, ReasonNotPinned, "spec.pin is not set")
	}
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonPinInvalid {
		setCond(pi, v1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonUpToDate, "")
	}
}
