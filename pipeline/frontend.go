package pipeline

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/machineconfig"
)

// What the in-cluster front-ends (the controller, the Gardener OS
// extension) read from cluster objects before they hand over a
// specification, named here so that they import the pipeline and no
// stage.

// SecretManifest writes a Secret read from a cluster as the manifest the
// inputs take (an OSC Secret, a secretRef Secret, a signing-key Secret;
// gardener.SecretManifest).
func SecretManifest(s *corev1.Secret) ([]byte, error) { return gardener.SecretManifest(s) }

// The MachineConfig API a MachineConfig pool's documents are written in
// (sources/machineconfig).
const (
	MachineConfigAPIVersion = machineconfig.APIVersion
	MachineConfigKind       = machineconfig.Kind
	MachineConfigPoolKind   = machineconfig.PoolKind
	// MachineConfigRoleLabel selects a pool's MachineConfigs by role.
	MachineConfigRoleLabel = machineconfig.RoleLabel
)

// The data keys of a signing-key Secret (sign.SecretKeyField, ...).
const (
	SecretKeyField      = sign.SecretKeyField
	SecretPasswordField = sign.SecretPasswordField
	SecretPublicField   = sign.SecretPublicField
)

// TrustOptions are the node trust files' options (sign.TrustOptions);
// TrustBundle is what Trust writes for nodes.
type (
	TrustOptions = sign.TrustOptions
	TrustBundle  = sign.TrustBundle
)

// PasswordError is a signing key that did not decrypt (sign.PasswordError):
// a front-end says where it takes the password from.
type PasswordError = sign.PasswordError

// Trust returns the trust files a node needs to verify the images of
// repo signed with the public key pub (sign.Trust).
func Trust(repo string, pub []byte, o TrustOptions) (*TrustBundle, error) {
	return sign.Trust(repo, pub, o)
}

// PublishOption and SignOption are the push and sign options a
// front-end shares between builds (Shared.Options gives them; Env.Publish
// and Env.Sign take them).
type (
	PublishOption = publish.Option
	SignOption    = sign.Option
)
