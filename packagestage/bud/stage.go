// Package bud executes a planned package stage (packagestage.Plan) with
// buildah as a library: chroot isolation, the vfs storage driver, storage in
// a scratch directory that is removed afterwards. The result, the package
// base, is pushed by digest and tagged with the plan's key; a later run
// whose tag exists with the same recorded key (label io.oslayer.package-key)
// runs no buildah and reads no base blob.
//
// Programs that use this package must call buildah's reexec init first in
// main (and TestMain): if InitReexec() returns true, return at once.
//
// Stage is the package stage as builder runs it (build.PackageStage):
// it plans the stage for each pool (package packagestage) and runs it here.
//
// The executor builds only with the tags in Tags (no gpgme, btrfs or
// devicemapper C libraries needed). Without them the package still builds:
// Enabled reports false, and a pool that needs the package stage is
// refused with an error that names the tags.
package bud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage"
)

// Tags are the build tags that include the buildah executor.
const Tags = "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper"

// Config is a package stage's own inputs (the pool's extensions and
// kernelType come with each request) and where its package bases go.
type Config struct {
	// Containerfile is the user's Containerfile (nil: none) and
	// ContainerfileName names it in errors; BuildArgs and Repos are as in
	// packagestage.Inputs; ContextDir is the build context ("" : none).
	Containerfile     []byte
	ContainerfileName string
	BuildArgs         map[string]string
	Repos             map[string][]byte
	ContextDir        string
	// Secrets are build secrets by id (file paths): mounted for RUN
	// --mount=type=secret steps, never in a layer, label, history or the
	// key.
	Secrets map[string]string
	// Repository is the registry repository ("REG/REPO") the package base
	// is pushed to by digest and tagged packages-KEY; "" refuses a pool
	// that needs the stage.
	Repository string
	// Registry reaches the registries.
	Registry *registry.Options
	// ScratchDir is where buildah's scratch storage is made ("": the
	// system's temporary directory); it is removed afterwards.
	// StorageDriver is its driver (Options.StorageDriver).
	ScratchDir    string
	StorageDriver string
	// Log receives buildah's output (nil: discarded).
	Log io.Writer
}

// Stage is the package stage as builder runs it (build.PackageStage).
// After a build it removes its scratch storage in the background while
// the build goes on (the config layers, the push, signing): call Wait
// before the program exits.
type Stage struct {
	c       Config
	removal sync.WaitGroup
}

var _ assemble.PackageStage = (*Stage)(nil)

// New returns the package stage for c.
func New(c Config) *Stage { return &Stage{c: c} }

// Wait waits until the scratch storage of every build this stage ran is
// removed.
func (s *Stage) Wait() { s.removal.Wait() }

// removeLater removes dir in the background; Wait waits for it.
func (s *Stage) removeLater(dir string) {
	s.removal.Add(1)
	go func() {
		defer s.removal.Done()
		os.RemoveAll(dir)
	}()
}

// Enabled reports whether this binary includes the buildah executor (it
// was built with Tags).
func Enabled() bool { return enabled }

// Inputs are the package inputs of req with the stage's own.
func (s *Stage) Inputs(req assemble.PackageRequest) packagestage.Inputs {
	arch := req.Arch
	if arch == "" {
		arch = "amd64"
	}
	return packagestage.Inputs{
		Extensions:        req.Extensions,
		KernelType:        req.KernelType,
		Arch:              registry.NormalizeArch(arch),
		Containerfile:     s.c.Containerfile,
		ContainerfileName: s.c.ContainerfileName,
		BuildArgs:         s.c.BuildArgs,
		Repos:             s.c.Repos,
	}
}

// Run plans the stage for the pool and runs it: nothing (nil, nil) for a
// pool without package inputs, else the package base from its tag when
// the tag records the same key, else built with buildah and pushed.
func (s *Stage) Run(ctx context.Context, req assemble.PackageRequest) (*assemble.PackageResult, error) {
	in := s.Inputs(req)
	if in.Empty() {
		return nil, nil
	}
	if req.Base == nil {
		return nil, errors.New("no base image")
	}
	plan, err := packagestage.NewPlan(req.Base.Digest, in, s.c.ContextDir)
	if err != nil {
		return nil, err
	}
	if !enabled {
		return nil, fmt.Errorf("pool %s needs the package stage (%s), and this oslayer was built without it: build it with -tags %s", req.Pool, needs(in, plan), Tags)
	}
	if s.c.Repository == "" {
		return nil, field.Errorf("pool %s needs the package stage (%s): give a registry target (%v REG/REPO[:TAG]); the package base is pushed there", req.Pool, needs(in, plan), field.Name("target"))
	}
	if in.Arch != runtime.GOARCH {
		return nil, fmt.Errorf("pool %s needs the package stage (%s) for %s: buildah runs its steps on this machine, which is %s", req.Pool, needs(in, plan), in.Arch, runtime.GOARCH)
	}
	if registry.IsLayout(req.Base.Ref) {
		return nil, fmt.Errorf("pool %s needs the package stage (%s): its base %s is an OCI layout; give a registry base (buildah pulls it for this stage)", req.Pool, needs(in, plan), req.Base.Ref)
	}
	return execute(ctx, s.c, req, plan, s.removeLater)
}

// needs says what of in needs the stage.
func needs(in packagestage.Inputs, plan *packagestage.Plan) string {
	var out []string
	for _, e := range in.Extensions {
		out = append(out, "extension "+e)
	}
	if kt := plan.Containerfile.KernelType; kt != packagestage.KernelDefault {
		out = append(out, "kernelType "+kt)
	}
	if len(in.Containerfile) > 0 {
		name := in.ContainerfileName
		if name == "" {
			name = "Containerfile"
		}
		out = append(out, "containerfile "+filepath.Base(name))
	}
	return strings.Join(out, ", ")
}
