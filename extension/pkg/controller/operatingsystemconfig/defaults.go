package operatingsystemconfig

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// Default is the extension's default configuration (--default-config):
// an OperatingSystemConfiguration the operator gives once, which every
// OSC's providerConfig refines (refine). Its Secret references are in the
// extension's own namespace. When it sets the target, the target, its
// registrySecretRef and its signing key are the operator's: a
// providerConfig may not change them (checkOwned).
type Default struct {
	// Config is the configuration, its Secret references' namespaces
	// set.
	Config *configv1alpha1.OperatingSystemConfiguration
	// File is where it was read from (errors name it).
	File string
}

// LoadDefault reads, decodes strictly and validates the default
// configuration in file; Secret references without a namespace get
// namespace (the extension's). Errors name the flag, the file and the
// field.
func LoadDefault(file, namespace string) (*Default, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--default-config: %w", err)
	}
	c, err := configv1alpha1.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("--default-config %s: %w", file, err)
	}
	errs := configv1alpha1.ValidateFields(c, nil)
	refs := map[string]*configv1alpha1.SecretReference{"registrySecretRef": c.RegistrySecretRef}
	if c.Signing != nil {
		refs["signing.keySecretRef"] = &c.Signing.KeySecretRef
	}
	for _, f := range []string{"registrySecretRef", "signing.keySecretRef"} {
		ref := refs[f]
		switch {
		case ref == nil:
		case c.Target == "":
			errs = append(errs, field.Invalid(field.NewPath(f), ref.Name, "needs target: the extension's credentials and signing key are used only with the target it configures"))
		case ref.Namespace == "" && namespace == "":
			errs = append(errs, field.Required(field.NewPath(f, "namespace"), "the extension's own namespace is not known (--namespace)"))
		case ref.Namespace == "":
			ref.Namespace = namespace
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("--default-config %s: %w", file, errs.ToAggregate())
	}
	return &Default{Config: c, File: file}, nil
}

// config is the configuration an OSC is built with: the extension's
// default refined by the OSC's providerConfig, or either alone.
type config struct {
	*configv1alpha1.OperatingSystemConfiguration
	// fromDefault are the fields (JSON names: target,
	// preflight.maxAddedBytes) whose value is the default's; file is the
	// default's file.
	fromDefault map[string]bool
	file        string
}

// field is the path errors name for a field of the configuration (e.g.
// preflight.skip[0]): the providerConfig's, or the default
// configuration's file and field when the value is the default's.
func (c *config) field(name string) string {
	if c.isDefault(name) {
		return "--default-config " + c.file + ": " + name
	}
	return fieldProviderConfig + "." + name
}

// isDefault tells whether the field's value (a JSON path such as
// signing.keySecretRef) is the default configuration's.
func (c *config) isDefault(name string) bool {
	for p := name; p != ""; p = p[:max(strings.LastIndexAny(p, ".["), 0)] {
		if c.fromDefault[p] {
			return true
		}
	}
	return false
}

// configOf is the OSC's configuration: its providerConfig (decoded
// strictly and validated) refining the extension's default, the default
// alone when the OSC has none, the providerConfig alone without a
// default. Errors name the OSC's or the default's field.
func (a *Actuator) configOf(osc *extensionsv1alpha1.OperatingSystemConfig) (*config, error) {
	d := a.options.Default
	pc, err := decodeConfig(osc, d == nil)
	if err != nil {
		return nil, err
	}
	if err := a.checkNamespaces(osc, pc); err != nil {
		return nil, err
	}
	if d == nil {
		return &config{OperatingSystemConfiguration: pc}, nil
	}
	if err := d.checkOwned(pc); err != nil {
		return nil, err
	}
	c := &config{OperatingSystemConfiguration: refine(d.Config, pc), fromDefault: setFields(d.Config), file: d.File}
	if pc != nil {
		for f, set := range setFields(pc) {
			c.fromDefault[f] = c.fromDefault[f] && !set
		}
	}
	if errs := configv1alpha1.Validate(c.OperatingSystemConfiguration, field.NewPath("spec", "providerConfig")); len(errs) > 0 {
		return nil, invalid(fmt.Errorf("%w (neither the providerConfig nor the extension's default configuration, --default-config %s, sets it)", errs.ToAggregate(), d.File))
	}
	return c, nil
}

