package controller

import (
	"context"
	"time"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// The MachineConfig API (machineconfiguration.openshift.io/v1) may appear
// after the controller started: the OpenShift CRDs installed later, or a
// cluster that becomes OpenShift. A controller that found no such API at
// start looks again every Options.OpenShiftAPIInterval through the
// manager's RESTMapper, which re-discovers a group it does not know (one
// request to /apis/machineconfiguration.openshift.io/v1 a time, which
// every authenticated user may make: no RBAC beyond what config/rbac
// grants for the watches). Once both kinds are served it starts the
// watches of MachineConfigPools and MachineConfigs on the running
// controller, logs one line, requeues every PoolImage with the openshift
// source (those are Degraded for the missing API, an input failure that
// is otherwise not retried until the input changes) and stops looking.
// Only the leader looks (a manager runnable that needs leader election,
// as the controller does). An API that goes away again is not noticed:
// the watches then log their errors, as they do on a cluster whose CRDs
// are deleted.

// defaultOpenShiftAPIInterval is OpenShiftAPIInterval's default.
const defaultOpenShiftAPIInterval = 30 * time.Second

// openShiftWatch adds the OpenShift watches to the controller c.
type openShiftWatch struct {
	r   *Reconciler
	mgr ctrl.Manager
	c   crcontroller.Controller
}

// served reports whether the cluster serves MachineConfigPools and
// MachineConfigs.
func (w *openShiftWatch) served() bool {
	for _, kind := range []string{"MachineConfigPool", "MachineConfig"} {
		gk := schema.GroupKind{Group: mcfgv1.GroupName, Kind: kind}
		if _, err := w.mgr.GetRESTMapper().RESTMapping(gk, mcfgv1.GroupVersion.Version); err != nil {
			return false
		}
	}
	return true
}

// watch starts the watches: MachineConfigPools (spec changes only: the
// status changes all through a rollout and is no input), and
// MachineConfigs' metadata only.
func (w *openShiftWatch) watch() error {
	mc := &metav1.PartialObjectMetadata{}
	mc.SetGroupVersionKind(mcfgv1.GroupVersion.WithKind("MachineConfig"))
	for _, src := range []source.Source{
		source.Kind[client.Object](w.mgr.GetCache(), &mcfgv1.MachineConfigPool{}, handler.EnqueueRequestsFromMapFunc(w.r.poolReaders),
			predicate.GenerationChangedPredicate{}),
		source.Kind[client.Object](w.mgr.GetCache(), mc, handler.EnqueueRequestsFromMapFunc(w.r.machineConfigReaders)),
	} {
		if err := w.c.Watch(src); err != nil {
			return err
		}
	}
	w.r.openShift.Store(true)
	return nil
}

// await looks for the API until it is served or ctx ends, then watches it
// and requeues the PoolImages of the openshift source.
func (w *openShiftWatch) await(ctx context.Context) error {
	every := w.r.Options.OpenShiftAPIInterval
	if every <= 0 {
		every = defaultOpenShiftAPIInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !w.served() {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	if err := w.watch(); err != nil {
		return err
	}
	reqs := w.r.poolImages(ctx, func(pi *v1alpha1.PoolImage) bool { return pi.Spec.Source.OpenShift != nil })
	w.r.logger().Info("the cluster serves the MachineConfig API now: watching MachineConfigPools and MachineConfigs",
		"api", mcfgv1.GroupVersion.String(), "requeued", len(reqs))
	return w.c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		for _, req := range reqs {
			q.Add(req)
		}
		return nil
	}))
}
