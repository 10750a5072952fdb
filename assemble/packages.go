package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// PackageStage builds a pool's package base: the official base with what
// cannot be appended as files (MachineConfig extensions, kernelType, a
// user's Containerfile) built in by running commands in it. Build calls it
// after rendering and before assembly; the config layers are then appended
// onto the package base instead of the official base, and preflight checks
// that the official base's layers are an ordered prefix of the result.
//
// builder only defines it: package packagestage plans the stage and
// packagestage/bud runs it with buildah.
type PackageStage interface {
	// Run returns the package base for the request, built or found by its
	// key, or (nil, nil) when the pool has no package inputs (no
	// extensions, the default kernel and no Containerfile of the stage's
	// own): the config layers then go onto the official base. With an
	// error, a result (if any) says how far the stage got.
	Run(ctx context.Context, req PackageRequest) (*PackageResult, error)
}

// PackageRequest is what Build hands the package stage.
type PackageRequest struct {
	// Pool names the pool; Base is the official base, resolved by digest.
	Pool string
	Base *Base
	// Arch is the platform built for (registry.NormalizeArch naming; ""
	// means amd64).
	Arch string
	// Extensions and KernelType are the pool's, as rendered
	// (layers.Result).
	Extensions []string
	KernelType string
	// Logger receives progress; never nil.
	Logger *slog.Logger
}

// PackageResult reports a package stage that ran (the -o json
// "packageStage" of a build).
type PackageResult struct {
	// Hit reports that the package base tagged with Key was used without
	// building anything.
	Hit bool `json:"hit"`
	// Key is the hash of every package input; Tag the tag the package
	// base has under it.
	Key string `json:"key"`
	Tag string `json:"tag,omitempty"`
	// Ref is the package base by digest ("REG/REPO@sha256:..."): the base
	// the config layers are appended to.
	Ref string `json:"ref"`
	// Commands are the Containerfile instructions that ran (none for a
	// hit).
	Commands []string `json:"commands,omitempty"`
	// Layers are the layers the stage added on top of the official base
	// and AddedBytes their compressed size.
	Layers     []AddedLayer `json:"layers"`
	AddedBytes int64        `json:"addedBytes"`
	// Seconds is the stage's wall time.
	Seconds float64 `json:"seconds"`
	// StorageDriver is the scratch storage driver a build used (overlay
	// or vfs; empty for a hit).
	StorageDriver string `json:"storageDriver,omitempty"`
	// Phases are the stage's own steps with their wall and CPU time
	// (lookup; on a miss pull, build, push, describe, cleanup).
	Phases []Phase `json:"phases,omitempty"`
}

// ErrNoPackageStage is returned (wrapped) when a pool needs a package stage
// and the build has none.
var ErrNoPackageStage = errors.New("no package stage")

// needsPackages returns what of a rendered pool needs a package stage.
func needsPackages(pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s need the package stage, and this build has %w", strings.Join(pkgs, ", "), ErrNoPackageStage)
}
