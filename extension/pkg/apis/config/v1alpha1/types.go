package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/oslayer/oslayer/pipeline/settings"
)

// Placeholders of Target, Base, MachineImage.Base and
// preflight.expectVersion.
const (
	// PlaceholderNamespace is the OSC's namespace: the shoot's namespace
	// in the seed (shoot--PROJECT--NAME).
	PlaceholderNamespace = "{namespace}"
	// PlaceholderProject is the shoot's project (from the Cluster).
	PlaceholderProject = "{project}"
	// PlaceholderShoot is the shoot's name (from the Cluster).
	PlaceholderShoot = "{shoot}"
	// PlaceholderPool is the worker pool: the OSC's label
	// worker.gardener.cloud/pool.
	PlaceholderPool = "{pool}"
	// PlaceholderVersion is the machine image version.
	PlaceholderVersion = "{version}"
)

// OperatingSystemConfiguration is spec.providerConfig of an
// OperatingSystemConfig of the extension's type: how the worker pool's
// image is built, where it goes and how it is signed.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type OperatingSystemConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// Images are the base images by machine image version (the pool's
	// machine image version, or spec.inPlaceUpdates.operatingSystemVersion
	// during an in-place update). A version not listed takes Base.
	Images []MachineImage `json:"images,omitempty"`
	// Base is the base image of a version not in Images: a registry
	// reference (pin it @sha256:...), {version} is replaced by the
	// version (quay.io/fedora/fedora-coreos:{version}).
	Base string `json:"base,omitempty"`
	// Target is the pool image's repository, REG/REPO[:TAG], with the
	// placeholders {namespace}, {project}, {shoot}, {pool} and
	// {version} (registry.example/os/{namespace}/{pool}). The tag
	// defaults to the version (characters a tag cannot hold become _).
	Target string `json:"target"`
	// Arch are the architectures to build for (none: amd64; see the
	// oslayer build --arch flag).
	Arch []string `json:"arch,omitempty"`
	// RegistrySecretRef is a Secret (kubernetes.io/dockerconfigjson)
	// with the credentials to pull the base and push the pool image.
	RegistrySecretRef *SecretReference `json:"registrySecretRef,omitempty"`
	// Signing signs the pool image (nil: unsigned; new machines then boot
	// it without a signature policy).
	Signing *Signing `json:"signing,omitempty"`
	// Settings are the build settings every oslayer front-end writes the
	// same way: baseIndex, preflight (its expectVersion may hold
	// {version}, the machine image version), bakeSecrets (the content of
	// secretRef files; default: they stay runtime-delivered, written by
	// the node agent), strict, allowTopLevel.
	settings.Settings `json:",inline"`
}

// MachineImage is the base image of one machine image version.
type MachineImage struct {
	// Version is the machine image version.
	Version string `json:"version"`
	// Base is its base image (pin it @sha256:...).
	Base string `json:"base"`
}

// SecretReference names a Secret. In a providerConfig, Name is the name
// of the Secret's entry in the shoot's spec.resources (Gardener's
// referenced resources: gardenlet copies the Secret into the shoot's
// namespace in the seed, where the extension reads it), and Namespace is
// not allowed. In the extension's default configuration it names a
// Secret literally, Namespace defaulting to the extension's own.
type SecretReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// Signing is the signing key of the pool image.
type Signing struct {
	// KeySecretRef is a Secret with the encrypted cosign key (data key
	// cosign.key), its password (cosign.password) and, optionally, the
	// public key (cosign.pub; else derived from the key).
	KeySecretRef SecretReference `json:"keySecretRef"`
	// Referrers also attaches the signature as an OCI 1.1 referrer.
	Referrers bool `json:"referrers,omitempty"`
}

// OperatingSystemConfigurationStatus is status.providerStatus of a
// reconciled OSC: the pool image the extension built.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type OperatingSystemConfigurationStatus struct {
	metav1.TypeMeta `json:",inline"`

	// Image is the pool image, by digest (REG/REPO@sha256:...).
	Image string `json:"image,omitempty"`
	// Version is the machine image version it was built for.
	Version string `json:"version,omitempty"`
	// Base is the base image it was built on.
	Base string `json:"base,omitempty"`
	// InputsDigest covers everything the image was built from.
	InputsDigest string `json:"inputsDigest,omitempty"`
}
