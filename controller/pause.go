package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// The pause of an OpenShift pool around a build Job (docs/controller.md,
// "One rollout per change").
//
// A build Job outlasts the MCO's render delay: the MCO renders the user's
// change and its node controller rolls the pool before the new image is
// published, and the image's render rolls it again. So before the first
// Job of new inputs of a PoolImage whose build may be published as the
// pool's osImageURL MachineConfig (spec.publish.machineConfig, no
// spec.pin), the controller sets the MachineConfigPool's spec.paused and
// marks the pause as its own: AnnotationPausedFor (NAMESPACE/NAME and the
// sources digest) and AnnotationPausedSince. The MCO still renders a
// paused pool; its node controller moves no node. A pool paused without
// that mark (by someone else) is left alone, and never unpaused. A newer
// Job of the same PoolImage takes the pause over (the digest changes, the
// time stays).
//
// Every reconcile of the PoolImage looks whether its pause may end
// (liftPauses): when the pool's rendered MachineConfig
// (spec.configuration) has the published image — the build was published
// and rendered, or the decision kept the published image — or the build
// failed, or the inputs changed with no Job taking the pause over, or the
// PoolImage no longer publishes to the pool, or the pause reached its
// bound (Options.MaxPoolPause, a Warning Event). A deleted PoolImage's
// pauses end at its reconcile (the pool maps to the PoolImage its mark
// names, so this holds across restarts too). Every unpause re-reads the
// pool and patches it only while the mark is still the controller's
// (optimistic lock): the state lives in the pool, not in the process.

const (
	// AnnotationPausedFor marks a MachineConfigPool the controller paused:
	// "NAMESPACE/NAME SOURCES-DIGEST" of the PoolImage and its build.
	AnnotationPausedFor = "oslayer.dev/paused-for"
	// AnnotationPausedSince is when the controller paused it (RFC 3339).
	AnnotationPausedSince = "oslayer.dev/paused-since"
	// DefaultMaxPoolPause is Options.MaxPoolPause's default.
	DefaultMaxPoolPause = time.Hour
)

// Reasons of the condition PoolPaused.
const (
	ReasonHeldForBuild    = "HeldForBuild"
	ReasonPausedElsewhere = "PausedElsewhere"
	ReasonPauseFailed     = "PauseFailed"
	ReasonRendered        = "Rendered"
	ReasonPauseTimedOut   = "TimedOut"
	ReasonPauseNotNeeded  = "NotNeeded"
	ReasonPauseEnded      = "Unpaused"
	ReasonLiveChange      = "LiveChange"
)

// pauseWanted reports whether a build Job of pi's new inputs pauses its
// pool: its build may become the pool's osImageURL.
func (r *Reconciler) pauseWanted(pi *v1alpha1.PoolImage) bool {
	p := pi.Spec.Publish
	return !r.Options.NoPoolPause && r.openShift.Load() && pi.Spec.Source.OpenShift != nil &&
		p != nil && p.MachineConfig != nil && pi.Spec.Pin == ""
}

// maxPause is the bound of a pause.
func (r *Reconciler) maxPause() time.Duration {
	if r.Options.MaxPoolPause > 0 {
		return r.Options.MaxPoolPause
	}
	return DefaultMaxPoolPause
}

// pauseKey is the PoolImage as AnnotationPausedFor names it.
func pauseKey(key types.NamespacedName) string { return key.Namespace + "/" + key.Name }

// pauseMark is the PoolImage and sources digest a pool's mark names ("",
// "" without one).
func pauseMark(mcp *mcfgv1.MachineConfigPool) (key, digest string) {
	f := strings.Fields(mcp.Annotations[AnnotationPausedFor])
	if len(f) != 2 {
		return "", ""
	}
	return f[0], f[1]
}

// pausedSince is when the controller paused the pool (zero without a
// readable mark: such a pause is past its bound).
func pausedSince(mcp *mcfgv1.MachineConfigPool) time.Time {
	t, _ := time.Parse(time.RFC3339, mcp.Annotations[AnnotationPausedSince])
	return t
}

