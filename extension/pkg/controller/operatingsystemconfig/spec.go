package operatingsystemconfig

import (
	"errors"
	"strings"

	"github.com/oslayer/oslayer/pipeline"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// read is what the actuator read for one build: the OSC written as a
// file, the secretRef Secrets, the credentials and the signing key.
type read struct {
	osc        string
	secretsDir string
	registry   *pipeline.RegistryOptions
	signingKey *pipeline.KeyMaterial
	cacheDir   string
	// publish and sign are the shared push and sign options.
	publish []pipeline.PublishOption
	sign    []pipeline.SignOption
}

// specOf maps an OSC's settings onto the build specification: the OSC
// (rd.osc) and its pool onto Inputs, the version's base, arch and the
// expanded target onto the fields of those names, the build settings
// (bakeSecrets, strict, allowTopLevel, baseIndex, preflight) with
// pipeline's one mapping (Spec.SetSettings; preflight.expectVersion's
// {version} expanded), the extension's registry options with
// registrySecretRef onto Registry and signing onto Signing. Errors name
// the providerConfig field.
func specOf(s *settings, rd read) (pipeline.Spec, error) {
	cfg := s.config
	arch, err := pipeline.ParsePlatforms(strings.Join(cfg.Arch, ","))
	if err != nil {
		return pipeline.Spec{}, invalidf(cfg.field("arch"), "%s", err)
	}
	spec := pipeline.Spec{
		Inputs: pipeline.Inputs{Pool: s.pool, OSCs: []string{rd.osc}, SecretsDir: rd.secretsDir},
		Base:   s.base, Arch: arch, Target: s.target, Registry: rd.registry, IndexCacheDir: rd.cacheDir,
	}
	if err := spec.SetSettings(cfg.Settings); err != nil {
		return spec, specError(cfg, err)
	}
	spec.Preflight.ExpectVersion = configv1alpha1.Expand(spec.Preflight.ExpectVersion, s.values)
	if g := cfg.Signing; g != nil {
		spec.Signing = &pipeline.Signing{Key: rd.signingKey, Referrers: g.Referrers}
	}
	return spec, nil
}

// specError names the field (the OSC's or the default's) of an error of
// pipeline.New.
func specError(cfg *config, err error) error {
	var pe *pipeline.Error
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Field == "target":
		return invalidf(cfg.field("target"), "%v", pe.Err)
	case pe.Field == "signing.key":
		return invalidf(cfg.field("signing.keySecretRef"), "%v", pe.Err)
	case pe.Field != "":
		return invalidf(cfg.field(pe.Field), "%v", pe.Err)
	case pe.Step == "push":
		return fieldErr(cfg.field("target"), pe.Err)
	}
	return err
}
