package packagestage

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The tables below are the MCO's, read from
// openshift/machine-config-operator at commit
// 7ff337a4ffac8e7562692181178ede61e4b2eec5:
//   - pkg/controller/common/helpers.go: SupportedExtensions and
//     GetPackagesForSupportedKernelType (the packages of each extension and
//     kernel type),
//   - pkg/helpers/helpers.go: CanonicalizeKernelType (anything but
//     "realtime" and "64k-pages" is the default kernel),
//   - pkg/controller/build/buildrequest/buildrequestopts.go: 64k-pages only
//     on aarch64,
//   - pkg/controller/build/buildrequest/assets/Containerfile.on-cluster-build-template:
//     the steps the on-cluster build runs (extensions installed with
//     rpm-ostree install, the kernel swapped with dnf shell after rpm -q
//     detects the base's kernel, ostree container commit, the usbguard and
//     ipsec tmpfiles).

// Kernel types as MachineConfig spec.kernelType names them.
const (
	KernelDefault  = "default"
	KernelRealtime = "realtime"
	Kernel64kPages = "64k-pages"
)

// extensionPackages maps each supported extension to the packages that
// install it.
var extensionPackages = map[string][]string{
	"two-node-ha":          {"pacemaker", "pcs", "fence-agents-all"},
	"ipsec":                {"NetworkManager-libreswan", "libreswan", "openvswitch3.5-ipsec"},
	"usbguard":             {"usbguard"},
	"kerberos":             {"krb5-workstation", "libkadm5"},
	"kernel-devel":         {"kernel-devel", "kernel-headers"},
	"sandboxed-containers": {"kata-containers"},
	"sysstat":              {"sysstat"},
}

// kernelPackages maps each kernel type to its packages.
var kernelPackages = map[string][]string{
	KernelDefault:  {"kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra"},
	KernelRealtime: {"kernel-rt-core", "kernel-rt-modules", "kernel-rt-modules-extra", "kernel-rt-kvm"},
	Kernel64kPages: {"kernel-64k-core", "kernel-64k-modules", "kernel-64k-modules-core", "kernel-64k-modules-extra"},
}

// SupportedExtensions lists the extension names a MachineConfig may request,
// sorted.
func SupportedExtensions() []string {
	var out []string
	for e := range extensionPackages {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// ExtensionPackages resolves extensions to their packages in the order given
// (the MCO's order: per extension, its packages in table order). An
// unsupported extension is an error naming it and the supported ones.
func ExtensionPackages(exts []string) ([]string, error) {
	var bad []string
	var pkgs []string
	for _, e := range exts {
		p, ok := extensionPackages[e]
		if !ok {
			if !slices.Contains(bad, e) {
				bad = append(bad, e)
			}
			continue
		}
		pkgs = append(pkgs, p...)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("unsupported extensions %q (supported: %s)", bad, strings.Join(SupportedExtensions(), ", "))
	}
	return pkgs, nil
}

// CanonicalKernelType returns the kernel type the MCO applies for a
// spec.kernelType value: "realtime" and "64k-pages" stay, anything else is
// "default".
func CanonicalKernelType(k string) string {
	if k == KernelRealtime || k == Kernel64kPages {
		return k
	}
	return KernelDefault
}

// KernelPackages returns the packages of a (canonical) kernel type.
func KernelPackages(kernelType string) []string {
	return slices.Clone(kernelPackages[CanonicalKernelType(kernelType)])
}
