package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// An API the controller watches may appear after it started: the
// OpenShift CRDs or bootc-operator installed later. A controller that
// found the API missing at start looks again every
// Options.APIInterval through the manager's RESTMapper, which
// re-discovers a group it does not know (one request to /apis/GROUP/VERSION
// a time, which every authenticated user may make: no RBAC beyond what
// config/rbac grants for the watches). Once every kind is served it starts
// the watches on the running controller, logs one line, requeues the
// PoolImages that use the API (those are Degraded or report the object
// missing, which is otherwise not retried until an input changes) and
// stops looking. Only the leader looks (a manager runnable that needs
// leader election, as the controller does). An API that goes away again is
// not noticed: the watches then log their errors, as they do on a cluster
// whose CRDs are deleted.

// defaultAPIInterval is APIInterval's default.
const defaultAPIInterval = 30 * time.Second

// apiWatch starts the watches of one API, now or when it appears.
type apiWatch struct {
	r     *Reconciler
	mgr   ctrl.Manager
	c     crcontroller.Controller
	gv    schema.GroupVersion
	kinds []string
	// name and what are the log line's: the NAME API, watching WHAT.
	name, what string
	// watch starts the watches.
	watch func() error
	// uses selects the PoolImages to requeue when the API appears.
	uses func(*v1alpha1.PoolImage) bool
}

// start watches at once when the API is served, else adds a runnable
// that waits for it.
func (w *apiWatch) start() error {
	if w.served() {
		return w.watch()
	}
	return w.mgr.Add(manager.RunnableFunc(w.await))
}

// served reports whether the cluster serves every kind of the API.
func (w *apiWatch) served() bool {
	for _, kind := range w.kinds {
		if _, err := w.mgr.GetRESTMapper().RESTMapping(w.gv.WithKind(kind).GroupKind(), w.gv.Version); err != nil {
			return false
		}
	}
	return true
}

// await looks for the API until it is served or ctx ends, then watches it
// and requeues the PoolImages that use it.
func (w *apiWatch) await(ctx context.Context) error {
	every := w.r.Options.APIInterval
	if every <= 0 {
		every = defaultAPIInterval
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
	reqs := w.r.poolImages(ctx, w.uses)
	w.r.logger().Info("the cluster serves the "+w.name+" API now: watching "+w.what,
		"api", w.gv.String(), "requeued", len(reqs))
	return w.c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		for _, req := range reqs {
			q.Add(req)
		}
		return nil
	}))
}
