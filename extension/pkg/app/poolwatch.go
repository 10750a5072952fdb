package app

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gardener/gardener/extensions/pkg/controller/operatingsystemconfig"
	extensionsv1alpha1helper "github.com/gardener/gardener/pkg/api/extensions/v1alpha1/helper"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/controllerutils"
	predicateutils "github.com/gardener/gardener/pkg/controllerutils/predicate"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// addController adds Gardener's OperatingSystemConfig controller: the
// library's reconciler (operatingsystemconfig.NewReconciler) under the
// library's controller name, watching the OSCs of args.Types and classes
// with args.Predicates, as operatingsystemconfig.Add sets it up, plus a
// watch of the pools' reconcile OSCs: when one settles (its
// status.observedGeneration reaches its generation) or records another
// image, the provision OSCs of its pool and type are reconciled again, so
// that their user data pivots onto the current pool image.
func addController(mgr manager.Manager, args operatingsystemconfig.AddArgs) error {
	if args.ControllerOptions.ReconciliationTimeout == 0 {
		args.ControllerOptions.ReconciliationTimeout = controllerutils.DefaultReconciliationTimeout
	}
	own := predicateutils.AddTypeAndClassPredicates(args.Predicates, args.ExtensionClasses, args.Types...)
	pools := predicateutils.AddTypeAndClassPredicates([]predicate.Predicate{poolImageSettled()}, args.ExtensionClasses, args.Types...)
	return builder.ControllerManagedBy(mgr).
		Named(operatingsystemconfig.ControllerName).
		WithOptions(args.ControllerOptions).
		Watches(&extensionsv1alpha1.OperatingSystemConfig{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(own...)).
		Watches(&extensionsv1alpha1.OperatingSystemConfig{}, handler.EnqueueRequestsFromMapFunc(poolProvisionOSCs(mgr.GetClient())), builder.WithPredicates(pools...)).
		Complete(operatingsystemconfig.NewReconciler(mgr, args.Actuator))
}

// poolImageSettled passes the updates of a reconcile OSC that leave it
// settled (status.observedGeneration = metadata.generation: built or
// failed) with another observed generation or another image in
// status.providerStatus.
func poolImageSettled() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*extensionsv1alpha1.OperatingSystemConfig)
			o, ok := e.ObjectNew.(*extensionsv1alpha1.OperatingSystemConfig)
			if !okOld || !ok || o.Spec.Purpose != extensionsv1alpha1.OperatingSystemConfigPurposeReconcile || o.Status.ObservedGeneration != o.Generation {
				return false
			}
			return old.Status.ObservedGeneration != o.Status.ObservedGeneration || recordedImage(old) != recordedImage(o)
		},
	}
}

// recordedImage is the pool image in an OSC's status.providerStatus ("":
// none).
func recordedImage(o *extensionsv1alpha1.OperatingSystemConfig) string {
	if o.Status.ProviderStatus == nil || len(o.Status.ProviderStatus.Raw) == 0 {
		return ""
	}
	st, err := configv1alpha1.DecodeStatus(o.Status.ProviderStatus.Raw)
	if err != nil {
		return ""
	}
	return st.Image
}

// poolProvisionOSCs maps a reconcile OSC to the provision OSCs of its
// namespace, pool (label worker.gardener.cloud/pool), type and class.
func poolProvisionOSCs(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		rec, ok := obj.(*extensionsv1alpha1.OperatingSystemConfig)
		if !ok || rec.Labels[v1beta1constants.LabelWorkerPool] == "" {
			return nil
		}
		pool := rec.Labels[v1beta1constants.LabelWorkerPool]
		var list extensionsv1alpha1.OperatingSystemConfigList
		if err := c.List(ctx, &list, client.InNamespace(rec.Namespace), client.MatchingLabels{v1beta1constants.LabelWorkerPool: pool}); err != nil {
			// The provision OSCs that wait retry on their own.
			logf.FromContext(ctx).Error(err, "Listing the provision OSCs of the pool", "pool", pool, "namespace", rec.Namespace)
			return nil
		}
		var reqs []reconcile.Request
		for _, o := range list.Items {
			if o.Spec.Purpose == extensionsv1alpha1.OperatingSystemConfigPurposeProvision && o.Spec.Type == rec.Spec.Type &&
				extensionsv1alpha1helper.GetExtensionClassOrDefault(o.Spec.Class) == extensionsv1alpha1helper.GetExtensionClassOrDefault(rec.Spec.Class) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&o)})
			}
		}
		return reqs
	}
}
