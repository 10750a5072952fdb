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

// bootcWatch is the watch of bootc-operator's BootcNodePools: a change
// of a pool's spec or status reconciles the PoolImages that name it in
// spec.publish.bootcNodePool. When the cluster serves the API only after
// the start, the PoolImages that name a pool are requeued then
// (apiwatch.go); until then they report the pool not found.
func (r *Reconciler) bootcWatch(mgr ctrl.Manager, c crcontroller.Controller) *apiWatch {
	return &apiWatch{r: r, mgr: mgr, c: c, gv: BootcNodePoolGVK.GroupVersion(), kinds: []string{BootcNodePoolGVK.Kind},
		name: "BootcNodePool", what: "BootcNodePools",
		watch: func() error {
			pool := &unstructured.Unstructured{}
			pool.SetGroupVersionKind(BootcNodePoolGVK)
			return c.Watch(source.Kind[client.Object](mgr.GetCache(), pool, handler.EnqueueRequestsFromMapFunc(r.bootcPoolReaders)))
		},
		uses: func(pi *v1alpha1.PoolImage) bool {
			return pi.Spec.Publish != nil && pi.Spec.Publish.BootcNodePool != ""
		}}
}

// bootcPoolReaders are the PoolImages that hand off to the pool obj.
func (r *Reconciler) bootcPoolReaders(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.poolImages(ctx, func(pi *v1alpha1.PoolImage) bool {
		p := pi.Spec.Publish
		return p != nil && p.BootcNodePool == obj.GetName()
	})
}
