package operatingsystemconfig

import (
	"context"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/extensions"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// Field paths of the OSC that errors name.
const (
	fieldProviderConfig = "spec.providerConfig"
	fieldPoolLabel      = "metadata.labels[" + v1beta1constants.LabelWorkerPool + "]"
	fieldOSVersion      = "spec.inPlaceUpdates.operatingSystemVersion"
)

// settings are what one OSC's build is made from besides its units and
// files: its providerConfig, pool, machine image version, base and target.
type settings struct {
	config  *config
	pool    string
	version string
	base    string
	// target is REG/REPO:TAG, repository its repository.
	target, repository string
	values             map[string]string
}

// settingsOf decodes and checks the OSC's configuration (configOf) and
// resolves its placeholders; errors name the OSC's or the default's field.
func (a *Actuator) settingsOf(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig) (*settings, error) {
	cfg, err := a.configOf(osc)
	if err != nil {
		return nil, err
	}
	pool := osc.Labels[v1beta1constants.LabelWorkerPool]
	if pool == "" {
		return nil, invalidf(fieldPoolLabel, "missing: the OSC names no worker pool")
	}
	cluster, err := extensions.GetCluster(ctx, a.client, osc.Namespace)
	if err != nil {
		return nil, fieldErr("metadata.namespace", err)
	}
	s := &settings{config: cfg, pool: pool, version: machineImageVersion(osc, cluster, pool)}
	if s.base, err = baseOf(cfg, s.version); err != nil {
		return nil, err
	}
	s.values = map[string]string{
		configv1alpha1.PlaceholderNamespace: osc.Namespace, configv1alpha1.PlaceholderPool: pool,
		configv1alpha1.PlaceholderVersion: s.version,
	}
	s.values[configv1alpha1.PlaceholderShoot], s.values[configv1alpha1.PlaceholderProject] = shootOf(osc.Namespace, cluster)
	if s.target, s.repository, err = targetOf(cfg.Target, cfg.field("target"), s.values); err != nil {
		return nil, err
	}
	return s, nil
}

// machineImageVersion is the version of an in-place update, else the
// pool's machine image version in the shoot ("" when neither is known).
func machineImageVersion(osc *extensionsv1alpha1.OperatingSystemConfig, c *extensions.Cluster, pool string) string {
	if ip := osc.Spec.InPlaceUpdates; ip != nil && ip.OperatingSystemVersion != "" {
		return ip.OperatingSystemVersion
	}
	if c == nil || c.Shoot == nil {
		return ""
	}
	for _, w := range c.Shoot.Spec.Provider.Workers {
		if w.Name == pool && w.Machine.Image != nil && w.Machine.Image.Version != nil {
			return *w.Machine.Image.Version
		}
	}
	return ""
}

// baseOf is the version's base: its entry in images, else base.
func baseOf(cfg *config, version string) (string, error) {
	for _, im := range cfg.Images {
		if im.Version == version {
			return im.Base, nil
		}
	}
	if cfg.Base == "" {
		return "", invalidf(cfg.field("images"), "no base for machine image version %q (%s or the shoot's worker pool) and no base", version, fieldOSVersion)
	}
	if strings.Contains(cfg.Base, configv1alpha1.PlaceholderVersion) && version == "" {
		return "", invalidf(fieldOSVersion, "no machine image version (neither here nor in the shoot's worker pool) for base %q", cfg.Base)
	}
	return strings.ReplaceAll(cfg.Base, configv1alpha1.PlaceholderVersion, version), nil
}

// shootOf is the shoot's name and project: the Cluster's, else from the
// namespace (shoot--PROJECT--NAME).
func shootOf(ns string, c *extensions.Cluster) (shoot, project string) {
	if c != nil && c.Shoot != nil && c.Shoot.Name != "" {
		return c.Shoot.Name, strings.TrimPrefix(c.Shoot.Namespace, "garden-")
	}
	parts := strings.SplitN(strings.TrimPrefix(ns, "shoot--"), "--", 2)
	if len(parts) == 2 {
		return parts[1], parts[0]
	}
	return ns, ""
}

// notTag are the characters a tag cannot hold.
var notTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// targetOf expands the target pattern; the tag defaults to the version.
// Errors name fld.
func targetOf(pattern, fld string, values map[string]string) (target, repository string, err error) {
	t := configv1alpha1.Expand(pattern, values)
	if _, err := name.NewTag(t, name.StrictValidation); err != nil {
		tag := notTag.ReplaceAllString(values[configv1alpha1.PlaceholderVersion], "_")
		if tag == "" {
			tag = "latest"
		}
		t += ":" + strings.TrimLeft(tag, ".-")
	}
	ref, err := name.NewTag(t, name.StrictValidation)
	if err != nil {
		return "", "", invalidf(fld, "%q gives %q: %v", pattern, t, err)
	}
	return ref.String(), ref.Context().Name(), nil
}
