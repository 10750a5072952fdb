package controller

import "github.com/oslayer/oslayer/internal/field"

// specText is err's message with each specification field a library
// message names (field.Name: base, arch, preflight.maxLayers) spelled as
// the PoolImage's field (spec.base), the one the user edits.
func specText(err error) string {
	return field.Spell(err, func(n field.Name) string { return "spec." + string(n) })
}
