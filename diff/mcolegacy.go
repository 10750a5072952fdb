package diff

import (
	"path/filepath"
	"slices"
)

// The legacy post-config-change actions of the machine-config daemon
// (openshift/machine-config-operator @ 7ff337a4ffac, pkg/daemon/update.go,
// postConfigChangeAction*): what it does on a node's first boot, when the
// NodeDisruptionPolicy API cannot be read.
const (
	LegacyNone        = "none"
	LegacyReloadCrio  = "reload crio"
	LegacyRestartCrio = "restart crio"
	LegacyReboot      = "reboot"
)

// The paths the legacy rules name (pkg/daemon/constants and
// pkg/daemon/daemon.go of the same commit).
const (
	pathKubeletCA           = "/etc/kubernetes/kubelet-ca.crt"
	pathKubeletAuth         = "/var/lib/kubelet/config.json"
	pathNMStateOpenShift    = "/etc/nmstate/openshift"
	pathRegistriesConf      = "/etc/containers/registries.conf"
	pathGPGNoReboot         = "/etc/machine-config-daemon/no-reboot/containers-gpg.pub"
	pathPolicyJSON          = "/etc/containers/policy.json"
	pathUserCABundle        = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
	pathSigstoreRegistriesD = "/etc/containers/registries.d"
	pathCrioPolicies        = "/etc/crio/policies"
	pathCredProviders       = "/etc/kubernetes/credential-providers"
	pathCrioCredProvider    = "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf"
	pathIRIRegistryConfig   = "/etc/iri-registry"
	pathIRILoadImageScript  = "/usr/local/bin/load-registry-image.sh"
	pathIRIRootCA           = "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt"
	unitIRIRegistry         = "iri-registry.service"
	unitUpdateCATrust       = "coreos-update-ca-trust.service"
)

// LegacyAction is calculatePostConfigChangeAction: a change of
// osImageURL, kernel arguments, FIPS, units, kernel type or extensions
// reboots; otherwise the file rules decide. (A FIPS change never gets
// here on a node: reconcilable refuses it first; predictOpenShift reports
// it refused.)
func LegacyAction(c MCOChange) []string {
	if c.OSImageURL || c.KernelArgs || c.FIPS || len(c.Units) > 0 || c.KernelType || c.Extensions {
		return []string{LegacyReboot}
	}
	return legacyFileActions(c.Files)
}

// legacyFileActions is calculatePostConfigChangeActionFromMCDiffs.
func legacyFileActions(files []string) []string {
	actions := []string{LegacyNone}
	for _, p := range files {
		switch {
		case p == pathKubeletCA || p == pathKubeletAuth:
			continue
		case p == pathRegistriesConf || p == pathGPGNoReboot || p == pathPolicyJSON,
			filepath.Dir(p) == pathSigstoreRegistriesD:
			if !slices.Contains(actions, LegacyRestartCrio) {
				actions = []string{LegacyReloadCrio}
			}
		case p == pathUserCABundle:
			actions = []string{LegacyRestartCrio}
		case filepath.Dir(p) == pathNMStateOpenShift:
			continue
		default:
			return []string{LegacyReboot}
		}
	}
	return actions
}
