package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/prune"
)

// spec.retention: after every good build the controller runs oslayer
// prune's decision (package prune) on the repository of spec.target,
// limited to the PoolImage's pool, with the references read from the
// cluster (every PoolImage's status, the published ConfigMaps, the
// MachineConfigs pools and nodes use, layered nodes' annotations,
// BootcNodes and BootcNodePools). It keeps the newest spec.retention.keep
// good images and every image in use and deletes the rest with their
// signature, attestation and SBOM tags (unless dryRun). The outcome is
// status.retention, the Retention condition and an Event; a registry that
// refuses DELETE, or any other failure of the run, is the condition
// (false) and a warning Event, never a failed build.

// Reasons of ConditionRetention.
const (
	ReasonPruned          = "Pruned"
	ReasonPruneDryRun     = "DryRun"
	ReasonDeleteRefused   = "DeleteRefused"
	ReasonRetentionFailed = "RetentionFailed"
)

// setupRetention gives the reconciler the dynamic client prune reads the
// cluster's references with.
func (r *Reconciler) setupRetention(mgr ctrl.Manager) error {
	if r.Dynamic != nil {
		return nil
	}
	dc, err := dynamic.NewForConfig(mgr.GetConfig())
	r.Dynamic = dc
	return err
}

// retain runs spec.retention after a good build and records the outcome
// in status; only a failure to write the status is returned.
func (r *Reconciler) retain(ctx context.Context, pi *v1alpha1.PoolImage) error {
	rt := pi.Spec.Retention
	if rt == nil || !rt.Enabled || r.Dynamic == nil {
		return nil
	}
	res, err := r.prune(ctx, pi, rt)
	st := &v1alpha1.RetentionStatus{Time: metav1.Now(), Image: pi.Status.Image, DryRun: rt.DryRun}
	if res != nil {
		st.Kept, st.Deleted, st.WouldDelete = int32(res.Kept), int32(res.Deleted), int32(res.Delete)
	}
	pi.Status.Retention = st
	r.logRetention(pi, res)
	var refused *prune.RefusedError
	switch {
	case errors.As(err, &refused):
		r.retentionFailed(pi, ReasonDeleteRefused, err)
	case err != nil:
		r.retentionFailed(pi, ReasonRetentionFailed, err)
	case rt.DryRun:
		msg := fmt.Sprintf("dry run: %d kept, %d would be deleted", st.Kept, st.WouldDelete)
		setCond(pi, v1alpha1.ConditionRetention, metav1.ConditionTrue, ReasonPruneDryRun, msg)
		r.event(pi, corev1.EventTypeNormal, "PruneDryRun", "prune", "%s", msg)
	default:
		msg := fmt.Sprintf("%d kept, %d deleted with their signature, attestation and SBOM tags", st.Kept, st.Deleted)
		setCond(pi, v1alpha1.ConditionRetention, metav1.ConditionTrue, ReasonPruned, msg)
		r.event(pi, corev1.EventTypeNormal, "Pruned", "prune", "%s", msg)
	}
	return r.Client.Status().Update(ctx, pi)
}

// retentionFailed records a run that could not delete.
func (r *Reconciler) retentionFailed(pi *v1alpha1.PoolImage, reason string, err error) {
	msg := "spec.retention: " + err.Error()
	setCond(pi, v1alpha1.ConditionRetention, metav1.ConditionFalse, reason, msg)
	r.logger().Warn("retention failed", "poolimage", pi.Namespace+"/"+pi.Name, "error", msg)
	r.event(pi, corev1.EventTypeWarning, reason, "prune", "%s", msg)
}

// prune runs the prune decision (and, unless dryRun, the deletion) on
// the target repository for the PoolImage's pool.
func (r *Reconciler) prune(ctx context.Context, pi *v1alpha1.PoolImage, rt *v1alpha1.Retention) (*prune.Result, error) {
	policy, err := retentionPolicy(rt)
	if err != nil {
		return nil, err
	}
	policy.Pools = []string{poolName(pi)}
	tag, err := name.NewTag(pi.Spec.Target, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("spec.target %q: %w", pi.Spec.Target, err)
	}
	dir, err := os.MkdirTemp("", "oslayer-controller-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	reg := r.Options.Registry
	kc, _, err := r.keychain(ctx, pi, dir)
	if err != nil {
		return nil, err
	}
	reg.Keychain, reg.Shared = kc, nil
	return prune.Run(ctx, prune.Options{Targets: []string{tag.Context().Name()}, Sources: []prune.Source{prune.Cluster(r.Dynamic)},
		Policy: policy, Delete: !rt.DryRun, Registry: &reg, Log: r.logger()})
}

// retentionPolicy is spec.retention with its defaults (keep 5, grace 1h).
func retentionPolicy(rt *v1alpha1.Retention) (prune.Policy, error) {
	p := prune.Policy{Keep: v1alpha1.DefaultRetentionKeep, Now: time.Now()}
	if rt.Keep != nil {
		p.Keep = int(*rt.Keep)
	}
	grace, err := time.ParseDuration(v1alpha1.DefaultRetentionGrace)
	if err != nil {
		return p, err
	}
	if rt.Grace != nil {
		grace = rt.Grace.Duration
	}
	if grace < 0 || p.Keep < 1 {
		return p, fmt.Errorf("spec.retention: keep %d, grace %s: keep must be at least 1, grace not negative", p.Keep, grace)
	}
	p.Grace = grace
	return p, nil
}

// logRetention logs every image's action and why (debug).
func (r *Reconciler) logRetention(pi *v1alpha1.PoolImage, res *prune.Result) {
	if res == nil {
		return
	}
	for _, im := range res.Images {
		r.logger().Debug("retention", "poolimage", pi.Namespace+"/"+pi.Name, "digest", im.Digest.String(),
			"pool", im.Pool, "action", im.Action, "why", strings.Join(im.Reasons, "; "))
	}
}
