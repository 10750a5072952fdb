package operatingsystemconfig

import (
	"errors"
	"strings"

	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/sign"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// read is what the actuator read for one build: the OSC written as a
// file, the secretRef Secrets, the credentials and the signing key.
type read struct {
	osc        string
	secretsDir string
	registry   *pipeline.RegistryOptions
	signingKey *sign.KeyMaterial
	cacheDir   string
	// publish and sign are the shared push and sign options.
	publish []publish.Option
	sign    []sign.Option
}

// specOf maps an OSC's settings onto the build specification: the OSC
// (rd.osc) and its pool, providerConfig bakeSecrets, strict and
// allowTopLevel onto Inputs, the version's base, arch, the expanded
// target and baseIndex onto the fields of those names, the extension's
// registry options with registrySecretRef onto Registry, preflight
// ({version} expanded) onto Preflight and signing onto Signing. Errors
// name the providerConfig field.
func specOf(s *settings, rd read) (pipeline.Spec, error) {
	cfg := s.config
	arch, err := pipeline.ParseArch(strings.Join(cfg.Arch, ","))
	if err != nil {
		return pipeline.Spec{}, invalidf(cfg.field("arch"), "%s", strings.TrimPrefix(err.Error(), "--arch "))
	}
	spec := pipeline.Spec{
		Inputs: pipeline.Inputs{Pool: s.pool, OSCs: []string{rd.osc}, SecretsDir: rd.secretsDir,
			BakeSecrets: cfg.BakeSecrets, Strict: cfg.Strict, AllowTopLevel: cfg.AllowTopLevel},
		Base: s.base, Arch: arch, Target: s.target, Registry: rd.registry,
		BaseIndex: cfg.BaseIndex, IndexCacheDir: rd.cacheDir,
	}
	if pf := cfg.Preflight; pf != nil {
		spec.Preflight, err = preflightOf(pf, cfg.field("preflight.maxAddedBytes"), s.values)
		if err != nil {
			return spec, err
		}
	}
	if g := cfg.Signing; g != nil {
		spec.Signing = &pipeline.Signing{Key: rd.signingKey, Referrers: g.Referrers}
	}
	return spec, nil
}

// preflightOf is the pipeline's preflight options of pf; an error of
// maxAddedBytes names fld.
func preflightOf(pf *configv1alpha1.Preflight, fld string, values map[string]string) (pipeline.Preflight, error) {
	p := pipeline.Preflight{Skip: pf.Skip, ExpectVersion: configv1alpha1.Expand(pf.ExpectVersion, values),
		FatalWarnings: pf.FatalWarnings, DenyUsrOverride: pf.DenyUsrOverride, RequireBase: pf.RequireBase,
		AllowSecrets: pf.AllowSecrets, WarnLayers: int(pf.WarnLayers), MaxLayers: int(pf.MaxLayers)}
	if pf.MaxAddedBytes != "" {
		n, err := preflight.ParseBytes(pf.MaxAddedBytes)
		if err != nil {
			return p, invalidf(fld, "%v", err)
		}
		p.MaxAddedBytes = n
	}
	return p, nil
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
	case pe.Field != "":
		return invalidf(cfg.field(pe.Field), "%v", pe.Err)
	case pe.Step == sign.StageSign:
		return invalidf(cfg.field("signing.keySecretRef"), "%s", strings.TrimPrefix(pe.Err.Error(), sign.StageSign+": "))
	case pe.Step == "push":
		return fieldErr(cfg.field("target"), pe.Err)
	}
	return err
}
