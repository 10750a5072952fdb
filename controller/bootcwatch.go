package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// watchBootcNodePools watches bootc-operator's BootcNodePools when the
// cluster serves them at start (a cluster that gets the API later needs
// a restart of the controller; until then a PoolImage naming a pool
// reports it not found): a change of a pool's spec or status reconciles
// the PoolImages that name it in spec.publish.bootcNodePool.
func (r *Reconciler) watchBootcNodePools(mgr ctrl.Manager, c crcontroller.Controller) error {
	if _, err := mgr.GetRESTMapper().RESTMapping(BootcNodePoolGVK.GroupKind(), BootcNodePoolGVK.Version); err != nil {
		return nil
	}
	pool := &unstructured.Unstructured{}
	pool.SetGroupVersionKind(BootcNodePoolGVK)
	return c.Watch(source.Kind[client.Object](mgr.GetCache(), pool, handler.EnqueueRequestsFromMapFunc(r.bootcPoolReaders)))
}

// bootcPoolReaders are the PoolImages that hand off to the pool obj.
func (r *Reconciler) bootcPoolReaders(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.poolImages(ctx, func(pi *v1alpha1.PoolImage) bool {
		p := pi.Spec.Publish
		return p != nil && p.BootcNodePool == obj.GetName()
	})
}
