package diff

import (
	"fmt"
	"reflect"

	"github.com/BurntSushi/toml"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
)

// SafeRegistriesChange is the daemon's isSafeContainerRegistryConfChanges
// (openshift/machine-config-operator @ 7ff337a4ffac, pkg/daemon/drain.go):
// a registries.conf change needs no drain when no unqualified-search
// registry is removed or reordered, no registry is removed, a changed
// registry keeps its prefix, location, blocked and insecure and all its
// mirrors, and every added mirror or registry pulls by digest only.
func SafeRegistriesChange(oldData, newData []byte) (bool, error) {
	var o, n sysregistriesv2.V2RegistriesConf
	if _, err := toml.Decode(string(oldData), &o); err != nil {
		return false, fmt.Errorf("OLD %s: %w", pathRegistriesConf, err)
	}
	if _, err := toml.Decode(string(newData), &n); err != nil {
		return false, fmt.Errorf("NEW %s: %w", pathRegistriesConf, err)
	}
	if len(o.UnqualifiedSearchRegistries) > len(n.UnqualifiedSearchRegistries) {
		return false, nil
	}
	for i, r := range o.UnqualifiedSearchRegistries {
		if n.UnqualifiedSearchRegistries[i] != r {
			return false, nil
		}
	}
	om, nm := byScope(o.Registries), byScope(n.Registries)
	for scope := range om {
		if _, ok := nm[scope]; !ok {
			return false, nil
		}
	}
	for scope, nr := range nm {
		or, ok := om[scope]
		switch {
		case !ok:
			if !allDigestOnly(nr) {
				return false, nil
			}
		case !reflect.DeepEqual(or, nr) && !safeRegistryChange(or, nr):
			return false, nil
		}
	}
	return true, nil
}

// byScope keys registries by prefix, or location without one.
func byScope(regs []sysregistriesv2.Registry) map[string]sysregistriesv2.Registry {
	m := map[string]sysregistriesv2.Registry{}
	for _, r := range regs {
		scope := r.Location
		if r.Prefix != "" {
			scope = r.Prefix
		}
		m[scope] = r
	}
	return m
}

// safeRegistryChange checks a registry present on both sides.
func safeRegistryChange(o, n sysregistriesv2.Registry) bool {
	if o.Prefix != n.Prefix || o.Location != n.Location || o.Blocked != n.Blocked || o.Insecure != n.Insecure {
		return false
	}
	for _, m := range o.Mirrors {
		if _, ok := mirror(m.Location, n.Mirrors); !ok {
			return false
		}
	}
	for _, m := range n.Mirrors {
		om, found := mirror(m.Location, o.Mirrors)
		if found && m.PullFromMirror != om.PullFromMirror && m.PullFromMirror != sysregistriesv2.MirrorByDigestOnly {
			return false
		}
		if !found && m.PullFromMirror != sysregistriesv2.MirrorByDigestOnly && !n.MirrorByDigestOnly {
			return false
		}
	}
	return true
}

func mirror(loc string, ms []sysregistriesv2.Endpoint) (sysregistriesv2.Endpoint, bool) {
	for _, m := range ms {
		if m.Location == loc {
			return m, true
		}
	}
	return sysregistriesv2.Endpoint{}, false
}

// allDigestOnly is allDigestOnlyMirror.
func allDigestOnly(r sysregistriesv2.Registry) bool {
	if len(r.Mirrors) == 0 {
		return r.MirrorByDigestOnly
	}
	for _, m := range r.Mirrors {
		if m.PullFromMirror != sysregistriesv2.MirrorByDigestOnly {
			return false
		}
	}
	return true
}
