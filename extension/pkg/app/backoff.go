package app

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Failure backoff of an OSC whose reconcile failed: 1 s, doubling up to
// 5 minutes, so at most 6 attempts in the first 40 s. controller-runtime's
// default starts at 5 ms: 13 retries in 40 s from its doubling alone
// (about 24 were seen), log and status noise and registry requests during
// an outage although nothing had changed. A changed OSC
// (gardenlet's operation annotation) is reconciled at once regardless,
// and a provision OSC waiting for its pool image is requeued after its
// own delay (RequeueAfter), not by this limiter.
const (
	failureBackoffBase = time.Second
	failureBackoffMax  = 5 * time.Minute
)

// failureBackoff is the controller's rate limiter.
func failureBackoff() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](failureBackoffBase, failureBackoffMax)
}
