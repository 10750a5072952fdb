package operatingsystemconfig

import (
	"slices"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// refine is the default d refined by the providerConfig pc (nil: d),
// field by field: a string or object (registrySecretRef, signing) pc
// sets replaces d's; arch, when pc sets it, replaces d's; images are
// merged by version (pc's entry of a version replaces d's, its other
// entries follow d's); the build settings (baseIndex, preflight,
// bakeSecrets, strict, allowTopLevel) are refined as settings.Refine
// says (lists replace, booleans are true when either sets them,
// preflight field by field). Neither d nor pc is changed.
func refine(d, pc *configv1alpha1.OperatingSystemConfiguration) *configv1alpha1.OperatingSystemConfiguration {
	out := d.DeepCopy()
	if pc == nil {
		return out
	}
	pc = pc.DeepCopy()
	set(&out.Target, pc.Target)
	set(&out.Base, pc.Base)
	setList(&out.Arch, pc.Arch)
	out.Settings = out.Settings.Refine(pc.Settings)
	for _, im := range pc.Images {
		if i := slices.IndexFunc(out.Images, func(o configv1alpha1.MachineImage) bool { return o.Version == im.Version }); i >= 0 {
			out.Images[i] = im
		} else {
			out.Images = append(out.Images, im)
		}
	}
	set(&out.RegistrySecretRef, pc.RegistrySecretRef)
	set(&out.Signing, pc.Signing)
	return out
}

// set sets *dst to v unless v is its type's zero value (unset).
func set[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// setList sets *dst to v unless v is empty (unset).
func setList[T any](dst *[]T, v []T) {
	if len(v) > 0 {
		*dst = v
	}
}

// setFields are the fields c sets, by JSON name (preflight's as
// preflight.NAME), as refine reads them.
func setFields(c *configv1alpha1.OperatingSystemConfiguration) map[string]bool {
	m := c.Settings.Set()
	for k, v := range map[string]bool{
		"target": c.Target != "", "base": c.Base != "", "arch": len(c.Arch) > 0, "images": len(c.Images) > 0,
		"registrySecretRef": c.RegistrySecretRef != nil, "signing": c.Signing != nil,
	} {
		m[k] = v
	}
	return m
}
