package diff

import (
	"fmt"
	"slices"

	opv1 "github.com/openshift/api/operator/v1"

	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/machineconfig"
)

// Result is the whole diff.
type Result struct {
	Old *Side `json:"old"`
	New *Side `json:"new"`
	// Identical is set when a node on OLD has nothing to do for NEW.
	Identical  bool         `json:"identical"`
	Paths      []PathChange `json:"paths"`
	KernelArgs ArgsChange   `json:"kernelArgs"`
	Base       BaseChange   `json:"base"`
	Packages   PkgChange    `json:"packages"`
	Download   Download     `json:"download"`
	// MCO is the change in the machine-config daemon's terms.
	MCO       MCOChange    `json:"mco"`
	Platforms []Prediction `json:"platforms"`
	// Action is the most disruptive action of the platforms that apply.
	Action Action `json:"action"`
	// Architectures is set when two multi-platform images were compared
	// architecture by architecture: each one's action, the result above
	// being that of the one marked Shown.
	Architectures []ArchAction `json:"architectures,omitempty"`
}

// ArchAction is one architecture's part of a diff of two multi-platform
// images.
type ArchAction struct {
	// Architecture is the platform's architecture ("arm64", "arm/v7").
	Architecture string `json:"architecture"`
	// Action is the most disruptive action of the platforms that apply
	// to its nodes; empty when Added.
	Action Action `json:"action,omitempty"`
	// DownloadBytes is what its nodes download, compressed (0 when
	// Added: not measured).
	DownloadBytes int64 `json:"downloadBytes"`
	// Added is set when only NEW has this architecture: there is no OLD
	// image to compare with.
	Added bool `json:"added,omitempty"`
	// Shown marks the architecture whose full result is the diff's.
	Shown bool `json:"shown,omitempty"`
}

// ArgsChange is the kernel arguments of both sides.
type ArgsChange struct {
	Old     []string `json:"old"`
	New     []string `json:"new"`
	Changed bool     `json:"changed"`
}

// BaseChange is the base of both sides.
type BaseChange struct {
	OldDigest    string `json:"oldDigest,omitempty"`
	NewDigest    string `json:"newDigest,omitempty"`
	OldOSVersion string `json:"oldOSVersion,omitempty"`
	NewOSVersion string `json:"newOSVersion,omitempty"`
	OldKernel    string `json:"oldKernel,omitempty"`
	NewKernel    string `json:"newKernel,omitempty"`
	Changed      bool   `json:"changed"`
}

// PkgChange is the package stage of both sides: its key (images) or its
// inputs (input sets).
type PkgChange struct {
	OldKey        string   `json:"oldKey,omitempty"`
	NewKey        string   `json:"newKey,omitempty"`
	OldExtensions []string `json:"oldExtensions,omitempty"`
	NewExtensions []string `json:"newExtensions,omitempty"`
	OldKernelType string   `json:"oldKernelType,omitempty"`
	NewKernelType string   `json:"newKernelType,omitempty"`
	Changed       bool     `json:"changed"`
}

// Options are the diff's settings.
type Options struct {
	// Policies are the cluster's merged node disruption policies;
	// PolicyName names them ("default" when nil).
	Policies   *opv1.NodeDisruptionPolicyClusterStatus
	PolicyName string
}

// Compare diffs two sides. OLD and NEW of different pools or
// architectures are an error.
func Compare(old, new *Side, opts Options) (*Result, error) {
	if old.Pool != "" && new.Pool != "" && old.Pool != new.Pool {
		return nil, fmt.Errorf("OLD %s is pool %q, NEW %s is pool %q: a diff compares one pool", old.Given, old.Pool, new.Given, new.Pool)
	}
	if old.Arch != "" && new.Arch != "" && old.Arch != new.Arch {
		return nil, fmt.Errorf("OLD %s is %s, NEW %s is %s: a diff compares one architecture", old.Given, old.Arch, new.Given, new.Arch)
	}
	r := &Result{Old: old, New: new, Paths: ComparePaths(old.Items, new.Items)}
	if r.Paths == nil {
		r.Paths = []PathChange{} // [] in JSON
	}
	r.KernelArgs = ArgsChange{Old: old.KernelArgs, New: new.KernelArgs, Changed: !slices.Equal(old.KernelArgs, new.KernelArgs)}
	r.Base = BaseChange{OldDigest: old.BaseDigest, NewDigest: new.BaseDigest, OldOSVersion: old.OSVersion, NewOSVersion: new.OSVersion,
		OldKernel: old.Kernel, NewKernel: new.Kernel, Changed: baseChanged(old, new) || old.OSImageURL != new.OSImageURL}
	r.Packages = PkgChange{OldKey: old.PackageKey, NewKey: new.PackageKey, OldExtensions: old.Extensions, NewExtensions: new.Extensions,
		OldKernelType: old.KernelType, NewKernelType: new.KernelType}
	r.Packages.Changed = old.PackageKey != new.PackageKey || !slices.Equal(old.Extensions, new.Extensions) ||
		canonicalKernelType(old.KernelType) != canonicalKernelType(new.KernelType)
	r.Download = download(old, new)
	r.MCO = deriveMCO(old, new, r.Paths)
	r.Identical = identical(r)
	r.predict(opts)
	return r, nil
}

// identical: two images are identical only with the same digest (any
// other digest is a new osImageURL, a new deployment); otherwise nothing a
// node sees differs.
func identical(r *Result) bool {
	if r.Old.image() && r.New.image() {
		return r.Old.Digest == r.New.Digest
	}
	return len(r.Paths) == 0 && !r.KernelArgs.Changed && !r.Base.Changed && !r.Packages.Changed && r.MCO.Empty() &&
		r.Download.Layers == 0
}

// predict fills in the platforms and the overall action.
func (r *Result) predict(opts Options) {
	p, name := DefaultPolicies(), "default (openshift/machine-config-operator @ 7ff337a4ffac)"
	if opts.Policies != nil {
		p, name = *opts.Policies, opts.PolicyName
	}
	kinds := r.Old.sourceKinds()
	for k := range r.New.sourceKinds() {
		kinds[k] = true
	}
	unknown := len(kinds) == 0
	os := predictOpenShift(r, p, name)
	osi := predictOpenShiftImage(r.Identical)
	bc := predictBootc(r)
	gd := predictGardener(r)
	os.Applies = unknown || kinds[machineconfig.Kind]
	osi.Applies = os.Applies
	bc.Applies = true
	gd.Applies = unknown || kinds[gardener.Kind]
	r.Platforms = []Prediction{os, osi, bc, gd}
	r.Action = None
	for _, pr := range r.Platforms {
		if pr.Applies {
			r.Action = Max(r.Action, pr.Action)
		}
	}
}

// Platform returns the prediction for a platform (nil if unknown).
func (r *Result) Platform(name string) *Prediction {
	for i := range r.Platforms {
		if r.Platforms[i].Platform == name {
			return &r.Platforms[i]
		}
	}
	return nil
}