// decodeConfig decodes spec.providerConfig strictly and validates it:
// complete when required (there is no default), else the fields it sets
// (nil when it has none).
func decodeConfig(osc *extensionsv1alpha1.OperatingSystemConfig, required bool) (*configv1alpha1.OperatingSystemConfiguration, error) {
	pc := osc.Spec.ProviderConfig
	if pc == nil || len(pc.Raw) == 0 {
		if !required {
			return nil, nil
		}
		return nil, invalidf(fieldProviderConfig, "missing: an %s %s is required (the extension has no default configuration)", configv1alpha1.SchemeGroupVersion, "OperatingSystemConfiguration")
	}
	cfg, err := configv1alpha1.Decode(pc.Raw)
	if err != nil {
		return nil, invalidf(fieldProviderConfig, "%v", err)
	}
	validate := configv1alpha1.ValidateFields
	if required {
		validate = configv1alpha1.Validate
	}
	if errs := validate(cfg, field.NewPath("spec", "providerConfig")); len(errs) > 0 {
		return nil, invalid(errs.ToAggregate())
	}
	return cfg, nil
}

// checkNamespaces refuses a providerConfig's Secret reference with a
// namespace: it names a resource of the shoot (Shoot.spec.resources),
// which gardenlet copies into the OSC's namespace; the extension's own
// namespace holds the operator's Secrets, used only through the default
// configuration, and another shoot's namespace holds that shoot's.
func (a *Actuator) checkNamespaces(osc *extensionsv1alpha1.OperatingSystemConfig, pc *configv1alpha1.OperatingSystemConfiguration) error {
	if pc == nil {
		return nil
	}
	refs := map[string]*configv1alpha1.SecretReference{"registrySecretRef": pc.RegistrySecretRef}
	if pc.Signing != nil {
		refs["signing.keySecretRef"] = &pc.Signing.KeySecretRef
	}
	for _, f := range []string{"registrySecretRef", "signing.keySecretRef"} {
		ns := ""
		if r := refs[f]; r != nil {
			ns = r.Namespace
		}
		switch {
		case ns == "":
		case ns == osc.Namespace:
			return invalidf(fieldProviderConfig+"."+f+".namespace", "%q: a providerConfig names a Secret by its entry in Shoot.spec.resources (name), without namespace", ns)
		case ns == a.options.Namespace:
			return invalidf(fieldProviderConfig+"."+f+".namespace", "%q is the extension's own namespace: its Secrets are used only by the extension's default configuration", ns)
		default:
			return invalidf(fieldProviderConfig+"."+f+".namespace", "%q is not the OSC's namespace %q: a providerConfig names only Secrets of its own shoot", ns, osc.Namespace)
		}
	}
	return nil
}

// checkOwned refuses a providerConfig that changes what the operator
// owns: when the default sets the target, the target (a providerConfig
// may only repeat it), registrySecretRef and signing (a providerConfig
// may not set them) are the default's, so that the operator's
// credentials push only to the operator's target and the images pushed
// with them are signed with the operator's key (or not at all).
func (d *Default) checkOwned(pc *configv1alpha1.OperatingSystemConfiguration) error {
	c := d.Config
	if pc == nil || c.Target == "" {
		return nil
	}
	if pc.Target != "" && pc.Target != c.Target {
		return invalidf(fieldProviderConfig+".target", "set by the extension's default configuration (--default-config %s) to %s; a shoot may not change it", d.File, c.Target)
	}
	const why = "set with the target by the extension's default configuration (--default-config %s) to %s; a shoot may not set it"
	if pc.RegistrySecretRef != nil {
		return invalidf(fieldProviderConfig+".registrySecretRef", why, d.File, refString(c.RegistrySecretRef))
	}
	if pc.Signing != nil {
		var k *configv1alpha1.SecretReference
		if c.Signing != nil {
			k = &c.Signing.KeySecretRef
		}
		return invalidf(fieldProviderConfig+".signing", why, d.File, refString(k))
	}
	return nil
}

// refString names a Secret reference ("none" for nil).
func refString(r *configv1alpha1.SecretReference) string {
	if r == nil {
		return "none"
	}
	return r.Namespace + "/" + r.Name
}