// freshPool reads the pool from the API server (not the cache: a pause
// must see the controller's own last write).
func (r *Reconciler) freshPool(ctx context.Context, name string) (*mcfgv1.MachineConfigPool, error) {
	rd := client.Reader(r.Client)
	if r.APIReader != nil {
		rd = r.APIReader
	}
	var mcp mcfgv1.MachineConfigPool
	if err := rd.Get(ctx, types.NamespacedName{Name: name}, &mcp); err != nil {
		return nil, err
	}
	return &mcp, nil
}

// patchPool writes mcp's changes from orig while the pool is still orig
// (optimistic lock).
func (r *Reconciler) patchPool(ctx context.Context, mcp, orig *mcfgv1.MachineConfigPool) error {
	return r.Client.Patch(ctx, mcp, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// pausePool pauses the pool for the build Job of digest (or takes the
// controller's pause over for it) and records the outcome in the
// condition PoolPaused (written with the caller's status update). A pool
// paused by someone else is left alone. A failure to pause does not stop
// the build: the pool then rolls per render, as without the pause.
func (r *Reconciler) pausePool(ctx context.Context, pi *v1alpha1.PoolImage, digest, where, why string) {
	pool := pi.Spec.Source.OpenShift.MachineConfigPool
	key := pauseKey(client.ObjectKeyFromObject(pi))
	var other, fresh bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mcp, err := r.freshPool(ctx, pool)
		if err != nil {
			return err
		}
		owner, _ := pauseMark(mcp)
		if other = mcp.Spec.Paused && owner != key; other {
			return nil
		}
		orig := mcp.DeepCopy()
		since := mcp.Annotations[AnnotationPausedSince]
		if fresh = !mcp.Spec.Paused || since == ""; fresh {
			since = time.Now().UTC().Format(time.RFC3339)
		}
		mcp.Spec.Paused = true
		metav1.SetMetaDataAnnotation(&mcp.ObjectMeta, AnnotationPausedFor, key+" "+digest)
		metav1.SetMetaDataAnnotation(&mcp.ObjectMeta, AnnotationPausedSince, since)
		return r.patchPool(ctx, mcp, orig)
	})
	switch {
	case err != nil:
		msg := fmt.Sprintf("could not pause MachineConfigPool %s for the build in %s (the pool may roll once for the change and once for the image): %v", pool, where, err)
		r.logger().Warn("pausing the pool failed", "poolimage", key, "pool", pool, "error", err)
		r.event(pi, corev1.EventTypeWarning, "PoolPauseFailed", "pause", "%s", msg)
		setCond(pi, v1alpha1.ConditionPoolPaused, metav1.ConditionFalse, ReasonPauseFailed, msg)
	case other:
		setCond(pi, v1alpha1.ConditionPoolPaused, metav1.ConditionFalse, ReasonPausedElsewhere,
			fmt.Sprintf("MachineConfigPool %s was paused by someone else: it is left paused and never unpaused by the controller", pool))
	default:
		msg := fmt.Sprintf("MachineConfigPool %s is paused for the build of inputs %s in %s: its nodes move once the pool's rendered MachineConfig has the published image (at most %s); the build is published at once: %s",
			pool, digest, where, r.maxPause(), why)
		if fresh {
			r.logger().Info("paused the pool for the build", "poolimage", key, "pool", pool, "in", where)
			r.event(pi, corev1.EventTypeNormal, "PoolPaused", "pause", "%s", msg)
		}
		setCond(pi, v1alpha1.ConditionPoolPaused, metav1.ConditionTrue, ReasonHeldForBuild, msg)
	}
}

