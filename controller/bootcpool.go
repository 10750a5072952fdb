package controller

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// spec.publish.bootcNodePool hands status.published.image to bootc-operator: the
// controller keeps the BootcNodePool's spec.image.ref at the digested
// reference (REPO@sha256:..., never a tag, so the operator resolves
// nothing) and mirrors the pool's status.targetDigest, deployedDigest,
// updateAvailable and UpToDate condition into status.bootcNodePool. The
// pool is read and written unstructured by the field names of
// bootc-operator's API (node.bootc.dev/v1alpha1, cluster-scoped); the
// controller watches BootcNodePools when the cluster serves the API, so
// the status follows the rollout. The pool is not the controller's: it is
// never created or deleted, only its spec.image.ref is written.

// BootcNodePoolGVK is bootc-operator's BootcNodePool.
var BootcNodePoolGVK = schema.GroupVersionKind{Group: "node.bootc.dev", Version: "v1alpha1", Kind: "BootcNodePool"}

// Reasons of ConditionBootcNodePool.
const (
	ReasonBootcNodePoolSet      = "ImageRefSet"
	ReasonBootcNodePoolNotFound = "BootcNodePoolNotFound"
	ReasonBootcNodePoolFailed   = "BootcNodePoolFailed"
)

// bootcPoolUpToDate is the type of the BootcNodePool's rollout condition.
const bootcPoolUpToDate = "UpToDate"

// publishBootcNodePool sets the pool's spec.image.ref and records the
// pool's state in status (ConditionBootcNodePool, status.bootcNodePool),
// writing the status only when it changed. A missing pool (or API) is a
// false condition and changes nothing else; it is not retried (the watch
// brings the pool when it appears).
func (r *Reconciler) publishBootcNodePool(ctx context.Context, pi *v1alpha1.PoolImage) error {
	before := pi.Status.DeepCopy()
	err := r.handOff(ctx, pi)
	if equality.Semantic.DeepEqual(before, &pi.Status) {
		return err
	}
	if uerr := r.Client.Status().Update(ctx, pi); uerr != nil && err == nil {
		return uerr
	}
	return err
}

// handOff does publishBootcNodePool's work on pi's status in memory.
func (r *Reconciler) handOff(ctx context.Context, pi *v1alpha1.PoolImage) error {
	want := ""
	if p := pi.Spec.Publish; p != nil {
		want = p.BootcNodePool
	}
	if want == "" {
		pi.Status.BootcNodePool = nil
		meta.RemoveStatusCondition(&pi.Status.Conditions, v1alpha1.ConditionBootcNodePool)
		return nil
	}
	where := "spec.publish.bootcNodePool: BootcNodePool " + want
	ref, err := digestRef(publishedImage(pi))
	if err != nil || ref == "" {
		return err
	}
	pool := &unstructured.Unstructured{}
	pool.SetGroupVersionKind(BootcNodePoolGVK)
	err = r.reader().Get(ctx, client.ObjectKey{Name: want}, pool)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		setCond(pi, v1alpha1.ConditionBootcNodePool, metav1.ConditionFalse, ReasonBootcNodePoolNotFound,
			where+" not found (bootc-operator's node.bootc.dev/v1alpha1); status.published.image "+ref+" is not handed off")
		return nil
	}
	soft, why := softReboot(pi) // bootcsoft.go
	if err == nil {
		err = r.setPoolRef(ctx, pi, pool, ref, rebootPolicy(soft))
	}
	if err != nil {
		setCond(pi, v1alpha1.ConditionBootcNodePool, metav1.ConditionFalse, ReasonBootcNodePoolFailed, where+": "+err.Error())
		return fmt.Errorf("%s: %w", where, err)
	}
	st, err := r.mirrorPool(ctx, pi, pool)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	st.RebootPolicy, st.SoftRebootPredicted, st.SoftRebootWhy = rebootPolicy(soft), soft, why
	old := pi.Status.BootcNodePool
	pi.Status.BootcNodePool = st
	setCond(pi, v1alpha1.ConditionBootcNodePool, metav1.ConditionTrue, ReasonBootcNodePoolSet, "BootcNodePool "+want+" spec.image.ref is "+ref)
	r.rolloutCondition(pi, old, st) // bootcrollout.go
	if r.rollBack(pi, st) {
		return nil // published again: the caller hands the rollback image on
	}
	if err := r.stagedReports(ctx, pi, old, st); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// setPoolRef writes ref into the pool's spec.image.ref and policy into
