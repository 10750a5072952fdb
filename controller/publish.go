package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/pipeline"
)

// spec.publish: the controller keeps an osImageURL MachineConfig for the
// OpenShift pool and a ConfigMap with status.image in step with the last
// good image. Both are labelled LabelManagedBy=oslayer and annotated with
// the PoolImage (AnnotationPoolImage, NAMESPACE/NAME): that is how a
// renamed or dropped target is found and deleted, and how a deleted
// PoolImage's are (its reconcile finds it gone; the published objects map
// to it even then, so one deleted while the controller was down goes at
// the next start). The ConfigMap is also owned by the PoolImage (garbage
// collected with it); the cluster-scoped MachineConfig cannot be. The
// PoolImage itself is never written (no finalizer): the controller's RBAC
// stays read-only on PoolImages' specs and metadata.

const (
	// LabelManagedBy marks what the controller published.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is LabelManagedBy's value.
	ManagedBy = "oslayer"
	// AnnotationPoolImage names the publishing PoolImage (NAMESPACE/NAME).
	AnnotationPoolImage = "oslayer.dev/poolimage"
	// ReasonPublishFailed is Degraded's reason when status.image could not
	// be published.
	ReasonPublishFailed = "PublishFailed"
)

// Data keys of the published ConfigMap.
const (
	ConfigMapImage        = "image"
	ConfigMapDigest       = "digest"
	ConfigMapPool         = "pool"
	ConfigMapInputsDigest = "inputsDigest"
	ConfigMapBaseDigest   = "baseDigest"
)

// PublishedMachineConfigName is the name of the osImageURL MachineConfig
// of a MachineConfigPool: a user MachineConfig as the MCO names its own
// (99-ROLE-...), sorting after the pool's generated ones.
func PublishedMachineConfigName(pool string) string { return "99-" + pool + "-oslayer-os-image" }

// published publishes status.image and records the outcome in Degraded:
// a failure sets it (reason PublishFailed) and is retried; a success
// clears an earlier publish failure.
func (r *Reconciler) published(ctx context.Context, pi *v1alpha1.PoolImage) error {
	if err := r.choose(ctx, pi); err != nil {
		return err
	}
	rolledBack := pi.Status.Rollback
	err := r.publish(ctx, pi)
	if err == nil && rolledBack == nil && pi.Status.Rollback != nil {
		// The hand-off found the rollout halted and spec.rollback
		// published the previous image (bootcrollout.go): hand it on.
		err = r.publish(ctx, pi)
	}
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	wasFailing := c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonPublishFailed
	switch {
	case err != nil:
		msg := "step publish: " + err.Error()
		if !wasFailing || c.Message != msg {
			setCond(pi, v1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonPublishFailed, msg)
			r.logger().Warn("publish failed", "poolimage", pi.Namespace+"/"+pi.Name, "error", msg)
			r.event(pi, corev1.EventTypeWarning, "PublishFailed", "publish", "%s", msg)
			if uerr := r.Client.Status().Update(ctx, pi); uerr != nil {
				return errors.Join(err, uerr)
			}
		}
		return err
	case wasFailing:
		setCond(pi, v1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonUpToDate, "")
		return r.Client.Status().Update(ctx, pi)
	}
	return nil
}

// publish makes the published objects say status.published.image and
// removes those the spec no longer asks for.
func (r *Reconciler) publish(ctx context.Context, pi *v1alpha1.PoolImage) error {
	var wantMC, wantCM string
	if p := pi.Spec.Publish; p != nil {
		if p.MachineConfig != nil && pi.Spec.Source.OpenShift != nil {
			wantMC = PublishedMachineConfigName(pi.Spec.Source.OpenShift.MachineConfigPool)
		}
		wantCM = p.ConfigMap
	}
	if err := r.prunePublished(ctx, client.ObjectKeyFromObject(pi), wantMC, wantCM); err != nil {
		return err
	}
	img := pi.Status.Published
	if img == nil || img.Image == "" {
		return nil
	}
	if wantMC != "" {
		if err := r.publishMachineConfig(ctx, pi, wantMC, img.Image); err != nil {
			return fmt.Errorf("spec.publish.machineConfig: %w", err)
		}
	}
	if wantCM != "" {
		if err := r.publishConfigMap(ctx, pi, wantCM, img); err != nil {
			return fmt.Errorf("spec.publish.configMap: %w", err)
		}
	}
	return r.publishBootcNodePool(ctx, pi) // bootcpool.go
}

