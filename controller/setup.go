package controller

import (
	"context"
	"slices"
	"strings"
	"time"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// SetupWithManager registers the reconciler: it watches PoolImages (spec
// changes only), their build Jobs, and the Secrets and ConfigMaps they read or publish, so a
// change of a source reconciles every PoolImage that names or selects it
// (an update is mapped with the old and the new labels, so a Secret that
// stops matching a selector reconciles too). When the cluster serves the
// MachineConfig API (OpenShift), it also watches MachineConfigPools (their
// spec: a new machineConfigSelector) and MachineConfigs (those the pools
// select, and the osImageURL MachineConfigs it publishes; their metadata
// only). A controller started before the OpenShift CRDs were installed
// starts those watches when the API appears (openshiftapi.go).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("oslayer-controller")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := r.setupRetention(mgr); err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.PoolImage{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.referrers)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.referrers)).
		WithOptions(crcontroller.Options{
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBase, retryMax),
			MaxConcurrentReconciles: max(r.Options.MaxConcurrentBuilds, 1),
		}).
		Named("poolimage").Build(r)
	if err != nil {
		return err
	}
	if err := r.bootcWatch(mgr, c).start(); err != nil {
		return err
	}
	return r.openShiftWatch(mgr, c).start()
}

// A build that failed to run (registry down) is retried after retryBase,
// doubling up to retryMax: an outage of 10 s costs about six attempts, and
// the end of a long one is noticed within retryMax (the work queue's
// default would wait up to 1000 s).
const (
	retryBase = 250 * time.Millisecond
	retryMax  = 30 * time.Second
)

// referrers are the PoolImages that read obj or published it.
func (r *Reconciler) referrers(ctx context.Context, obj client.Object) []reconcile.Request {
	kind := "Secret"
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	return append(r.poolImages(ctx, func(pi *v1alpha1.PoolImage) bool {
		return reads(pi, kind, obj.GetNamespace(), obj.GetName(), obj.GetLabels())
	}), r.publisher(obj)...)
}

// poolReaders are the PoolImages of a MachineConfigPool, and the one
// whose pause it holds (pause.go), whether it still exists or not (its
// reconcile ends the pause of a deleted one).
func (r *Reconciler) poolReaders(ctx context.Context, obj client.Object) []reconcile.Request {
	out := r.poolImages(ctx, func(pi *v1alpha1.PoolImage) bool {
		o := pi.Spec.Source.OpenShift
		return o != nil && o.MachineConfigPool == obj.GetName()
	})
	if mcp, ok := obj.(*mcfgv1.MachineConfigPool); ok {
		owner, _ := pauseMark(mcp)
		ns, name, ok := strings.Cut(owner, "/")
		if ok && ns != "" && name != "" && (len(r.namespaces) == 0 || slices.Contains(r.namespaces, ns)) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return out
}

// machineConfigReaders are the PoolImages whose pool's
// spec.machineConfigSelector selects obj (as the MCO's render controller
// maps a MachineConfig to its pools: getPoolsForMachineConfig), and the
// one that published obj.
func (r *Reconciler) machineConfigReaders(ctx context.Context, obj client.Object) []reconcile.Request {
	selects := map[string]bool{} // pool → selects obj
	return append(r.poolImages(ctx, func(pi *v1alpha1.PoolImage) bool {
		o := pi.Spec.Source.OpenShift
		if o == nil {
			return false
		}
		ok, seen := selects[o.MachineConfigPool]
		if !seen {
			var mcp mcfgv1.MachineConfigPool
			if err := r.Client.Get(ctx, client.ObjectKey{Name: o.MachineConfigPool}, &mcp); err == nil {
				sel, err := metav1.LabelSelectorAsSelector(mcp.Spec.MachineConfigSelector)
				ok = err == nil && !sel.Empty() && sel.Matches(labels.Set(obj.GetLabels()))
			}
			selects[o.MachineConfigPool] = ok
		}
		return ok
	}), r.publisher(obj)...)
}

// poolImages lists the PoolImages for which match holds.
func (r *Reconciler) poolImages(ctx context.Context, match func(*v1alpha1.PoolImage) bool) []reconcile.Request {
	var list v1alpha1.PoolImageList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if pi := &list.Items[i]; match(pi) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pi)})
		}
	}
	return out
}

// publisher is the PoolImage that published obj, whether it still
// exists or not (its reconcile deletes what a deleted one published), if
// the controller watches its namespace.
func (r *Reconciler) publisher(obj client.Object) []reconcile.Request {
	if obj.GetLabels()[LabelManagedBy] != ManagedBy {
		return nil
	}
	ns, name, ok := strings.Cut(obj.GetAnnotations()[AnnotationPoolImage], "/")
	if !ok || ns == "" || name == "" || (len(r.namespaces) > 0 && !slices.Contains(r.namespaces, ns)) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// reads reports whether pi reads the object kind ns/name with these
// labels.
func reads(pi *v1alpha1.PoolImage, kind, ns, name string, objLabels map[string]string) bool {
	switch kind {
	case "Secret":
		if ns == pi.Namespace && readsCredentials(pi, name) {
			return true
		}
		if readsGardener(pi.Spec.Source.Gardener, pi.Namespace, ns, name, objLabels) {
			return true
		}
	case "ConfigMap":
		if p := pi.Spec.Packages; p != nil && ns == pi.Namespace &&
			((p.Containerfile != nil && p.Containerfile.Name == name) || (p.Repos != nil && p.Repos.Name == name)) {
			return true
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

// readsCredentials reports whether the Secret name (in pi's namespace) is
// one of pi's pull, push or signing key Secrets.
func readsCredentials(pi *v1alpha1.PoolImage, name string) bool {
	for _, s := range pi.Spec.PullSecrets {
		if s.Name == name {
			return true
		}
	}
	if p := pi.Spec.PushSecret; p != nil && p.Name == name {
		return true
	}
	s := pi.Spec.Signing
	return s != nil && s.KeySecret.Name == name
}

// readsGardener reports whether the Gardener source g (of a PoolImage in
// piNS) reads the Secret ns/name: by name, by selector, or as a secretRef.
func readsGardener(g *v1alpha1.GardenerSource, piNS, ns, name string, objLabels map[string]string) bool {
	if g == nil {
		return false
	}
	gns := g.Namespace
	if gns == "" {
		gns = piNS
	}
	if ns != gns {
		return false
	}
	if g.SecretName != "" && g.SecretName == name {
		return true
	}
	if g.Selector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(g.Selector); err == nil && sel.Matches(labels.Set(objLabels)) {
			return true
		}
	}
	return slices.Contains(g.SecretRefs, name)
}
