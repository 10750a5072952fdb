package controller

import (
	"errors"
	"fmt"
	"strings"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
)

// Read is what the controller read from the cluster (and its own
// options) for a PoolImage's build.
type Read struct {
	// OSCs, MachineConfigs and MachineConfigPools are the source's
	// documents, written to files; SecretsDir holds the Secrets the
	// OSC's secretRef files name.
	OSCs, MachineConfigs, MachineConfigPools []string
	SecretsDir                               string
	// Registry is the controller's registry options with the
	// PoolImage's pull and push credentials.
	Registry *registry.Options
	// IndexCacheDir is the controller's base index cache.
	IndexCacheDir string
	// SigningKey is spec.signing.keySecret's key (nil: unsigned).
	SigningKey *pipeline.KeyMaterial
	// Packages are the package stage's inputs (nil outside the build
	// pod: the controller process never runs buildah).
	Packages *pipeline.Packages
}

// SpecOf maps a PoolImage onto the build specification: the source's
// documents (rd) and spec.pool onto Inputs, spec.base, arch and target
// onto the fields of those names, the build settings (bakeSecrets,
// strict, allowTopLevel, baseIndex, preflight) with pipeline's one
// mapping (Spec.SetSettings), the controller's registry options with
// spec.pullSecrets and pushSecret onto Registry, spec.packages (in the
// build pod) onto Packages and spec.signing onto Signing (the key Secret
// carries its password). Errors name the spec's field.
func SpecOf(pi *v1alpha1.PoolImage, rd Read) (pipeline.Spec, error) {
	arch, err := platformsOf(pi)
	if err != nil {
		return pipeline.Spec{}, err
	}
	s := pipeline.Spec{
		Inputs: pipeline.Inputs{
			Pool: poolName(pi), OSCs: rd.OSCs, MachineConfigs: rd.MachineConfigs, MachineConfigPools: rd.MachineConfigPools,
			SecretsDir: rd.SecretsDir,
		},
		Base: pi.Spec.Base, Arch: arch, Target: pi.Spec.Target, Registry: rd.Registry,
		IndexCacheDir: rd.IndexCacheDir, Packages: rd.Packages,
	}
	if err := s.SetSettings(pi.Spec.Settings); err != nil {
		return s, specError(err)
	}
	if g := pi.Spec.Signing; g != nil {
		s.Signing = &pipeline.Signing{Key: rd.SigningKey, Referrers: g.Referrers}
	}
	return s, nil
}

// platformsOf parses spec.arch, the one place the controller reads it;
// the error names the field.
func platformsOf(pi *v1alpha1.PoolImage) (pipeline.Platforms, error) {
	arch, err := pipeline.ParsePlatforms(strings.Join(pi.Spec.Arch, ","))
	if err != nil {
		return pipeline.Platforms{}, inputErrorf("spec.arch: %s", err)
	}
	return arch, nil
}

// specError names the PoolImage's field in an error of pipeline.New.
func specError(err error) error {
	var pe *pipeline.Error
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Field == "signing.key":
		return fmt.Errorf("spec.signing.keySecret: %w", pe.Err)
	case pe.Field != "":
		return inputErrorf("spec.%s: %v", pe.Field, pe.Err)
	case pe.Step == "push":
		return fmt.Errorf("spec.target: %w", pe.Err)
	}
	return err
}