// prunePublished deletes the MachineConfigs and ConfigMaps published for
// the PoolImage key other than keepMC and keepCM (all of them for a
// deleted PoolImage).
func (r *Reconciler) prunePublished(ctx context.Context, key types.NamespacedName, keepMC, keepCM string) error {
	sel := client.MatchingLabels{LabelManagedBy: ManagedBy}
	by := key.Namespace + "/" + key.Name
	if r.openShift.Load() {
		// The watch caches MachineConfigs' metadata only.
		mcs := metav1.PartialObjectMetadataList{}
		mcs.SetGroupVersionKind(mcfgv1.GroupVersion.WithKind("MachineConfigList"))
		if err := r.Client.List(ctx, &mcs, sel); err != nil {
			return fmt.Errorf("listing published MachineConfigs: %w", err)
		}
		for i := range mcs.Items {
			if mc := &mcs.Items[i]; mc.Annotations[AnnotationPoolImage] == by && mc.Name != keepMC {
				if err := client.IgnoreNotFound(r.Client.Delete(ctx, mc)); err != nil {
					return fmt.Errorf("deleting MachineConfig %s: %w", mc.Name, err)
				}
				r.logger().Info("deleted the published MachineConfig", "poolimage", by, "machineconfig", mc.Name)
			}
		}
	}
	var cms corev1.ConfigMapList
	if err := r.Client.List(ctx, &cms, sel, client.InNamespace(key.Namespace)); err != nil {
		return fmt.Errorf("listing published ConfigMaps: %w", err)
	}
	for i := range cms.Items {
		if cm := &cms.Items[i]; cm.Annotations[AnnotationPoolImage] == by && cm.Name != keepCM {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, cm)); err != nil {
				return fmt.Errorf("deleting ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
			}
		}
	}
	return nil
}

// publishedMeta are the labels and annotations of a published object.
func publishedMeta(pi *v1alpha1.PoolImage, extra map[string]string) (labels, annotations map[string]string) {
	l := map[string]string{LabelManagedBy: ManagedBy}
	maps.Copy(l, extra)
	return l, map[string]string{AnnotationPoolImage: pi.Namespace + "/" + pi.Name}
}

// mine reports whether obj was published for pi; an object of that name
// that was not is left alone (an error names it).
func mine(pi *v1alpha1.PoolImage, obj client.Object) error {
	if obj.GetLabels()[LabelManagedBy] != ManagedBy || obj.GetAnnotations()[AnnotationPoolImage] != pi.Namespace+"/"+pi.Name {
		by := obj.GetAnnotations()[AnnotationPoolImage]
		if by == "" {
			by = "someone else"
		} else {
			by = "PoolImage " + by
		}
		return fmt.Errorf("%s exists and was made by %s, not by this PoolImage; it is left alone", obj.GetName(), by)
	}
	return nil
}

