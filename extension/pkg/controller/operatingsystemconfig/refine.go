package operatingsystemconfig

import (
	"slices"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// refine is the default d refined by the providerConfig pc (nil: d),
// field by field: a string, number or object (registrySecretRef,
// signing) pc sets replaces d's; a list pc sets (arch, allowTopLevel,
// preflight.skip, preflight.allowSecrets) replaces d's; images are merged
// by version (pc's entry of a version replaces d's, its other entries
// follow d's); a boolean is true when either sets it; preflight is
// refined field by field the same way. Neither d nor pc is changed.
func refine(d, pc *configv1alpha1.OperatingSystemConfiguration) *configv1alpha1.OperatingSystemConfiguration {
	out := d.DeepCopy()
	if pc == nil {
		return out
	}
	pc = pc.DeepCopy()
	set(&out.Target, pc.Target)
	set(&out.Base, pc.Base)
	set(&out.BaseIndex, pc.BaseIndex)
	set(&out.BakeSecrets, pc.BakeSecrets)
	set(&out.Strict, pc.Strict)
	setList(&out.Arch, pc.Arch)
	setList(&out.AllowTopLevel, pc.AllowTopLevel)
	for _, im := range pc.Images {
		if i := slices.IndexFunc(out.Images, func(o configv1alpha1.MachineImage) bool { return o.Version == im.Version }); i >= 0 {
			out.Images[i] = im
		} else {
			out.Images = append(out.Images, im)
		}
	}
	set(&out.RegistrySecretRef, pc.RegistrySecretRef)
	set(&out.Signing, pc.Signing)
	if p := pc.Preflight; p != nil {
		if out.Preflight == nil {
			out.Preflight = &configv1alpha1.Preflight{}
		}
		o := out.Preflight
		setList(&o.Skip, p.Skip)
		set(&o.ExpectVersion, p.ExpectVersion)
		set(&o.FatalWarnings, p.FatalWarnings)
		set(&o.DenyUsrOverride, p.DenyUsrOverride)
		set(&o.RequireBase, p.RequireBase)
		setList(&o.AllowSecrets, p.AllowSecrets)
		set(&o.MaxAddedBytes, p.MaxAddedBytes)
		set(&o.WarnLayers, p.WarnLayers)
		set(&o.MaxLayers, p.MaxLayers)
	}
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
	m := map[string]bool{
		"target": c.Target != "", "base": c.Base != "", "baseIndex": c.BaseIndex != "",
		"bakeSecrets": c.BakeSecrets, "strict": c.Strict, "arch": len(c.Arch) > 0,
		"allowTopLevel": len(c.AllowTopLevel) > 0, "images": len(c.Images) > 0,
		"registrySecretRef": c.RegistrySecretRef != nil, "signing": c.Signing != nil,
	}
	if p := c.Preflight; p != nil {
		for k, v := range map[string]bool{
			"skip": len(p.Skip) > 0, "expectVersion": p.ExpectVersion != "", "fatalWarnings": p.FatalWarnings,
			"denyUsrOverride": p.DenyUsrOverride, "requireBase": p.RequireBase != "", "allowSecrets": len(p.AllowSecrets) > 0,
			"maxAddedBytes": p.MaxAddedBytes != "", "warnLayers": p.WarnLayers != 0, "maxLayers": p.MaxLayers != 0,
		} {
			m["preflight."+k] = v
		}
	}
	return m
}