// pauseEnd says whether the controller's pause of mcp for pi ends now
// (the reason and message) or how long it may last at most. digest is
// the current sources digest ("": the inputs could not be read).
func (r *Reconciler) pauseEnd(ctx context.Context, pi *v1alpha1.PoolImage, mcp *mcfgv1.MachineConfigPool, digest string) (reason, msg string, wait time.Duration, err error) {
	_, held := pauseMark(mcp)
	left := time.Until(pausedSince(mcp).Add(r.maxPause()))
	switch {
	case !mcp.Spec.Paused:
		return ReasonPauseEnded, "someone else unpaused it (the controller's mark is removed)", 0, nil
	case !r.pauseWanted(pi) || pi.Spec.Source.OpenShift.MachineConfigPool != mcp.Name:
		return ReasonPauseNotNeeded, "the PoolImage no longer publishes a build to this pool", 0, nil
	case digest == "":
		return ReasonInvalid, "the inputs could not be read: no build comes", 0, nil
	case held != digest:
		return ReasonPauseNotNeeded, "the inputs changed to " + digest + " and no build Job of them holds the pause", 0, nil
	case buildFailed(pi, digest):
		return ReasonBuildFailed, "the build of inputs " + digest + " failed", 0, nil
	case left <= 0:
		return ReasonPauseTimedOut, fmt.Sprintf("the pause reached its bound of %s before the published image was rendered", r.maxPause()), 0, nil
	case pi.Status.SourcesDigest != digest || pi.Status.Published == nil || pi.Status.Published.Image == "":
		return "", "", left, nil // building, or not published yet
	}
	img, err := r.renderedImage(ctx, mcp)
	if err != nil || img != pi.Status.Published.Image {
		return "", "", left, err // the MCO renders it; the pool's update reconciles again
	}
	return ReasonRendered, "the pool's rendered MachineConfig " + mcp.Spec.Configuration.Name + " has the published image " + img, 0, nil
}

// buildFailed reports whether the build of the sources digest failed
// (its input, its Job, or a run of the in-process build: retried
// without a pause).
func buildFailed(pi *v1alpha1.PoolImage, digest string) bool {
	if failedDigest(pi) == digest || runFailed(pi) && pi.Status.SourcesDigest != digest {
		return true
	}
	b := lastRecord(pi, JobName(pi.Name, digest))
	return b != nil && b.Result == "Failed"
}

// renderedImage is the osImageURL of the pool's rendered MachineConfig
// (spec.configuration: what its nodes are to run).
func (r *Reconciler) renderedImage(ctx context.Context, mcp *mcfgv1.MachineConfigPool) (string, error) {
	name := mcp.Spec.Configuration.Name
	if name == "" {
		return "", nil
	}
	var mc mcfgv1.MachineConfig
	if err := r.reader().Get(ctx, types.NamespacedName{Name: name}, &mc); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return mc.Spec.OSImageURL, nil
}

// pauseCondition is true when the PoolImage says it holds a pause.
func pauseCondition(pi *v1alpha1.PoolImage) bool {
	return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionPoolPaused)
}

// livePool records that the build Job of digest does not pause the pool:
// the change since the published image is applied in place (or changes
// no node), so the build will be held and the MCO rolls the change at
// its own pace (why: the analysis, jobpredict.go).
func (r *Reconciler) livePool(pi *v1alpha1.PoolImage, digest, where, why string) {
	pool := pi.Spec.Source.OpenShift.MachineConfigPool
	msg := fmt.Sprintf("MachineConfigPool %s is not paused for the build of inputs %s in %s: %s", pool, digest, where, why)
	r.logger().Info("the pool is not paused: a live change", "poolimage", pauseKey(client.ObjectKeyFromObject(pi)), "pool", pool, "in", where)
	r.event(pi, corev1.EventTypeNormal, "PoolNotPaused", "pause", "%s", msg)
	setCond(pi, v1alpha1.ConditionPoolPaused, metav1.ConditionFalse, ReasonLiveChange, msg)
}

// runFailed reports a failed run of the last build (Degraded
// BuildFailed: the work queue retries it).
func runFailed(pi *v1alpha1.PoolImage) bool {
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonBuildFailed
}

// holdForBuild pauses the pool of a build whose change reboots the
// nodes anyway (predictJob), before the build starts, or records that a
// live change does not pause it; where names the build (a Job, the
// controller process).
func (r *Reconciler) holdForBuild(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs, where string) {
	if p := r.predictJob(ctx, pi, in); p.pause { // jobpredict.go
		r.pausePool(ctx, pi, in.digest, where, p.why)
	} else {
		r.livePool(pi, in.digest, where, p.why)
	}
}
