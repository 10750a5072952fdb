package operatingsystemconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"
	"github.com/oslayer/oslayer/pipeline"
	buildsettings "github.com/oslayer/oslayer/pipeline/settings"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// reconcile builds, pushes and signs the pool image of a reconcile OSC,
// records it in status.providerStatus and returns what the node gets.
func (a *Actuator) reconcile(ctx context.Context, log logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig) ([]extensionsv1alpha1.Unit, []extensionsv1alpha1.File, *extensionsv1alpha1.InPlaceUpdatesStatus, error) {
	s, err := a.settingsOf(ctx, osc)
	if err != nil {
		return nil, nil, nil, err
	}
	res, err := a.build(ctx, osc, s)
	if err != nil {
		return nil, nil, nil, err
	}
	log.Info("Built the pool image", "image", res.Image, "pool", s.pool, "version", s.version)
	st := &configv1alpha1.OperatingSystemConfigurationStatus{Image: res.Image, Version: s.version, Base: s.base, InputsDigest: res.InputsDigest}
	if err := a.recordStatus(ctx, osc, st); err != nil {
		return nil, nil, nil, err
	}
	r := nodeside.Reconcile{Image: res.Image, Version: s.version}
	return nodeside.ExtensionUnits(r), nodeside.ExtensionFiles(r),
		&extensionsv1alpha1.InPlaceUpdatesStatus{OSUpdate: nodeside.OSUpdate(r)}, nil
}

// build runs the shared pipeline for the OSC.
func (a *Actuator) build(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, s *settings) (*pipeline.Result, error) {
	dir, err := os.MkdirTemp("", "oslayer-os-extension-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rd, err := a.read(ctx, osc, s, dir)
	if err != nil {
		return nil, err
	}
	spec, err := specOf(s, rd)
	if err != nil {
		return nil, err
	}
	p, err := pipeline.New(spec, pipeline.Env{Version: a.options.Version, Logger: a.options.Logger,
		Publish: rd.publish, Sign: rd.sign, SingleRequestUploads: true, Keys: &a.keys})
	if err != nil {
		return nil, specError(s.config, err)
	}
	defer p.Close()
	res, err := p.Run(ctx)
	if err != nil {
		a.shared.Forget()
		// Messages name the OSC, not the temporary file it was written to.
		msg := strings.ReplaceAll(err.Error(), rd.osc, "OperatingSystemConfig "+osc.Namespace+"/"+osc.Name)
		return nil, buildErr(s.config, res, &reworded{msg, err})
	}
	return res, nil
}

// reworded is an error with another message that still unwraps to its
// cause (registryFault classifies the cause).
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

// buildErr names what failed: a render or preflight failure is the OSC's
// content (spec.units/spec.files or the configuration's base); a registry
// outage or refused credentials is the registry's (registryFault: no
// configuration field, the step and Gardener's infrastructure codes);
// any other push or sign failure names the target, a failure before it
// the base.
func buildErr(cfg *config, res *pipeline.Result, err error) error {
	step := "build"
	if res != nil && len(res.Phases) > 0 {
		step = res.Phases[len(res.Phases)-1].Name
	}
	switch step {
	case "render":
		return invalidf("spec.units/spec.files", "%v", err)
	case "preflight", "preflight-written":
		return invalidf("spec.units/spec.files (checked with "+cfg.field("preflight")+")", "%v", err)
	}
	creds := "the extension's registry credentials"
	if cfg.RegistrySecretRef != nil {
		creds = cfg.field("registrySecretRef")
	}
	if f := registryFault("build step "+step, creds, err); f != nil {
		return f
	}
	switch step {
	case "push", "tag", "sign", "attest":
		return fieldErr(cfg.field("target"), err)
	}
	return fieldErr(cfg.field("base")+" ("+step+")", err)
}

// read reads what the build needs besides the settings: the OSC (as the
// file the pipeline reads), the secretRef Secrets when they are baked,
// the registry credentials and the signing key.
func (a *Actuator) read(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, s *settings, dir string) (read, error) {
	rd := read{osc: filepath.Join(dir, "osc.yaml"), cacheDir: a.options.IndexCacheDir}
	b, err := oscDocument(osc)
	if err != nil {
		return rd, err
	}
	if err := os.WriteFile(rd.osc, b, 0o600); err != nil {
		return rd, err
	}
	if buildsettings.True(s.config.BakeSecrets) {
		if rd.secretsDir, err = a.writeSecretRefs(ctx, osc, filepath.Join(dir, "secretrefs")); err != nil {
			return rd, err
		}
	}
	reg := a.options.Registry
	kc, cred, err := a.keychain(ctx, osc, s.config, dir)
	if err != nil {
		return rd, err
	}
	reg.Keychain = kc
	rd.publish, rd.sign, reg.Shared = a.shared.Options(cred)
	rd.registry = &reg
	rd.signingKey, _, err = a.signingKey(ctx, osc, s.config)
	return rd, err
}