// its spec.disruption.rebootPolicy unless they are there already.
func (r *Reconciler) setPoolRef(ctx context.Context, pi *v1alpha1.PoolImage, pool *unstructured.Unstructured, ref, policy string) error {
	have, _, err := unstructured.NestedString(pool.Object, "spec", "image", "ref")
	if err != nil {
		return fmt.Errorf("spec.image.ref: %w", err)
	}
	havePolicy, _, err := unstructured.NestedString(pool.Object, "spec", "disruption", "rebootPolicy")
	if err != nil {
		return fmt.Errorf("spec.disruption.rebootPolicy: %w", err)
	}
	if have == ref && havePolicy == policy {
		return nil
	}
	if err := unstructured.SetNestedField(pool.Object, ref, "spec", "image", "ref"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(pool.Object, policy, "spec", "disruption", "rebootPolicy"); err != nil {
		return err
	}
	if err := r.Client.Update(ctx, pool); err != nil {
		return fmt.Errorf("updating spec.image.ref: %w", err)
	}
	r.event(pi, corev1.EventTypeNormal, "Published", "publish", "BootcNodePool %s spec.image.ref %s (was %q), spec.disruption.rebootPolicy %s",
		pool.GetName(), ref, have, policy)
	return nil
}

// mirrorPool reads the pool's status fields (a field of the wrong type
// is an error naming it).
func (r *Reconciler) mirrorPool(ctx context.Context, pi *v1alpha1.PoolImage, pool *unstructured.Unstructured) (*v1alpha1.BootcNodePoolStatus, error) {
	st := &v1alpha1.BootcNodePoolStatus{Name: pool.GetName()}
	var err error
	for _, f := range []struct {
		to   *string
		path []string
	}{{&st.Ref, []string{"spec", "image", "ref"}}, {&st.TargetDigest, []string{"status", "targetDigest"}},
		{&st.DeployedDigest, []string{"status", "deployedDigest"}}} {
		if *f.to, _, err = unstructured.NestedString(pool.Object, f.path...); err != nil {
			return nil, fmt.Errorf("BootcNodePool %s: %w", pool.GetName(), err)
		}
	}
	if st.UpdateAvailable, _, err = unstructured.NestedBool(pool.Object, "status", "updateAvailable"); err != nil {
		return nil, fmt.Errorf("BootcNodePool %s: %w", pool.GetName(), err)
	}
	if err := mirrorRollout(pool, st); err != nil { // bootcrollout.go
		return nil, err
	}
	if st.DeployedDigest != "" {
		st.Deployed, err = r.digestMatches(ctx, pi, st.DeployedDigest)
	}
	return st, err
}

// digestRef is a digested reference without its tag (REPO@sha256:...);
// "" for "".
func digestRef(image string) (string, error) {
	if image == "" {
		return "", nil
	}
	d, err := name.NewDigest(image, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("status.published.image %q is not a digested reference: %w", image, err)
	}
	return d.Context().Name() + "@" + d.DigestStr(), nil
}

// publishedImage is the image spec.publish hands on: status.published
// (the newest build, a pinned one, or an older one held while the change
// is applied in place), "" before the first decision.
func publishedImage(pi *v1alpha1.PoolImage) string {
	if pi.Status.Published == nil {
		return ""
	}
	return pi.Status.Published.Image
}