// publishMachineConfig keeps the osImageURL MachineConfig of the pool at
// image.
func (r *Reconciler) publishMachineConfig(ctx context.Context, pi *v1alpha1.PoolImage, name, image string) error {
	pool := pi.Spec.Source.OpenShift.MachineConfigPool
	mcp, err := getPool(ctx, r.Client, pool, "spec.source.openshift.machineConfigPool")
	if err != nil {
		return err
	}
	role, err := poolRole(mcp, pi.Spec.Publish.MachineConfig.Role)
	if err != nil {
		return err
	}
	l, a := publishedMeta(pi, map[string]string{pipeline.MachineConfigRoleLabel: role})
	var mc mcfgv1.MachineConfig
	err = r.reader().Get(ctx, types.NamespacedName{Name: name}, &mc)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading MachineConfig %s: %w", name, err)
	}
	if err != nil {
		mc = mcfgv1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: a},
			Spec:       mcfgv1.MachineConfigSpec{OSImageURL: image},
		}
		if err := r.Client.Create(ctx, &mc); err != nil {
			return fmt.Errorf("creating MachineConfig %s: %w", name, err)
		}
		r.event(pi, corev1.EventTypeNormal, "Published", "publish", "MachineConfig %s sets osImageURL %s", name, image)
		return nil
	}
	if err := mine(pi, &mc); err != nil {
		return fmt.Errorf("MachineConfig %w", err)
	}
	if mc.Spec.OSImageURL == image && subset(l, mc.Labels) && subset(a, mc.Annotations) {
		return nil
	}
	mc.Spec.OSImageURL = image
	mc.Labels, mc.Annotations = merged(mc.Labels, l), merged(mc.Annotations, a)
	if err := r.Client.Update(ctx, &mc); err != nil {
		return fmt.Errorf("updating MachineConfig %s: %w", name, err)
	}
	r.event(pi, corev1.EventTypeNormal, "Published", "publish", "MachineConfig %s sets osImageURL %s", name, image)
	return nil
}

// poolRole is the role label value that puts a MachineConfig into the
// pool: want when given, else the pool's name, else the role its
// selector's matchLabels name; the pool's selector must select it.
func poolRole(mcp *mcfgv1.MachineConfigPool, want string) (string, error) {
	where := "MachineConfigPool " + mcp.Name + " spec.machineConfigSelector"
	ls := mcp.Spec.MachineConfigSelector
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "", fmt.Errorf("%s: %v", where, err)
	}
	if ls == nil || sel.Empty() {
		return "", fmt.Errorf("%s is empty: the MCO selects no MachineConfig for the pool", where)
	}
	cands := []string{want}
	if want == "" {
		cands = []string{mcp.Name, ls.MatchLabels[pipeline.MachineConfigRoleLabel]}
	}
	for _, c := range cands {
		if c != "" && sel.Matches(labels.Set{pipeline.MachineConfigRoleLabel: c}) {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s %q selects no MachineConfig labelled only %s=%s (set spec.publish.machineConfig.role)",
		where, sel.String(), pipeline.MachineConfigRoleLabel, strings.Join(nonEmpty(cands), " or "))
}

// publishConfigMap keeps the ConfigMap with the published image.
func (r *Reconciler) publishConfigMap(ctx context.Context, pi *v1alpha1.PoolImage, name string, img *v1alpha1.PublishedImage) error {
	data := map[string]string{
		ConfigMapImage: img.Image, ConfigMapDigest: digestOf(img.Image), ConfigMapPool: poolName(pi),
		ConfigMapInputsDigest: img.InputsDigest, ConfigMapBaseDigest: img.BaseDigest,
	}
	l, a := publishedMeta(pi, nil)
	var cm corev1.ConfigMap
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: pi.Namespace, Name: name}, &cm)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading ConfigMap %s/%s: %w", pi.Namespace, name, err)
	}
	if err != nil {
		isController := true
		// Owned by the PoolImage, without blockOwnerDeletion (which would
		// need the right to update the PoolImage's finalizers).
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pi.Namespace, Labels: l, Annotations: a,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "PoolImage",
				Name: pi.Name, UID: pi.UID, Controller: &isController}}}, Data: data}
		if err := r.Client.Create(ctx, &cm); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", pi.Namespace, name, err)
		}
		return nil
	}
	if err := mine(pi, &cm); err != nil {
		return fmt.Errorf("ConfigMap %s/%w", pi.Namespace, err)
	}
	if maps.Equal(cm.Data, data) && subset(l, cm.Labels) && subset(a, cm.Annotations) {
		return nil
	}
	cm.Data = data
	cm.Labels, cm.Annotations = merged(cm.Labels, l), merged(cm.Annotations, a)
	if err := r.Client.Update(ctx, &cm); err != nil {
		return fmt.Errorf("updating ConfigMap %s/%s: %w", pi.Namespace, name, err)
	}
	return nil
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func merged(have, want map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}

func nonEmpty(s []string) []string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
