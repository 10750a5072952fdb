package v1alpha1

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a complete configuration c (the one a build is made
// from): ValidateFields, and a target and a base (base or images) are
// required. Every error names its field under fld (spec.providerConfig).
// What the build specification checks itself (architectures, preflight
// check names and limits) is checked when the specification is made, and
// named the same way.
func Validate(c *OperatingSystemConfiguration, fld *field.Path) field.ErrorList {
	errs := ValidateFields(c, fld)
	if c.Target == "" {
		errs = append(errs, field.Required(fld.Child("target"), "REG/REPO[:TAG] with {namespace}, {project}, {shoot}, {pool}, {version}"))
	}
	if c.Base == "" && len(c.Images) == 0 {
		errs = append(errs, field.Required(fld.Child("base"), "give base or images"))
	}
	return errs
}

// ValidateFields checks the fields c sets, and requires none: a
// configuration that another refines (the extension's default, or a
// providerConfig that refines it) may leave fields to the other. Errors
// name their field under fld (nil: the field names alone).
func ValidateFields(c *OperatingSystemConfiguration, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Target != "" {
		errs = append(errs, validateTarget(c.Target, fld.Child("target"))...)
	}
	seen := map[string]bool{}
	for i, im := range c.Images {
		p := fld.Child("images").Index(i)
		if im.Version == "" {
			errs = append(errs, field.Required(p.Child("version"), "the machine image version"))
		} else if seen[im.Version] {
			errs = append(errs, field.Duplicate(p.Child("version"), im.Version))
		}
		seen[im.Version] = true
		errs = append(errs, validateImage(im.Base, p.Child("base"))...)
	}
	if c.Base != "" {
		errs = append(errs, validateImage(c.Base, fld.Child("base"))...)
	}
	if r := c.RegistrySecretRef; r != nil && r.Name == "" {
		errs = append(errs, field.Required(fld.Child("registrySecretRef", "name"), ""))
	}
	if s := c.Signing; s != nil && s.KeySecretRef.Name == "" {
		errs = append(errs, field.Required(fld.Child("signing", "keySecretRef", "name"), ""))
	}
	for i, d := range c.AllowTopLevel {
		if d == "" || strings.Contains(d, "/") {
			errs = append(errs, field.Invalid(fld.Child("allowTopLevel").Index(i), d, "a top-level directory name"))
		}
	}
	return errs
}

// Expand replaces the placeholders of a pattern.
func Expand(pattern string, values map[string]string) string {
	for k, v := range values {
		pattern = strings.ReplaceAll(pattern, k, v)
	}
	return pattern
}

// sample are placeholder values that make a pattern a reference when it
// is one.
var sample = map[string]string{
	PlaceholderNamespace: "shoot--project--name", PlaceholderProject: "project",
	PlaceholderShoot: "name", PlaceholderPool: "pool", PlaceholderVersion: "1.0.0",
}

func validateTarget(t string, p *field.Path) field.ErrorList {
	if left := unknownPlaceholder(t); left != "" {
		return field.ErrorList{field.Invalid(p, t, fmt.Sprintf("unknown placeholder %s", left))}
	}
	if strings.Contains(t, "@") {
		return field.ErrorList{field.Invalid(p, t, "a repository (and tag), not a digest")}
	}
	if _, err := name.NewTag(Expand(t, sample), name.StrictValidation); err != nil {
		if _, err2 := name.NewRepository(Expand(t, sample), name.StrictValidation); err2 != nil {
			return field.ErrorList{field.Invalid(p, t, err.Error())}
		}
	}
	return nil
}

func validateImage(ref string, p *field.Path) field.ErrorList {
	if ref == "" {
		return field.ErrorList{field.Required(p, "a base image reference")}
	}
	v := strings.ReplaceAll(ref, PlaceholderVersion, "1.0.0")
	if strings.ContainsAny(v, "{}") {
		return field.ErrorList{field.Invalid(p, ref, "the only placeholder of a base is {version}")}
	}
	if strings.HasPrefix(v, "oci:") {
		return nil
	}
	if _, err := name.ParseReference(v); err != nil {
		return field.ErrorList{field.Invalid(p, ref, err.Error())}
	}
	return nil
}

// unknownPlaceholder returns the first {...} left after the known ones.
func unknownPlaceholder(s string) string {
	s = Expand(s, sample)
	i := strings.Index(s, "{")
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i:], "}")
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j+1]
}

// ValidateShootReferences checks a providerConfig's Secret references
// (registrySecretRef, signing.keySecretRef) against the shoot's
// resources (spec.resources: name → apiVersion/kind) with
// ValidateShootReference. Errors name their field under fld.
func ValidateShootReferences(c *OperatingSystemConfiguration, resources map[string]string, fld *field.Path) field.ErrorList {
	errs := ValidateShootReference(c.RegistrySecretRef, resources, fld.Child("registrySecretRef"))
	if c.Signing != nil {
		errs = append(errs, ValidateShootReference(&c.Signing.KeySecretRef, resources, fld.Child("signing", "keySecretRef"))...)
	}
	return errs
}

// ValidateShootReference checks one Secret reference of a providerConfig
// (nil or without name: nothing to check): it names a v1 Secret resource
// of the shoot (resources: name → apiVersion/kind), without namespace.
// The admission webhook and the actuator both check references with it.
func ValidateShootReference(r *SecretReference, resources map[string]string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r == nil || r.Name == "" {
		return nil
	}
	if r.Namespace != "" {
		errs = append(errs, field.Forbidden(fld.Child("namespace"), "a providerConfig names a Secret by its entry in Shoot.spec.resources (name), without namespace"))
	}
	switch kind, ok := resources[r.Name]; {
	case !ok:
		errs = append(errs, field.NotFound(fld.Child("name"), r.Name+" (not a resource of the shoot: add it to spec.resources)"))
	case kind != "v1/Secret":
		errs = append(errs, field.Invalid(fld.Child("name"), r.Name, "the shoot's resource is a "+kind+", not a v1 Secret"))
	}
	return errs
}
