package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/diff"
)

// The BootcNodePool's reboot policy (spec.disruption.rebootPolicy,
// bootc-operator @ 1ba04398 api/v1alpha1/bootcnodepool_types.go:
// RebootOnly, the default, or AllowSoftReboot — "a userspace-only
// restart when the update supports it") is set per published image: the
// controller allows a soft reboot only when oslayer diff predicts the
// change to the published image soft-reboot eligible on bootc (same
// kernel, initramfs, kernel arguments and SELinux policy), and records
// the prediction. Once nodes staged the image, bootc reports on each
// BootcNode whether the staged entry can soft-reboot
// (status.staged.softRebootCapable); the controller counts them and names
// the nodes whose report differs from the prediction (a Warning Event
// SoftRebootMismatch).

// BootcNodeGVK is bootc-operator's BootcNode (one per node).
var BootcNodeGVK = schema.GroupVersionKind{Group: "node.bootc.dev", Version: "v1alpha1", Kind: "BootcNode"}

// Reboot policies of a BootcNodePool.
const (
	RebootOnly      = "RebootOnly"
	AllowSoftReboot = "AllowSoftReboot"
)

// softReboot is the prediction for the published image: eligible when the
// analysed change to it (status.change) says soft-reboot on bootc; a
// rollback, a first image or a change not analysed reboot.
func softReboot(pi *v1alpha1.PoolImage) (bool, string) {
	img := publishedImage(pi)
	ch := pi.Status.Change
	switch {
	case pi.Status.Rollback != nil && img == pi.Status.Rollback.Image:
		return false, "a rollback: the change back was not analysed"
	case ch == nil || ch.To != img || ch.Error != "":
		return false, "no analysed change to the published image"
	}
	pa := platformAction(ch, diff.PlatformBootc)
	if pa == nil {
		return false, "no bootc prediction"
	}
	return pa.Action == string(diff.SoftReboot), pa.Action + ": " + pa.Why
}

// rebootPolicy is the pool's reboot policy for the prediction.
func rebootPolicy(soft bool) string {
	if soft {
		return AllowSoftReboot
	}
	return RebootOnly
}

// stagedReports counts the BootcNodes that staged the published image
// and those whose staged entry is soft-reboot capable, and names the
// nodes whose report differs from the prediction (in st).
func (r *Reconciler) stagedReports(ctx context.Context, pi *v1alpha1.PoolImage, old, st *v1alpha1.BootcNodePoolStatus) error {
	var nodes unstructured.UnstructuredList
	nodes.SetGroupVersionKind(BootcNodeGVK.GroupVersion().WithKind("BootcNodeList"))
	rd := client.Reader(r.Client)
	if r.APIReader != nil {
		rd = r.APIReader // BootcNodes are listed, not watched (RBAC get, list)
	}
	if err := rd.List(ctx, &nodes); err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("listing BootcNodes: %w", err)
	}
	want := digestOf(publishedImage(pi))
	var differ []string
	st.StagedNodes, st.SoftRebootCapable = 0, 0
	for _, n := range nodes.Items {
		d, _, _ := unstructured.NestedString(n.Object, "status", "staged", "imageDigest")
		if want == "" || d != want {
			continue
		}
		st.StagedNodes++
		capable, _, _ := unstructured.NestedBool(n.Object, "status", "staged", "softRebootCapable")
		if capable {
			st.SoftRebootCapable++
		}
		if capable != st.SoftRebootPredicted {
			differ = append(differ, fmt.Sprintf("%s (softRebootCapable %t)", n.GetName(), capable))
		}
	}
	sort.Strings(differ)
	st.SoftRebootMismatch = strings.Join(differ, ", ")
	if st.SoftRebootMismatch != "" && (old == nil || st.SoftRebootMismatch != old.SoftRebootMismatch) {
		r.event(pi, corev1.EventTypeWarning, "SoftRebootMismatch", "rollout",
			"oslayer diff predicted soft reboot %t for %s (%s); the BootcNodes that staged it report otherwise: %s",
			st.SoftRebootPredicted, publishedImage(pi), st.SoftRebootWhy, st.SoftRebootMismatch)
	}
	return nil
}
