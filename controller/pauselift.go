package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// Ending the controller's pauses of MachineConfigPools (pause.go).

// tendPause follows a reconcile of pi (its result res and error err) with
// the end of the pauses pi holds, and requeues it for the pause's bound.
// digest is the sources digest read ("": the inputs could not be read).
func (r *Reconciler) tendPause(ctx context.Context, pi *v1alpha1.PoolImage, digest string, res ctrl.Result, err error) (ctrl.Result, error) {
	if !r.openShift.Load() {
		return res, err
	}
	wait, perr := r.liftPauses(ctx, pi, digest)
	if err != nil {
		return res, errors.Join(err, perr)
	}
	if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}
	return res, perr
}

// pausedPools are the names of the pools the cache shows paused by the
// PoolImage key.
func (r *Reconciler) pausedPools(ctx context.Context, key types.NamespacedName) ([]string, error) {
	var list mcfgv1.MachineConfigPoolList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing MachineConfigPools: %w", err)
	}
	var out []string
	for i := range list.Items {
		if owner, _ := pauseMark(&list.Items[i]); owner == pauseKey(key) {
			out = append(out, list.Items[i].Name)
		}
	}
	return out, nil
}

// liftPauses ends the pauses pi holds that may end, and reports how long
// the one it still holds may last (0: none held). The PoolPaused
// condition follows.
func (r *Reconciler) liftPauses(ctx context.Context, pi *v1alpha1.PoolImage, digest string) (time.Duration, error) {
	pools, err := r.pausedPools(ctx, client.ObjectKeyFromObject(pi))
	if err != nil {
		return 0, err
	}
	if o := pi.Spec.Source.OpenShift; o != nil && pauseCondition(pi) {
		pools = append(pools, o.MachineConfigPool) // the cache may not show the pause yet
	}
	var wait time.Duration
	reason, msg := ReasonPauseEnded, "the pool is no longer paused for a build"
	seen := map[string]bool{}
	for _, pool := range pools {
		if seen[pool] {
			continue
		}
		seen[pool] = true
		w, why, what, err := r.liftPause(ctx, pi, pool, digest)
		if err != nil {
			return 0, err
		}
		if w > 0 && (wait == 0 || w < wait) {
			wait = w
		}
		if why != "" {
			reason, msg = why, "MachineConfigPool "+pool+" unpaused: "+what
		}
	}
	if wait > 0 || !pauseCondition(pi) {
		return wait, nil
	}
	setCond(pi, v1alpha1.ConditionPoolPaused, metav1.ConditionFalse, reason, msg)
	return 0, r.Client.Status().Update(ctx, pi)
}

// liftPause ends pi's pause of the pool when it may end (the reason and
// message), or reports how long it may still last.
func (r *Reconciler) liftPause(ctx context.Context, pi *v1alpha1.PoolImage, pool, digest string) (wait time.Duration, reason, msg string, err error) {
	key := pauseKey(client.ObjectKeyFromObject(pi))
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wait, reason, msg = 0, "", ""
		mcp, err := r.freshPool(ctx, pool)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if owner, _ := pauseMark(mcp); owner != key {
			return nil
		}
		var w time.Duration
		reason, msg, w, err = r.pauseEnd(ctx, pi, mcp, digest)
		if err != nil || reason == "" {
			wait = w
			return err
		}
		return r.unpause(ctx, mcp)
	})
	if err != nil || reason == "" {
		return wait, "", "", err
	}
	typ := corev1.EventTypeNormal
	if reason == ReasonPauseTimedOut {
		typ = corev1.EventTypeWarning
	}
	r.logger().Info("unpaused the pool", "poolimage", key, "pool", pool, "reason", reason, "why", msg)
	r.event(pi, typ, "PoolUnpaused", "pause", "MachineConfigPool %s unpaused: %s", pool, msg)
	return 0, reason, msg, nil
}

// unpause removes the controller's pause and mark from the pool (while
// the pool is unchanged since it was read).
func (r *Reconciler) unpause(ctx context.Context, mcp *mcfgv1.MachineConfigPool) error {
	orig := mcp.DeepCopy()
	mcp.Spec.Paused = false
	delete(mcp.Annotations, AnnotationPausedFor)
	delete(mcp.Annotations, AnnotationPausedSince)
	if err := r.patchPool(ctx, mcp, orig); err != nil {
		return fmt.Errorf("unpausing MachineConfigPool %s: %w", mcp.Name, err)
	}
	return nil
}

// releasePauses ends every pause the deleted PoolImage key holds.
func (r *Reconciler) releasePauses(ctx context.Context, key types.NamespacedName) error {
	if !r.openShift.Load() {
		return nil
	}
	pools, err := r.pausedPools(ctx, key)
	if err != nil {
		return err
	}
	for _, pool := range pools {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mcp, err := r.freshPool(ctx, pool)
			if err != nil {
				return client.IgnoreNotFound(err)
			}
			if owner, _ := pauseMark(mcp); owner != pauseKey(key) {
				return nil
			}
			return r.unpause(ctx, mcp)
		})
		if err != nil {
			return err
		}
		r.logger().Info("unpaused the pool: its PoolImage was deleted", "poolimage", pauseKey(key), "pool", pool)
	}
	return nil
}
