package controller

import (
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// openShiftWatch is the watch of the MachineConfig API
// (machineconfiguration.openshift.io/v1): MachineConfigPools (spec
// changes only: the status changes all through a rollout and is no input)
// and MachineConfigs' metadata only; it requeues the PoolImages of the
// openshift source when the API appears after the start (apiwatch.go).
func (r *Reconciler) openShiftWatch(mgr ctrl.Manager, c crcontroller.Controller) *apiWatch {
	return &apiWatch{r: r, mgr: mgr, c: c, gv: mcfgv1.GroupVersion, kinds: []string{"MachineConfigPool", "MachineConfig"},
		name: "MachineConfig", what: "MachineConfigPools and MachineConfigs",
		watch: func() error { return r.watchOpenShift(mgr, c) },
		uses:  func(pi *v1alpha1.PoolImage) bool { return pi.Spec.Source.OpenShift != nil }}
}

// watchOpenShift starts openShiftWatch's watches.
func (r *Reconciler) watchOpenShift(mgr ctrl.Manager, c crcontroller.Controller) error {
	mc := &metav1.PartialObjectMetadata{}
	mc.SetGroupVersionKind(mcfgv1.GroupVersion.WithKind("MachineConfig"))
	for _, src := range []source.Source{
		source.Kind[client.Object](mgr.GetCache(), &mcfgv1.MachineConfigPool{}, handler.EnqueueRequestsFromMapFunc(r.poolReaders),
			predicate.GenerationChangedPredicate{}),
		source.Kind[client.Object](mgr.GetCache(), mc, handler.EnqueueRequestsFromMapFunc(r.machineConfigReaders)),
	} {
		if err := c.Watch(src); err != nil {
			return err
		}
	}
	r.openShift.Store(true)
	return nil
}
