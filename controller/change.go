package controller

import (
	"context"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	opv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/diff"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
)

// maxChangedPaths bounds status.change.paths.
const maxChangedPaths = 20

// maxWhy bounds the rules a platform's status.change entry names.
const maxWhy = 3

// ClusterPolicyName is the MachineConfiguration whose
// spec.nodeDisruptionPolicy the machine-config daemon merges with its
// defaults.
const ClusterPolicyName = "cluster"

// analyse compares two images of the PoolImage as oslayer diff does (the
// manifests, labels and metadata layers; no base layer) under the
// cluster's node disruption policies: one image, or every architecture
// of a multi-platform built image (compareArches). A failure is recorded
// in the change, not returned.
func (r *Reconciler) analyse(ctx context.Context, pi *v1alpha1.PoolImage, from, to string) *v1alpha1.ImageChange {
	ch, err := r.compare(ctx, pi, from, to)
	if err != nil {
		if ch == nil {
			ch = &v1alpha1.ImageChange{From: from, To: to}
		}
		ch.Error = err.Error()
	}
	headline(pi, ch) // changehead.go
	return ch
}

// compare loads both images and diffs them: when the built image is an
// index, each of its platforms.
func (r *Reconciler) compare(ctx context.Context, pi *v1alpha1.PoolImage, from, to string) (*v1alpha1.ImageChange, error) {
	opts, err := r.policies(ctx, pi)
	if err != nil {
		return nil, err
	}
	reg, done, err := r.readRegistry(ctx, pi)
	if err != nil {
		return nil, err
	}
	defer done()
	platforms, err := diff.ImagePlatforms(ctx, reg, to)
	if err != nil {
		return nil, fmt.Errorf("reading the built image: %w", err)
	}
	if platforms != nil {
		return compareArches(ctx, reg, from, to, platforms, opts)
	}
	arch, err := platformsOf(pi)
	if err != nil {
		return nil, err
	}
	platform := changePlatform(arch)
	res, err := compareOne(ctx, reg, from, to, platform, platform, opts)
	if err != nil {
		return nil, err
	}
	return Summarize(from, to, res), nil
}

// compareOne diffs the image of platform oldP in from with that of newP
// in to (nil: linux/amd64; both name one platform).
func compareOne(ctx context.Context, reg *registry.Options, from, to string, oldP, newP *v1.Platform, opts diff.Options) (*diff.Result, error) {
	old, err := diff.LoadImage(ctx, reg, from, oldP)
	if err != nil {
		return nil, fmt.Errorf("reading the published image: %w", err)
	}
	new, err := diff.LoadImage(ctx, reg, to, newP)
	if err != nil {
		return nil, fmt.Errorf("reading the built image: %w", err)
	}
	return diff.Compare(old, new, opts)
}

// changePlatform is the platform compared when the built image is one
// image: the first of the PoolImage's platforms (nil: none or all,
// linux/amd64), which picks it from a published index.
func changePlatform(arch pipeline.Platforms) *v1.Platform {
	n := arch.Normalized()
	if len(n) == 0 || arch.All() {
		return nil
	}
	return &v1.Platform{OS: "linux", Architecture: n[0]}
}

// policies reads the cluster's MachineConfiguration "cluster" for an
// OpenShift pool: its spec.nodeDisruptionPolicy merged with the MCO's
// defaults. A cluster that serves no MachineConfiguration, or has none,
// has the defaults.
func (r *Reconciler) policies(ctx context.Context, pi *v1alpha1.PoolImage) (diff.Options, error) {
	if pi.Spec.Source.OpenShift == nil || !r.openShift.Load() {
		return diff.Options{}, nil
	}
	rd := r.APIReader
	if rd == nil {
		rd = r.Client
	}
	var mc opv1.MachineConfiguration
	err := rd.Get(ctx, types.NamespacedName{Name: ClusterPolicyName}, &mc)
	switch {
	case meta.IsNoMatchError(err) || client.IgnoreNotFound(err) == nil && err != nil:
		return diff.Options{}, nil
	case err != nil:
		return diff.Options{}, fmt.Errorf("reading MachineConfiguration %s: %w", ClusterPolicyName, err)
	}
	p := diff.MergePolicies(mc.Spec.NodeDisruptionPolicy)
	return diff.Options{Policies: &p, PolicyName: "MachineConfiguration " + ClusterPolicyName + " (merged with the defaults)"}, nil
}

// Summarize is the status form of a diff: the action per platform with
// the first rules that decided, the download and the first changed paths
// with their sources.
func Summarize(from, to string, res *diff.Result) *v1alpha1.ImageChange {
	ch := &v1alpha1.ImageChange{From: from, To: to, Action: string(res.Action),
		DownloadBytes: res.Download.Bytes, DownloadLayers: int32(res.Download.Layers), PathsTotal: int32(len(res.Paths)),
		KernelArgs: res.KernelArgs.Changed, Base: res.Base.Changed, Packages: res.Packages.Changed}
	for _, p := range res.Platforms {
		ch.Platforms = append(ch.Platforms, v1alpha1.PlatformAction{Platform: p.Platform, Action: string(p.Action),
			Applies: p.Applies, Why: why(p)})
	}
	ch.Paths = changedPaths(res.Paths)
	return ch
}

// changedPaths are the first maxChangedPaths paths with their sources.
func changedPaths(paths []diff.PathChange) []v1alpha1.ChangedPath {
	var out []v1alpha1.ChangedPath
	for i, pc := range paths {
		if i == maxChangedPaths {
			break
		}
		cp := v1alpha1.ChangedPath{Path: pc.Path, Change: pc.Change}
		if it := pc.New; it != nil {
			cp.Source = strings.TrimSpace(it.Source.String())
		} else if pc.Old != nil {
			cp.Source = strings.TrimSpace(pc.Old.Source.String())
		}
		out = append(out, cp)
	}
	return out
}

// why names the first rules of a prediction ("ITEM: RULE; ..."), and for
// OpenShift its notes (the node disruption policy used).
func why(p diff.Prediction) string {
	var parts []string
	for i, r := range p.Rules {
		if i == maxWhy {
			parts = append(parts, fmt.Sprintf("and %d more", len(p.Rules)-maxWhy))
			break
		}
		parts = append(parts, r.Item+": "+r.Rule)
	}
	if len(parts) == 0 && p.Action == diff.None {
		parts = append(parts, "nothing to do")
	}
	if p.Platform == diff.PlatformOpenShift {
		// Which policies decided: the defaults or the cluster's.
		parts = append(parts, p.Notes...)
	}
	return strings.Join(parts, "; ")
}
