package machineconfig

import "slices"

// Credentials the platform delivers to the node itself. A rendered
// MachineConfig holds the cluster's pull secret, and the node needs it
// before it can pull any image (the OS image included); the machine-config
// daemon writes it on every node from the rendered MachineConfig, and the
// machine-config server puts it, with the kubelet's bootstrap kubeconfig,
// into every first-boot Ignition config. Baked into an image they would be
// readable by everyone who can pull the image, and stale after the next
// rotation. Such a file is therefore reported as model.Runtime
// (ReasonCredential) with the digest of its content, so that a change of
// it is still a change of the inputs (and of the daemon's action), unless
// Options.BakeCredential asks for it.
//
// Sources (openshift/machine-config-operator @
// 7ff337a4ffac8e7562692181178ede61e4b2eec5):
//   - /var/lib/kubelet/config.json: templates/common/_base/files/pull-secret.yaml
//     (the rendered MachineConfig), pkg/daemon/constants/constants.go
//     KubeletAuthFile (the daemon and CRI-O pull with it:
//     templates/*/01-*-container-runtime/_base/files/crio.yaml
//     global_auth_file);
//   - /etc/kubernetes/kubeconfig: pkg/server/server.go appendKubeConfig
//     (defaultMachineKubeConfPath; the kubelet's --bootstrap-kubeconfig in
//     templates/*/01-*-kubelet/_base/units/kubelet.service.yaml).
var CredentialPaths = []string{
	"/var/lib/kubelet/config.json",
	"/etc/kubernetes/kubeconfig",
}

// ReasonCredential is the runtime reason of a credential file.
const ReasonCredential = "a credential the platform writes on the node itself (machine-config daemon, first-boot Ignition); an image is readable by everyone who can pull it (allowSecrets bakes it)"

// IsCredential reports whether nodePath is one of CredentialPaths.
func IsCredential(nodePath string) bool { return slices.Contains(CredentialPaths, nodePath) }

// runtimeCredential reports whether the file at p is delivered at runtime
// instead of being baked.
func (v *converter) runtimeCredential(p string) bool {
	return IsCredential(p) && (v.bake == nil || !v.bake(p))
}
