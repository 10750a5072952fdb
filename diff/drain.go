package diff

import "slices"

// LegacyDrain is the daemon's isDrainRequired for first-boot actions
// (openshift/machine-config-operator @ 7ff337a4ffac, pkg/daemon/drain.go):
// a reboot drains; a crio reload or restart drains only for an unsafe
// registries.conf change; none does not drain; anything else drains.
func LegacyDrain(actions []string, r *Result) bool {
	switch {
	case slices.Contains(actions, LegacyReboot):
		return true
	case slices.Contains(actions, LegacyReloadCrio), slices.Contains(actions, LegacyRestartCrio):
		if slices.Contains(r.MCO.Files, pathRegistriesConf) {
			drain, _ := registriesDrain(r)
			return drain
		}
		return false
	case slices.Contains(actions, LegacyNone):
		return false
	}
	return true
}
