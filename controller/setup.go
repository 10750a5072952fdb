package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// SetupWithManager registers the reconciler: it watches PoolImages (spec
// changes only) and the Secrets and ConfigMaps they read, so a change of a
// source reconciles every PoolImage that names or selects it (an update
// is mapped with the old and the new labels, so a Secret that stops
// matching a selector reconciles too).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("oslayer-controller")
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.PoolImage{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.referrers)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.referrers)).
		Named("poolimage").
		Complete(r)
}

// referrers are the PoolImages that read obj.
func (r *Reconciler) referrers(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.PoolImageList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	kind := "Secret"
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	var out []reconcile.Request
	for i := range list.Items {
		pi := &list.Items[i]
		if reads(pi, kind, obj.GetNamespace(), obj.GetName(), obj.GetLabels()) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pi)})
		}
	}
	return out
}

// reads reports whether pi reads the object kind ns/name with these
// labels.
func reads(pi *v1alpha1.PoolImage, kind, ns, name string, objLabels map[string]string) bool {
	if kind == "Secret" {
		for _, s := range pi.Spec.PullSecrets {
			if ns == pi.Namespace && s.Name == name {
				return true
			}
		}
		if p := pi.Spec.PushSecret; p != nil && ns == pi.Namespace && p.Name == name {
			return true
		}
		if s := pi.Spec.Signing; s != nil && ns == pi.Namespace && s.KeySecret.Name == name {
			return true
		}
	}
	if g := pi.Spec.Source.Gardener; g != nil && kind == "Secret" {
		gns := g.Namespace
		if gns == "" {
			gns = pi.Namespace
		}
		if ns == gns && g.SecretName != "" && g.SecretName == name {
			return true
		}
		if g.Selector != nil && ns == gns {
			if sel, err := metav1.LabelSelectorAsSelector(g.Selector); err == nil && sel.Matches(labels.Set(objLabels)) {
				return true
			}
		}
		for _, s := range g.SecretRefs {
			if ns == gns && s == name {
				return true
			}
		}
	}
	if d := pi.Spec.Source.Documents; d != nil && ns == pi.Namespace {
		for _, o := range d.Objects {
			if o.Kind == kind && o.Name == name {
				return true
			}
		}
	}
	return false
}
